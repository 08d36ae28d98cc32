"""The SNS-compatible Query API for topics on the gateway's endpoint, as Ceph RGW serves it (and
s3-tests' test_sns.py, `aws sns --endpoint-url` and boto3's `sns` client speak it): form POSTs to
`/` signed with SigV4 for the service `sns` (the IAM and STS handler hands them over,
gateway/iam/api.py), answered in SNS's XML
(https://docs.aws.amazon.com/sns/latest/api/).

CreateTopic, GetTopicAttributes, SetTopicAttributes, ListTopics, DeleteTopic, on the caller's
account's topics; each authorised as `sns:<Action>` on the topic's ARN by the one authorisation
function (authorize.decide_account: an account's root may, an IAM identity as its policies say).
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from aiohttp import web

from ..config import Settings
from ..iam.api import query_answer, query_error
from ..iam.call import Entries, arn_of
from ..s3.auth import Authenticator, SignedRequest, claimed_key, is_nobody
from ..s3.authorize import decide_account
from ..s3.errors import S3Error
from ..s3.middleware import OPERATION, REQUEST_ID, REQUESTER, USER
from ..store import Store
from ..users import User
from . import targets, topics
from .networks import OutsideNetworks, networks, resolve
from .topics import Topic, TopicError

NAMESPACE = "https://sns.amazonaws.com/doc/2010-03-31/"
MAX_TOPICS = 1000  # per account (ListTopics answers them in one page)


class _Call:
    def __init__(self, api: TopicsApi, user: User, params: dict[str, str], secure: bool):
        self.api = api
        self.user = user
        self.params = params
        self.secure = secure

    @property
    def account(self) -> str:
        return self.user.canonical_id

    def required(self, name: str) -> str:
        value = self.params.get(name)
        if not value:
            raise TopicError("InvalidParameter", f"Invalid parameter: {name}")
        return value

    def topic_name(self) -> str:
        """The caller's topic a TopicArn names (another account's is not the caller's to
        touch: a topic is shared only through its Policy, which lets other accounts' buckets
        publish their events to it)."""
        arn = self.required("TopicArn")
        named = topics.parse_arn(arn)
        if named is None or named.service != "sns" or named.region != self.api.settings.region:
            raise TopicError("InvalidParameter", "Invalid parameter: TopicArn")
        if named.account != self.user.account:
            raise TopicError(
                "AuthorizationError",
                f"User: {arn_of(self.user)} is not authorized to access {arn}",
                403,
            )
        return named.name

    def arn(self, name: str) -> str:
        return topics.arn(self.api.settings.region, self.user.account, name)

    def open(self, name: str, doc: str) -> Topic:
        return Topic.from_doc(
            self.account, name, self.api.settings.region, doc, self.api.keys().open_topic_secret
        )

    async def checked(self, topic: Topic) -> Topic:
        """A topic about to be kept: its endpoint well formed, a password only over HTTPS,
        and every address its host resolves to inside --notify-networks now (and again at
        each connection)."""
        topics.check_endpoint(topic.endpoint, self.secure)
        if topic.endpoint:
            parts = urlsplit(topic.endpoint)
            host = parts.hostname or ""
            port = parts.port or targets.default_port(parts.scheme)
            try:
                addresses = await resolve(host, port)
            except OSError:
                addresses = []  # not resolvable yet (a service not up): judged at delivery
            try:
                networks(self.api.settings.notify_networks).check(host, addresses)
            except OutsideNetworks as exc:
                raise TopicError(
                    "InvalidParameter",
                    f"Invalid parameter: push-endpoint: {host} resolves to {exc.address}, "
                    "outside the networks this gateway may notify (--notify-networks)",
                ) from None
        return topic


def _attributes(params: dict[str, str]) -> dict[str, str]:
    """`Attributes.entry.N.key` / `.value` (the query protocol's map), in N's order."""
    found: dict[int, dict[str, str]] = {}
    for name, value in params.items():
        head, _, rest = name.partition("Attributes.entry.")
        number, _, part = rest.partition(".")
        if head or not number.isdigit() or part not in ("key", "value"):
            continue
        found.setdefault(int(number), {})[part] = value
    return {e["key"]: e.get("value", "") for _, e in sorted(found.items()) if "key" in e}


async def create_topic(call: _Call) -> dict[str, Any]:
    name = call.required("Name")
    if not topics.valid_name(name):
        raise TopicError("InvalidParameter", "Invalid parameter: Topic Name")
    topic = Topic(call.account, name, call.api.settings.region)
    for key, value in _attributes(call.params).items():
        if key not in topics.ATTRIBUTES:
            raise TopicError("InvalidParameter", f"Invalid parameter: Attributes: {key}")
        topic = topic.with_attribute(key, value)
    topic = await call.checked(topic)
    doc = topic.to_doc(call.api.keys().seal_topic_secret)

    def change(docs: dict[str, str]) -> tuple[dict[str, str], None]:
        # Ceph's CreateTopic of an existing name replaces its attributes (AWS's would refuse
        # different ones); s3-tests rely on Ceph's.
        if name not in docs and len(docs) >= MAX_TOPICS:
            raise TopicError("TopicLimitExceeded", "Topic limit exceeded", 403)
        docs[name] = doc
        return docs, None

    await call.api.store.change_docs("topics", call.account, change)
    return {"TopicArn": topic.arn}


async def get_topic_attributes(call: _Call) -> dict[str, Any]:
    name = call.topic_name()
    doc = (await call.api.store.get_docs("topics", call.account)).get(name)
    if doc is None:
        raise TopicError("NotFound", "Topic does not exist", 404)
    shown = call.open(name, doc).shown()
    return {"Attributes": Entries({"key": k, "value": v} for k, v in shown.items())}


async def set_topic_attributes(call: _Call) -> None:
    name = call.topic_name()
    attribute = call.required("AttributeName")
    value = call.params.get("AttributeValue", "")
    if attribute not in topics.ATTRIBUTES:
        raise TopicError("InvalidParameter", f"Invalid parameter: AttributeName: {attribute}")
    doc = (await call.api.store.get_docs("topics", call.account)).get(name)
    if doc is None:
        raise TopicError("NotFound", "Topic does not exist", 404)
    topic = await call.checked(call.open(name, doc).with_attribute(attribute, value))
    new = topic.to_doc(call.api.keys().seal_topic_secret)

    def change(docs: dict[str, str]) -> tuple[dict[str, str], None]:
        if name not in docs:
            raise TopicError("NotFound", "Topic does not exist", 404)
        docs[name] = new
        return docs, None

    await call.api.store.change_docs("topics", call.account, change)


async def list_topics(call: _Call) -> dict[str, Any]:
    names = sorted(await call.api.store.get_docs("topics", call.account))
    return {"Topics": [{"TopicArn": call.arn(n)} for n in names]}


async def delete_topic(call: _Call) -> None:
    name = call.topic_name()

    def change(docs: dict[str, str]) -> tuple[dict[str, str], None]:
        docs.pop(name, None)  # deleting a topic that does not exist is no error (SNS's)
        return docs, None

    await call.api.store.change_docs("topics", call.account, change)


ACTIONS: dict[str, Callable[[_Call], Awaitable[Any]]] = {
    "CreateTopic": create_topic,
    "GetTopicAttributes": get_topic_attributes,
    "SetTopicAttributes": set_topic_attributes,
    "ListTopics": list_topics,
    "DeleteTopic": delete_topic,
}


# S3's authentication errors as SNS names them.
_AUTH_ERRORS = {
    "InvalidAccessKeyId": ("InvalidClientTokenId", 403),
    "InvalidToken": ("InvalidClientTokenId", 403),
    "ExpiredToken": ("ExpiredToken", 403),
    "SignatureDoesNotMatch": ("SignatureDoesNotMatch", 403),
    "RequestTimeTooSkewed": ("RequestExpired", 400),
    "AccessDenied": ("AuthorizationError", 403),
}


class TopicsApi:
    """The handler of SNS requests."""

    def __init__(self, store: Store, settings: Settings) -> None:
        self.store = store
        self.settings = settings

    def keys(self) -> Any:
        if self.store.keys is None:
            raise TopicError("InternalError", "The gateway's keys are not available", 500)
        return self.store.keys

    async def perform(
        self, user: User, name: str, params: dict[str, str], secure: bool
    ) -> dict[str, Any] | None:
        """SNS's action `name` with its `params` for `user`, authorised as `sns:<name>` on the
        topic's ARN: the query API's path and the console's (console/topics.py) alike.
        `secure`: the request came over TLS (a password in an endpoint only then). TopicError
        as SNS answers it."""
        action = ACTIONS.get(name)
        if action is None:
            raise TopicError("InvalidAction", f"Could not find operation {name}.")
        call = _Call(self, user, params, secure)
        resource = (
            call.arn(params.get("Name", ""))
            if name == "CreateTopic"
            else params.get("TopicArn") or call.arn("*")
        )
        if not decide_account(user, f"sns:{name}", resource):
            raise TopicError(
                "AuthorizationError",
                f"User: {arn_of(user)} is not authorized to perform: sns:{name} on "
                f"resource: {resource}",
                403,
            )
        return await action(call)

    async def __call__(
        self, request: web.Request, authenticator: Authenticator
    ) -> web.StreamResponse:
        request_id = request.get(REQUEST_ID, "")
        try:
            try:
                body = await request.read()
            except web.HTTPRequestEntityTooLarge:
                raise TopicError(
                    "InvalidParameter", "The request body is too large.", 413
                ) from None
            try:
                params = dict(parse_qsl(body.decode(), keep_blank_values=True))
            except UnicodeDecodeError:
                raise TopicError("InvalidParameter", "The request is not UTF-8.") from None
            name = params.get("Action", "")
            request[OPERATION] = f"SNS.{name}" if name in ACTIONS else "SNS.Unknown"
            user = await self._identify(request, authenticator, body)
            result = await self.perform(user, name, params, request.secure)
        except TopicError as exc:
            return query_error(exc.code, exc.message, exc.status, NAMESPACE, request_id)
        return query_answer(name, NAMESPACE, result, request_id)

    async def _identify(
        self, request: web.Request, authenticator: Authenticator, body: bytes
    ) -> User:
        raw_path, _, query = request.raw_path.partition("?")
        if claimed_key(request.headers, query) is None:
            raise TopicError(
                "MissingAuthenticationToken", "Request is missing Authentication Token", 403
            )
        if not request.headers.get("authorization", "").startswith("AWS4-HMAC-SHA256 "):
            # Only SigV4's Authorization header signs the body (iam/api.py says why).
            raise TopicError("IncompleteSignature", "SNS requests must be signed with SigV4.")
        signed = SignedRequest(request.method, raw_path, query, request.headers)
        try:
            auth = await authenticator.identify(signed, "sns", hashlib.sha256(body).hexdigest())
        except S3Error as exc:
            code, status = _AUTH_ERRORS.get(exc.code, ("InvalidParameter", 400))
            raise TopicError(code, exc.message or exc.code, status) from None
        user = auth.user
        if is_nobody(user):
            raise TopicError("AuthorizationError", "Access denied", 403)
        request[USER] = user.name
        request[REQUESTER] = user.requester
        return user
