"""IAM's and STS's query APIs on the gateway's endpoint: form-encoded POSTs signed for the
service `iam` or `sts` (as aws-cli and the SDKs send them with --endpoint-url), answered in
their XML (https://docs.aws.amazon.com/IAM/latest/APIReference/ and
https://docs.aws.amazon.com/STS/latest/APIReference/). Those signed for `sns` are handed to
SNS's handler (gateway/notify/sns.py).

Each action is authorised by the one authorisation function (`authorize.decide_account`: an
account's root may act on its own account, an IAM identity as its policies allow) and runs on
the rows of the caller's account it needs (account.py, view.py), a change in one Store
transaction.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Mapping
from typing import Any
from urllib.parse import parse_qsl

from aiohttp import web

from ..s3.auth import Authenticator, SignedRequest, claimed_key, is_nobody
from ..s3.authorize import decide_account
from ..s3.errors import S3Error
from ..s3.middleware import OPERATION, REQUEST_ID, REQUESTER, USER
from ..s3.xmltext import escape
from ..store import Store
from ..users import User
from . import account as model
from . import sts
from .account import IamError
from .actions import IAM_ACTIONS
from .call import Call, Entries, arn_of
from .judged import judged, renamed
from .principals import Principals
from .sts import STS_ACTIONS


def is_service_request(request: web.Request, host_bucket: str | None) -> bool:
    """A request for IAM or STS, not S3: a form POSTed to the endpoint's root (S3 has no
    operation there)."""
    return (
        request.method == "POST"
        and host_bucket is None
        and request.raw_path.partition("?")[0] == "/"
        and request.content_type == "application/x-www-form-urlencoded"
    )


def _service_of(request: web.Request) -> str:
    """The service a request's signature names (its credential scope's): sts, sns, else iam."""
    authorization = request.headers.get("authorization", "")
    _, found, rest = authorization.partition("Credential=")
    scope = rest.split(",")[0].split("/") if found else []
    service = scope[3] if len(scope) >= 4 else ""
    return service if service in ("sts", "sns") else "iam"


# Another service's handler, for requests signed for it (SNS's: gateway/notify/sns.py).
Handler = Callable[[web.Request, Authenticator], Awaitable[web.StreamResponse]]


# -- XML -----------------------------------------------------------------------------------


# The query protocol's answers, IAM's, STS's and SNS's alike (gateway/notify/sns.py).


def query_xml(value: Any) -> str:
    if isinstance(value, dict):
        return "".join(f"<{k}>{query_xml(v)}</{k}>" for k, v in value.items() if v is not None)
    if isinstance(value, list):
        item = "entry" if isinstance(value, Entries) else "member"
        return "".join(f"<{item}>{query_xml(v)}</{item}>" for v in value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return escape(str(value))


def query_answer(
    action: str, namespace: str, result: dict[str, Any] | None, request_id: str
) -> web.Response:
    inner = "" if result is None else f"<{action}Result>{query_xml(result)}</{action}Result>"
    body = (
        f'<{action}Response xmlns="{namespace}">{inner}'
        f"<ResponseMetadata><RequestId>{request_id}</RequestId></ResponseMetadata>"
        f"</{action}Response>"
    )
    return web.Response(text=body, content_type="text/xml")


def query_error(
    code: str, message: str, status: int, namespace: str, request_id: str
) -> web.Response:
    kind = "Receiver" if status >= 500 else "Sender"
    body = (
        f'<ErrorResponse xmlns="{namespace}"><Error><Type>{kind}</Type>'
        f"<Code>{escape(code)}</Code><Message>{escape(message)}</Message></Error>"
        f"<RequestId>{request_id}</RequestId></ErrorResponse>"
    )
    return web.Response(status=status, text=body, content_type="text/xml")


# S3's authentication errors as IAM and STS name them.
_AUTH_ERRORS = {
    "InvalidAccessKeyId": ("InvalidClientTokenId", 403),
    "InvalidToken": ("InvalidClientTokenId", 403),
    "ExpiredToken": ("ExpiredToken", 400),
    "SignatureDoesNotMatch": ("SignatureDoesNotMatch", 403),
    "RequestTimeTooSkewed": ("RequestExpired", 400),
    "AccessDenied": ("AccessDenied", 403),
}


def _from_s3(exc: S3Error) -> IamError:
    code, status = _AUTH_ERRORS.get(exc.code, ("InvalidRequest", 400))
    if exc.code == "InvalidAccessKeyId":
        message = "The security token included in the request is invalid."
    else:
        message = exc.message or exc.code
    return IamError(code, message, status)


async def perform(
    store: Store,
    principals: Principals,
    user: User,
    service: str,
    action_name: str,
    params: dict[str, str],
) -> dict[str, Any] | None:
    """Run one IAM or STS action for `user` (authorised by the one authorisation function),
    whoever asks: the query API below, or the console. Raises IamError."""
    actions = sts.STS_ACTIONS if service == "sts" else IAM_ACTIONS
    action = actions.get(action_name)
    if action is None:
        raise IamError("InvalidAction", f"Could not find operation {action_name} for version.")
    identity = user.identity
    if (
        service == "iam"
        and user.session_token
        and (identity is None or ":assumed-role/" not in identity.arn)
    ):
        # GetSessionToken's credentials call no IAM action (without MFA, which is not
        # served): "You cannot call any IAM API operations unless MFA authentication
        # information is included" (API_GetSessionToken.html).
        raise IamError(
            "AccessDenied", "Cannot call IAM operations with session credentials without MFA", 403
        )
    call = Call(user, params, store, principals, principals.master or b"")
    if action_name not in sts.ALWAYS:
        # The entities' stored names (a name in another case is the same entity).
        if service == "iam" and user.identity is not None:
            on, moved = await call.read(
                lambda acc: (judged(call, action_name, acc), renamed(call, action_name, acc))
            )
        else:
            on, moved = judged(call, action_name, None), renamed(call, action_name, None)
        for target in filter(None, [on.arn, moved]):
            if not decide_account(user, f"{service}:{action_name}", target, on.values):
                raise IamError(
                    "AccessDenied",
                    f"User: {arn_of(user)} is not authorized to perform: "
                    f"{service}:{action_name} on resource: {target}",
                    403,
                )
    return await action(call)


class Services:
    """The handler of IAM and STS requests (the S3 dispatcher hands them over)."""

    def __init__(
        self, store: Store, principals: Principals, others: Mapping[str, Handler] | None = None
    ) -> None:
        """`others`: the handlers of other services' requests, by service (sns)."""
        self.store = store
        self.principals = principals
        self.others = dict(others or {})

    async def __call__(
        self, request: web.Request, authenticator: Authenticator
    ) -> web.StreamResponse:
        service = _service_of(request)
        other = self.others.get(service)
        if other is not None:
            return await other(request, authenticator)
        namespace = sts.NAMESPACE if service == "sts" else model.NAMESPACE
        actions = STS_ACTIONS if service == "sts" else IAM_ACTIONS
        request_id = request.get(REQUEST_ID, "")
        try:
            try:
                body = await request.read()
            except web.HTTPRequestEntityTooLarge:
                # Past the application's 1 MiB: no IAM request is near it (a policy is 10 KiB
                # at most); answered as IAM answers a request it will not read.
                raise IamError(
                    "RequestEntityTooLarge", "The request body is too large.", 413
                ) from None
            try:
                params = dict(parse_qsl(body.decode(), keep_blank_values=True))
            except UnicodeDecodeError:
                raise IamError("MalformedQueryString", "The query string is not UTF-8.") from None
            action_name = params.get("Action", "")
            request[OPERATION] = (
                f"{service.upper()}.{action_name}"
                if action_name in actions
                else f"{service.upper()}.Unknown"
            )
            raw_path, _, query = request.raw_path.partition("?")
            signed = SignedRequest(request.method, raw_path, query, request.headers)
            if claimed_key(request.headers, query) is None:
                raise IamError(
                    "MissingAuthenticationToken", "Request is missing Authentication Token", 403
                )
            if not request.headers.get("authorization", "").startswith("AWS4-HMAC-SHA256 "):
                # Only SigV4's Authorization header signs the body (its hash): S3's SigV2 and
                # presigned URLs do not, and a signature seen once would then run any action
                # its body names.
                raise IamError(
                    "IncompleteSignature", "IAM and STS requests must be signed with SigV4."
                )
            try:
                auth = await authenticator.identify(
                    signed, service, hashlib.sha256(body).hexdigest()
                )
            except S3Error as exc:
                raise _from_s3(exc) from None
            user = auth.user
            if is_nobody(user):
                raise IamError("AccessDenied", "Access denied", 403)
            request[USER] = user.name
            request[REQUESTER] = user.requester
            result = await perform(self.store, self.principals, user, service, action_name, params)
        except IamError as exc:
            return query_error(exc.code, exc.message, exc.status, namespace, request_id)
        return query_answer(action_name, namespace, result, request_id)
