"""The replication configuration (gateway/replication/configuration.py): AWS's schema, its
refusals, the canonical document kept, and which rules a version is replicated by; the
remotes file (gateway/replication/remotes.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.config import StartError
from gateway.replication import configuration as c
from gateway.replication import remotes
from gateway.replication.matching import replicas
from gateway.s3.errors import S3Error
from gateway.store import outbox

ROLE = "<Role>arn:aws:iam::123456789012:role/r</Role>"
DEST = "<Destination><Bucket>arn:aws:s3:::dst</Bucket></Destination>"
DM_OFF = "<DeleteMarkerReplication><Status>Disabled</Status></DeleteMarkerReplication>"
DM_ON = "<DeleteMarkerReplication><Status>Enabled</Status></DeleteMarkerReplication>"
TAG = "<Tag><Key>k</Key><Value>v</Value></Tag>"
SSE_KMS = (
    "<SourceSelectionCriteria><SseKmsEncryptedObjects><Status>Enabled</Status>"
    "</SseKmsEncryptedObjects></SourceSelectionCriteria>"
)
KEY = "arn:aws:kms:us-east-1:123456789012:key/replica"


def doc(*rules: str, role: str = ROLE) -> bytes:
    return (
        '<ReplicationConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
        + role
        + "".join(rules)
        + "</ReplicationConfiguration>"
    ).encode()


def v2(
    ident: str | None = "r1",
    priority: str | None = "1",
    filt: str = "<Filter><Prefix>a/</Prefix></Filter>",
    dest: str = DEST,
    dm: str | None = DM_OFF,
    status: str = "Enabled",
    extra: str = "",
) -> str:
    return (
        "<Rule>"
        + (f"<ID>{ident}</ID>" if ident is not None else "")
        + (f"<Priority>{priority}</Priority>" if priority is not None else "")
        + filt
        + f"<Status>{status}</Status>"
        + extra
        + dest
        + (dm or "")
        + "</Rule>"
    )


def v1(ident: str = "old", prefix: str = "x/") -> str:
    return f"<Rule><ID>{ident}</ID><Prefix>{prefix}</Prefix><Status>Enabled</Status>{DEST}</Rule>"


def refusal(body: bytes) -> tuple[str, str]:
    with pytest.raises(S3Error) as caught:
        c.parse(body)
    return caught.value.code, caught.value.message


def test_a_v2_rule_parses_into_the_workers_values() -> None:
    config = c.parse(
        doc(
            v2(
                filt=f"<Filter><And><Prefix>p/</Prefix>{TAG}"
                "<Tag><Key>j</Key><Value>w</Value></Tag></And></Filter>",
                dest="<Destination><Bucket>arn:aws:s3:::dst</Bucket><Account>123456789012"
                "</Account><StorageClass>STANDARD_IA</StorageClass><AccessControlTranslation>"
                "<Owner>Destination</Owner></AccessControlTranslation></Destination>",
                extra="<SourceSelectionCriteria><ReplicaModifications><Status>Enabled</Status>"
                "</ReplicaModifications></SourceSelectionCriteria><ExistingObjectReplication>"
                "<Status>Enabled</Status></ExistingObjectReplication>",
            )
        )
    )
    assert config.role == "arn:aws:iam::123456789012:role/r"
    (rule,) = config.rules
    assert rule == c.Rule(
        id="r1",
        priority=1,
        enabled=True,
        prefix="p/",
        tags=(("k", "v"), ("j", "w")),
        delete_markers=False,
        replica_modifications=True,
        destination=c.Destination("dst", "123456789012", "STANDARD_IA", owner_override=True),
        existing_objects=True,
    )
    assert rule.destination.arn == "arn:aws:s3:::dst"


@pytest.mark.parametrize(
    "filt",
    [
        "<Filter></Filter>",
        "<Filter><Prefix>a/</Prefix></Filter>",
        f"<Filter>{TAG}</Filter>",
        f"<Filter><And><Prefix>a/</Prefix>{TAG}</And></Filter>",
        f"<Filter><And>{TAG}<Tag><Key>j</Key><Value>w</Value></Tag></And></Filter>",
    ],
)
def test_the_kept_document_reads_back_the_same(filt: str) -> None:
    config = c.parse(doc(v2(filt=filt), v2("r2", "2", status="Disabled")))
    document = config.to_document()
    assert c.Configuration.from_document(document) == config
    assert c.render(c.parse(document.encode())).decode() == document


def test_a_rule_without_an_id_gets_one_as_on_aws_and_keeps_it() -> None:
    config = c.parse(doc(v2(ident=None)))
    ident = config.rules[0].id
    assert ident and len(ident) <= c.MAX_ID_CHARS
    assert c.Configuration.from_document(config.to_document()).rules[0].id == ident


def test_v1_rules_with_a_bare_prefix_are_accepted_and_replicate_delete_markers() -> None:
    body = doc(v1())
    (rule,) = c.parse(body).rules
    assert (rule.v1, rule.priority, rule.prefix, rule.delete_markers) == (True, None, "x/", True)
    document = c.parse(body).to_document()
    assert "<Prefix>x/</Prefix>" in document and "<Filter>" not in document
    assert "DeleteMarkerReplication" not in document and "Priority" not in document
    assert c.Configuration.from_document(document).rules[0] == rule


def _dest(inner: str) -> str:
    return v2(dest=f"<Destination><Bucket>arn:aws:s3:::dst</Bucket>{inner}</Destination>")


@pytest.mark.parametrize(
    ("body", "code", "message"),
    [
        (doc(v2(), v2("r2", "1")), "InvalidRequest", "Found duplicate priority 1."),
        (doc(v2(), v2("r1", "2")), "InvalidArgument", "Rule Id must be unique."),
        (doc(v1("a"), v1("a", "y/")), "InvalidArgument", "Rule Id must be unique."),
        (doc(v2(priority=None)), "InvalidRequest", c._NO_PRIORITY),
        (doc(v2(dm=None)), "InvalidRequest", "DeleteMarkerReplication " + c._SCHEMA),
        (
            doc(v2(filt=f"<Filter>{TAG}</Filter>", dm=DM_ON)),
            "InvalidRequest",
            c._TAGGED_DELETE_MARKERS,
        ),
        (
            doc(v2(filt=f"<Filter><And><Prefix>a</Prefix>{TAG}</And></Filter>", dm=DM_ON)),
            "InvalidRequest",
            c._TAGGED_DELETE_MARKERS,
        ),
        (
            doc(v2(dest="<Destination><Bucket>dst</Bucket></Destination>")),
            "InvalidArgument",
            "Invalid bucket ARN.",
        ),
        (
            doc(v2(dest="<Destination><Account>1</Account></Destination>")),
            "InvalidRequest",
            "Destination bucket must be specified.",
        ),
        (
            doc(_dest("<AccessControlTranslation><Owner>Destination</Owner>"
                      "</AccessControlTranslation>")),
            "InvalidRequest",
            "Account must be specified when AccessControlTranslation is specified",
        ),
        (
            doc(_dest("<Account>1</Account><AccessControlTranslation><Owner>Source</Owner>"
                      "</AccessControlTranslation>")),
            "MalformedXML",
            None,
        ),
        (doc(v2(ident="x" * 256)), "InvalidArgument", "The maximum value is 255 characters."),
        (doc(v2(priority="-1")), "InvalidRequest", "Priority must be between 0 and 2147483647."),
        (doc(v2(priority="one")), "MalformedXML", None),
        (doc(v2(status="On")), "MalformedXML", None),
        (doc(v2(), role=""), "MalformedXML", None),
        (doc(), "MalformedXML", None),
        (doc(v2(filt="")), "MalformedXML", None),  # neither Filter nor Prefix
        (doc(v2(filt=f"<Filter><Prefix>a</Prefix>{TAG}</Filter>")), "MalformedXML", None),
        (
            doc(
                "<Rule><Priority>1</Priority><Prefix>x</Prefix><Status>Enabled</Status>"
                f"{DEST}</Rule>"
            ),
            "MalformedXML",
            None,
        ),
        (doc(v2(), v1()), "MalformedXML", None),  # V1 and V2 rules in one document
        (doc(v2(extra="<Unknown/>")), "MalformedXML", None),
        (doc(_dest("<StorageClass>GOLD</StorageClass>")), "MalformedXML", None),
        (
            doc(_dest("<ReplicationTime><Status>Enabled</Status><Time><Minutes>15</Minutes>"
                      "</Time></ReplicationTime>")),
            "NotImplemented",
            None,
        ),
        (b"<NotificationConfiguration/>", "MalformedXML", None),
        (
            doc(_dest("<EncryptionConfiguration><ReplicaKmsKeyID>arn:aws:kms:us-east-1:1:key/k"
                      "</ReplicaKmsKeyID></EncryptionConfiguration>")),
            "InvalidRequest",
            "SseKmsEncryptedObjects must be specified if EncryptionConfiguration is present.",
        ),
        (
            doc(v2(extra=SSE_KMS)),
            "InvalidRequest",
            "ReplicaKmsKeyID must be specified if SseKmsEncryptedObjects tag is present.",
        ),
        (
            doc(_dest("<EncryptionConfiguration></EncryptionConfiguration>")),
            "MalformedXML",
            None,
        ),
    ],
)  # fmt: skip
def test_awss_refusals(body: bytes, code: str, message: str | None) -> None:
    got_code, got_message = refusal(body)
    assert got_code == code
    if message is not None:
        assert got_message == message


def test_a_replica_kms_key_with_sse_kms_objects_is_kept_and_shown() -> None:
    dest = (
        "<Destination><Bucket>arn:aws:s3:::dst</Bucket><EncryptionConfiguration>"
        f"<ReplicaKmsKeyID>{KEY}</ReplicaKmsKeyID></EncryptionConfiguration></Destination>"
    )
    config = c.parse(doc(v2(dest=dest, extra=SSE_KMS)))
    rule = config.rules[0]
    assert rule.sse_kms_objects and rule.destination.replica_kms_key == KEY
    again = c.Configuration.from_document(config.to_document())
    assert again == config
    assert f"<ReplicaKmsKeyID>{KEY}</ReplicaKmsKeyID>" in config.to_document()


def test_sse_kms_versions_go_only_where_a_rule_asks_for_them() -> None:
    plain = c.parse(doc(v2("plain", "1"))).to_document()
    assert replicas(plain, outbox.PUT, "a/k", {}, False, kms=False) == [
        ("plain", "arn:aws:s3:::dst")
    ]
    assert replicas(plain, outbox.PUT, "a/k", {}, False, kms=True) == []
    dest = (
        "<Destination><Bucket>arn:aws:s3:::dst</Bucket><EncryptionConfiguration>"
        f"<ReplicaKmsKeyID>{KEY}</ReplicaKmsKeyID></EncryptionConfiguration></Destination>"
    )
    asked = c.parse(doc(v2("kms", "1", dest=dest, extra=SSE_KMS))).to_document()
    assert replicas(asked, outbox.PUT, "a/k", {}, False, kms=True) == [("kms", "arn:aws:s3:::dst")]


def test_at_most_1000_rules() -> None:
    rules = [v2(f"r{i}", str(i)) for i in range(c.MAX_RULES + 1)]
    assert refusal(doc(*rules))[1] == (
        "The number of replication rules must not exceed the allowed limit of 1000 rules."
    )
    assert len(c.parse(doc(*rules[:-1])).rules) == c.MAX_RULES


def _rule(ident: str, priority: int | None, bucket: str = "dst", **kw: object) -> c.Rule:
    fields: dict = {
        "enabled": True,
        "prefix": "",
        "tags": (),
        "delete_markers": False,
        "replica_modifications": False,
    }
    fields.update(kw)
    return c.Rule(ident, priority, destination=c.Destination(bucket), **fields)


def test_rules_for_takes_the_highest_priority_per_destination() -> None:
    config = c.Configuration(
        "role",
        (
            _rule("low", 1, prefix="a"),
            _rule("high", 5, prefix="a/b"),
            _rule("other", 2, bucket="elsewhere"),
            _rule("off", 9, enabled=False),
            _rule("tagged", 7, tags=(("k", "v"),)),
        ),
    )
    assert [r.id for r in config.rules_for("a/b/c", {})] == ["high", "other"]
    assert [r.id for r in config.rules_for("a/x", {})] == ["low", "other"]
    assert [r.id for r in config.rules_for("a/b", {"k": "v"})] == ["other", "tagged"]
    assert [r.id for r in config.rules_for("a/b", {"k": "w"})] == ["high", "other"]
    assert [r.id for r in config.rules_for("z", {})] == ["other"]


def test_rules_for_needs_every_tag_of_the_filter() -> None:
    config = c.Configuration("role", (_rule("t", 1, tags=(("k", "v"), ("j", "w"))),))
    assert config.rules_for("x", {"k": "v"}) == []
    assert [r.id for r in config.rules_for("x", {"k": "v", "j": "w", "o": "1"})] == ["t"]


def test_rules_for_v1_rules_by_prefix() -> None:
    config = c.parse(doc(v1("a", "a/"), v1("b", "b/")))
    assert [r.id for r in config.rules_for("b/1", {})] == ["b"]
    assert config.rules_for("c/1", {}) == []


# --- the remotes file ------------------------------------------------------------------------

REMOTE = """
[[remote]]
bucket_arn = "arn:aws:s3:::offsite"
endpoint = "https://s3.example.net:9000/"
region = "eu-west-1"
access_key = "AK"
secret_key = "SK"
"""


def test_remotes_by_destination_bucket(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("x")
    path = tmp_path / "remotes.toml"
    path.write_text(
        REMOTE
        + REMOTE.replace("offsite", "other")
        + f'ca_file = "{ca}"\naddressing_style = "virtual"\n'
    )
    found = remotes.read_remotes(path)
    assert sorted(found) == ["offsite", "other"]
    assert found["offsite"] == remotes.Remote(
        "offsite", "https://s3.example.net:9000", "eu-west-1", "AK", "SK"
    )
    assert found["other"].ca_file == ca and found["other"].addressing_style == "virtual"
    assert found["other"].bucket_arn == "arn:aws:s3:::other"
    assert "SK" not in repr(found["offsite"])
    assert remotes.load(None) == remotes.NONE and len(remotes.NONE) == 0


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (REMOTE + REMOTE, "defined twice"),
        (REMOTE.replace("region", "regoin"), "unknown field 'regoin'"),
        (REMOTE.replace('secret_key = "SK"', ""), "needs secret_key"),
        (REMOTE.replace("arn:aws:s3:::offsite", "offsite"), "bucket_arn must be"),
        (REMOTE.replace("https://s3.example.net:9000/", "s3.example.net"), "endpoint must be"),
        (REMOTE + 'addressing_style = "dns"\n', "addressing_style must be"),
        (REMOTE + 'ca_file = "/nonexistent.pem"\n', "is not a file"),
        ("[remote]\nbucket_arn = 1\n", "[[remote]] tables"),
        ("[[remotes]]\n", "unknown 'remotes'"),
        ("not toml [", "not a TOML file"),
    ],
)
def test_a_remotes_file_mistake_is_one_start_error_naming_the_file(
    tmp_path: Path, text: str, words: str
) -> None:
    path = tmp_path / "remotes.toml"
    path.write_text(text)
    with pytest.raises(StartError) as caught:
        remotes.read_remotes(path)
    assert str(path) in str(caught.value) and words in str(caught.value)
    assert "\n" not in str(caught.value)
