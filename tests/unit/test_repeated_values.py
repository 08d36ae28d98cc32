"""A repeated header or query parameter: the policy's condition keys see exactly the value
the operation reads (the review's H1: `prefix=&prefix=dir/` listed a bucket whose policy
allowed `dir/*` only). Every key the policy engine reads from a header or the query is
tried, with the real aiohttp request the middleware hands on."""

from __future__ import annotations

import pytest
from aiohttp.test_utils import make_mocked_request
from multidict import CIMultiDict

from gateway.s3 import policy_context, tagging
from gateway.s3.auth import ANONYMOUS, AuthResult
from gateway.s3.errors import S3Error
from gateway.s3.protocol import join_repeated_headers

# Request.message is deprecated for applications; here it stands for what the parser made.
pytestmark = pytest.mark.filterwarnings("ignore:Request.message is deprecated")

AUTH = AuthResult(ANONYMOUS, "UNSIGNED-PAYLOAD", "", b"", "", "")


def received(method: str, path: str, headers: CIMultiDict[str]):  # type: ignore[no-untyped-def]
    """The request the gateway's request factory makes of these headers as sent."""
    message = join_repeated_headers(make_mocked_request(method, path, headers=headers).message)
    return make_mocked_request(method, path, headers=message.headers)


@pytest.mark.parametrize("key,header", sorted(policy_context._HEADER_KEYS.items()))
def test_a_repeated_header_is_one_joined_value_for_policy_and_operation(key, header):
    headers = CIMultiDict([(header, "one"), ("x-other", "z"), (header.upper(), "two")])
    request = received("PUT", "/b/k", headers)
    assert request.headers.getall(header) == ["one,two"]
    assert request.headers.get(header) == "one,two"
    assert request.headers["x-other"] == "z"
    assert policy_context.lookup(request, AUTH, None)(key) == ["one,two"]


@pytest.mark.parametrize("key,name", sorted(policy_context._QUERY_KEYS.items()))
def test_a_repeated_query_parameter_counts_by_its_first_value_everywhere(key, name):
    for first, second in (("", "dir/"), ("dir/", "")):
        request = make_mocked_request("GET", f"/b?list-type=2&{name}={first}&{name}={second}")
        assert policy_context.lookup(request, AUTH, None)(key) == [first]
        # What every operation reads (request.query.get / []): the same first value.
        assert request.query.get(name) == request.query[name] == first


def test_request_object_tags_are_read_as_the_operation_reads_them():
    # Two headers are one, "a=1,b=2": one tag `a` whose value holds a comma, which is no
    # valid tag value: the operation's InvalidTag, for the policy's keys too.
    request = received(
        "PUT", "/b/k", CIMultiDict([("x-amz-tagging", "a=1"), ("x-amz-tagging", "b=2")])
    )
    for key in ("s3:requestobjecttagkeys", "s3:requestobjecttag/b"):
        with pytest.raises(S3Error) as caught:
            policy_context.lookup(request, AUTH, None)(key)
        assert caught.value.code == "InvalidTag"
    with pytest.raises(S3Error):
        tagging.from_header(request.headers["x-amz-tagging"])
    request = received("PUT", "/b/k", CIMultiDict([("x-amz-tagging", "a=1&b=%2B2")]))
    value = policy_context.lookup(request, AUTH, None)
    assert value("s3:requestobjecttagkeys") == ["a", "b"]
    assert value("s3:requestobjecttag/b") == ["+2"]


def test_headers_sent_once_are_left_as_they_are():
    headers = CIMultiDict([("x-amz-acl", "private"), ("Content-Type", "text/plain")])
    message = make_mocked_request("PUT", "/b/k", headers=headers).message
    assert join_repeated_headers(message) is message
