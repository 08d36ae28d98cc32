"""Website configurations: the document as AWS checks it (LocalStack's recordings of AWS for the
messages), its rendering, and the routing rules' matching and redirect targets."""

from __future__ import annotations

import pytest

from gateway.s3 import website
from gateway.s3.errors import S3Error


def doc(inner: str) -> bytes:
    return (
        f'<WebsiteConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/">{inner}'
        "</WebsiteConfiguration>"
    ).encode()


INDEX = "<IndexDocument><Suffix>index.html</Suffix></IndexDocument>"


def rules(*bodies: str) -> str:
    return (
        "<RoutingRules>"
        + "".join(f"<RoutingRule>{b}</RoutingRule>" for b in bodies)
        + ("</RoutingRules>")
    )


def refused(inner: str) -> S3Error:
    with pytest.raises(S3Error) as caught:
        website.parse_configuration(doc(inner))
    return caught.value


def test_index_and_error_documents() -> None:
    error = "<ErrorDocument><Key>e.html</Key></ErrorDocument>"
    config = website.parse_configuration(doc(INDEX + error))
    assert (config.index_suffix, config.error_key) == ("index.html", "e.html")
    assert config.redirect_all is None and config.routing_rules == ()


@pytest.mark.parametrize(
    ("inner", "code", "message", "fields"),
    [
        (
            "",
            "InvalidArgument",
            "A value for IndexDocument Suffix must be provided if RedirectAllRequestsTo is empty",
            {"ArgumentName": "IndexDocument", "ArgumentValue": "null"},
        ),
        (
            "<IndexDocument><Suffix></Suffix></IndexDocument>",
            "InvalidArgument",
            "The IndexDocument Suffix is not well formed",
            {"ArgumentName": "IndexDocument"},
        ),
        (
            "<IndexDocument><Suffix>a/index.html</Suffix></IndexDocument>",
            "InvalidArgument",
            "The IndexDocument Suffix is not well formed",
            {"ArgumentName": "IndexDocument", "ArgumentValue": "a/index.html"},
        ),
        (
            INDEX + "<RedirectAllRequestsTo><HostName>x.com</HostName></RedirectAllRequestsTo>",
            "InvalidArgument",
            "RedirectAllRequestsTo cannot be provided in conjunction with other Routing Rules.",
            {"ArgumentName": "RedirectAllRequestsTo", "ArgumentValue": "not null"},
        ),
        (
            "<RedirectAllRequestsTo><HostName>x.com</HostName><Protocol>ftp</Protocol>"
            "</RedirectAllRequestsTo>",
            "InvalidRequest",
            "Invalid protocol, protocol can be http or https. If not defined the protocol will "
            "be selected automatically.",
            {},
        ),
        (
            INDEX
            + rules(
                "<Redirect><ReplaceKeyPrefixWith>a</ReplaceKeyPrefixWith>"
                "<ReplaceKeyWith>b</ReplaceKeyWith></Redirect>"
            ),
            "InvalidRequest",
            "You can only define ReplaceKeyPrefix or ReplaceKey but not both.",
            {},
        ),
        (
            INDEX + rules("<Condition></Condition><Redirect><HostName>x</HostName></Redirect>"),
            "InvalidRequest",
            "Condition cannot be empty. To redirect all requests without a condition, the "
            "condition element shouldn't be present.",
            {},
        ),
        (
            INDEX
            + rules(
                "<Condition><HttpErrorCodeReturnedEquals>200</HttpErrorCodeReturnedEquals>"
                "</Condition><Redirect><HostName>x</HostName></Redirect>"
            ),
            "InvalidRequest",
            "The provided HTTP error code (200) is not valid. Valid codes are 4XX or 5XX.",
            {},
        ),
        (
            INDEX + rules("<Redirect><HttpRedirectCode>300</HttpRedirectCode></Redirect>"),
            "InvalidRequest",
            "The provided HTTP redirect code (300) is not valid. Valid codes are 3XX except 300.",
            {},
        ),
    ],
)
def test_refusals_with_aws_messages(inner: str, code: str, message: str, fields: dict) -> None:
    error = refused(inner)
    assert (error.code, error.message) == (code, message)
    for name, value in fields.items():
        assert error.fields[name] == value


@pytest.mark.parametrize(
    "inner",
    [
        INDEX + "<ErrorDocument><Key></Key></ErrorDocument>",
        INDEX + "<ErrorDocument></ErrorDocument>",
        "<RedirectAllRequestsTo><Protocol>https</Protocol></RedirectAllRequestsTo>",
        INDEX + "<RoutingRules></RoutingRules>",
        INDEX + rules("<Condition><KeyPrefixEquals>a</KeyPrefixEquals></Condition>"),
        INDEX + rules(*["<Redirect><HostName>x</HostName></Redirect>"] * 51),
        INDEX + INDEX,
        INDEX + "<Unknown/>",
    ],
)
def test_malformed(inner: str) -> None:
    assert refused(inner).code == "MalformedXML"


def test_not_a_website_configuration() -> None:
    with pytest.raises(S3Error) as caught:
        website.parse_configuration(b"<CORSConfiguration/>")
    assert caught.value.code == "MalformedXML"


def test_fifty_rules_are_allowed() -> None:
    config = website.parse_configuration(
        doc(INDEX + rules(*["<Redirect><HostName>x</HostName></Redirect>"] * 50))
    )
    assert len(config.routing_rules) == 50


def test_render_round_trip() -> None:
    inner = (
        "<IndexDocument><Suffix>index.html</Suffix></IndexDocument>"
        "<ErrorDocument><Key>404.html</Key></ErrorDocument>"
        + rules(
            "<Condition><HttpErrorCodeReturnedEquals>404</HttpErrorCodeReturnedEquals>"
            "<KeyPrefixEquals>docs/</KeyPrefixEquals></Condition>"
            "<Redirect><HostName>h</HostName><HttpRedirectCode>302</HttpRedirectCode>"
            "<Protocol>https</Protocol><ReplaceKeyPrefixWith>d/</ReplaceKeyPrefixWith>"
            "</Redirect>",
            "<Redirect><ReplaceKeyWith>k</ReplaceKeyWith></Redirect>",
        )
    )
    config = website.parse_configuration(doc(inner))
    rendered = website.render_configuration(config)
    assert inner.encode() in rendered
    assert website.parse_configuration(rendered) == config
    everything = website.parse_configuration(
        doc("<RedirectAllRequestsTo><HostName>x.org</HostName></RedirectAllRequestsTo>")
    )
    assert b"<RedirectAllRequestsTo><HostName>x.org</HostName></RedirectAllRequestsTo>" in (
        website.render_configuration(everything)
    )


def _config() -> website.WebsiteConfiguration:
    return website.parse_configuration(
        doc(
            INDEX
            + rules(
                "<Condition><KeyPrefixEquals>old/</KeyPrefixEquals></Condition>"
                "<Redirect><ReplaceKeyPrefixWith>new/</ReplaceKeyPrefixWith></Redirect>",
                "<Condition><HttpErrorCodeReturnedEquals>404</HttpErrorCodeReturnedEquals>"
                "</Condition><Redirect><HostName>h.example</HostName><Protocol>https</Protocol>"
                "<HttpRedirectCode>307</HttpRedirectCode></Redirect>",
                "<Condition><KeyPrefixEquals>x</KeyPrefixEquals></Condition>"
                "<Redirect><ReplaceKeyWith>y z</ReplaceKeyWith></Redirect>",
            )
        )
    )


def test_rules_before_the_lookup_match_by_prefix_only() -> None:
    config = _config()
    rule = config.rule_for("old/a.html")
    assert rule is not None
    assert website.location(rule, "old/a.html", "b.web", "http") == (301, "http://b.web/new/a.html")
    assert config.rule_for("other.html") is None  # the 404 rule waits for an error
    rule = config.rule_for("xfile")
    assert rule is not None
    assert website.location(rule, "xfile", "b.web", "http") == (301, "http://b.web/y%20z")


def test_rules_after_an_error_match_its_status() -> None:
    config = _config()
    rule = config.rule_for("other.html", 404)
    assert rule is not None
    assert website.location(rule, "other.html", "b.web", "http") == (
        307,
        "https://h.example/other.html",
    )
    assert config.rule_for("other.html", 403) is None


def test_a_rule_without_a_condition_applies_to_every_request() -> None:
    config = website.parse_configuration(
        doc(INDEX + rules("<Redirect><ReplaceKeyPrefixWith>v2/</ReplaceKeyPrefixWith></Redirect>"))
    )
    rule = config.rule_for("a/b")
    assert rule is not None
    assert website.location(rule, "a/b", "h", "https") == (301, "https://h/v2/a/b")
