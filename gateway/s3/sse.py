"""Server-side encryption on the wire: which encryption a write asks for (headers, or the
bucket's default), whether a read brings the key an SSE-C object needs, and the headers every
answer echoes. The encrypting itself is gateway/store/crypto.py's (docs/encryption.md).

AWS's answers are followed as S3-SEMANTICS.md records them ("Server-side encryption").
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from xml.etree.ElementTree import Element

from .. import digest
from ..store import ObjectAttrs, crypto
from ..store.crypto import Encryption, Keyring
from .context import Context
from .errors import S3Error, invalid_argument
from .xml import child_text, parse, render

SSE = "x-amz-server-side-encryption"
KMS_KEY_ID = "x-amz-server-side-encryption-aws-kms-key-id"
CONTEXT = "x-amz-server-side-encryption-context"
BUCKET_KEY = "x-amz-server-side-encryption-bucket-key-enabled"
CUSTOMER = "x-amz-server-side-encryption-customer-"
COPY_CUSTOMER = "x-amz-copy-source-server-side-encryption-customer-"
ALGORITHM = "AES256"
KMS = "aws:kms"
DSSE = "aws:kms:dsse"

_NEEDS_KEY = (
    "The object was stored using a form of Server Side Encryption. The correct parameters must "
    "be provided to retrieve the object."
)
_WRONG_KEY = (
    "Requests specifying Server Side Encryption with Customer provided keys must provide the "
    "correct secret key."
)
_OVER_HTTP = (
    "Requests specifying Server Side Encryption with Customer provided keys must be made over "
    "a secure connection."
)
_PART_NEEDS_KEY = (
    "The multipart upload initiate requested encryption. Subsequent part requests must include "
    "the appropriate encryption parameters."
)
_PART_OTHER_KEY = "The provided encryption parameters did not match the ones used originally."


@dataclass(frozen=True)
class Requested:
    """The encryption of a new object (or upload): how its blobs are encrypted, what its
    attrs keep, and whether its ETag is the MD5 of its bytes."""

    encryption: Encryption | None = None
    headers: dict[str, str] = field(default_factory=dict)  # stored, and echoed
    sse_key: str | None = None  # SSE-C: the key's salted HMAC
    customer_key: bytes | None = None

    @property
    def etag_is_md5(self) -> bool:
        return self.encryption is None or self.encryption.kind == crypto.S3

    @property
    def server_managed(self) -> bool:
        return self.encryption is not None and self.encryption.kind != crypto.CUSTOMER

    def attrs(self, attrs: ObjectAttrs) -> ObjectAttrs:
        if attrs.sse == self.headers and attrs.sse_key == self.sse_key:
            return attrs  # a plain write's (no copy of a frozen dataclass per PUT for nothing)
        return replace(attrs, sse=self.headers, sse_key=self.sse_key)

    def etag(self, md5_hex: str) -> str:
        """SSE-C and SSE-KMS ETags are not the MD5 of the data (AWS). SSE-KMS: a fresh value
        per write, as AWS's recordings show for one body put three times; SSE-C: keyed by the
        customer's key (crypto.customer_etag). `md5_hex` "": no bytes were hashed (a copy that
        shares them), which only SSE-KMS and the same customer key reach."""
        if self.etag_is_md5:
            return md5_hex
        if self.customer_key is not None and md5_hex:
            return crypto.customer_etag(self.customer_key, bytes.fromhex(md5_hex))
        return secrets.token_hex(16)


PLAIN = Requested()


def _keys(keyring: Keyring | None) -> Keyring:
    if keyring is None:  # pragma: no cover - app.py always loads one
        raise S3Error("NotImplemented", "server-side encryption is not configured")
    return keyring


def customer_key(
    headers: Mapping[str, str], secure: bool, allow_http: bool, prefix: str = CUSTOMER
) -> bytes | None:
    """The customer key of the three SSE-C headers (or the copy-source ones), checked as AWS
    checks them; None when none of them is sent."""
    algorithm = headers.get(prefix + "algorithm")
    key_text = headers.get(prefix + "key")
    md5_text = headers.get(prefix + "key-md5")
    if algorithm is None and key_text is None and md5_text is None:
        return None
    name = prefix + "algorithm" if prefix == COPY_CUSTOMER else SSE
    if algorithm is None:
        raise invalid_argument(
            "Requests specifying Server Side Encryption with Customer provided keys must "
            "provide a valid encryption algorithm.",
            name,
        )
    if algorithm != ALGORITHM:
        raise S3Error(
            "InvalidEncryptionAlgorithmError",
            "The Encryption request you specified is not valid. Supported value: AES256.",
            ArgumentName=name,
            ArgumentValue=algorithm,
        )
    if not secure and not allow_http:
        raise S3Error("InvalidRequest", _OVER_HTTP)
    if key_text is None:
        raise invalid_argument(
            "Requests specifying Server Side Encryption with Customer provided keys must "
            "provide an appropriate secret key.",
            name,
        )
    try:
        key = base64.b64decode(key_text, validate=True)
    except (binascii.Error, ValueError):
        key = b""
    if len(key) != crypto.KEY_BYTES:
        raise invalid_argument("The secret key was invalid for the specified algorithm.", name)
    if md5_text is None:
        raise invalid_argument(
            "Requests specifying Server Side Encryption with Customer provided keys must "
            "provide the client calculated MD5 of the secret key.",
            name,
        )
    if base64.b64encode(digest.md5_of(key).digest()).decode() != md5_text:
        raise invalid_argument(
            "The calculated MD5 hash of the key did not match the hash that was provided.",
            name,
        )
    return key


def _customer(key: bytes) -> Requested:
    return Requested(
        crypto.customer(key),
        {
            CUSTOMER + "algorithm": ALGORITHM,
            CUSTOMER + "key-MD5": base64.b64encode(digest.md5_of(key).digest()).decode(),
        },
        crypto.key_fingerprint(key),
        key,
    )


def _kms_key(keyring: Keyring, key_name: str | None) -> crypto.KmsKey:
    try:
        return keyring.kms_key(key_name)
    except crypto.UnknownKmsKey:
        raise S3Error("KMS.NotFoundException", f"Invalid keyId '{key_name}'") from None
    except crypto.DisabledKmsKey:
        raise S3Error("KMS.DisabledException", f"{key_name} is disabled.") from None


def _kms(
    keyring: Keyring,
    key_name: str | None,
    context: str | None,
    bucket_key: bool,
    dual: bool = False,
) -> Requested:
    """SSE-KMS, or with `dual` DSSE-KMS (two layers, crypto._outer_layer)."""
    key = _kms_key(keyring, key_name)
    headers = {SSE: DSSE if dual else KMS, KMS_KEY_ID: key.arn}
    if context is not None:
        headers[CONTEXT] = context
    # "S3 Bucket Keys aren't supported for DSSE-KMS" (UsingDSSEncryption.html): not echoed.
    if bucket_key and not dual:
        headers[BUCKET_KEY] = "true"
    return Requested(keyring.kms(key, dual), headers)


def _sse_s3(keyring: Keyring) -> Requested:
    return Requested(keyring.sse_s3(), {SSE: ALGORITHM})


def _context(value: str | None) -> str | None:
    """x-amz-server-side-encryption-context: base64 of a JSON object of strings."""
    if value is None:
        return None
    try:
        doc = json.loads(base64.b64decode(value, validate=True))
    except (binascii.Error, ValueError):
        doc = None
    if not isinstance(doc, dict) or not all(isinstance(v, str) for v in doc.values()):
        raise invalid_argument(
            "The header 'x-amz-server-side-encryption-context' shall be "
            "Base64-encoded UTF-8 string holding JSON which represents a "
            "string-string map",
            CONTEXT,
            value,
        )
    return value


def for_write(
    headers: Mapping[str, str],
    settings: Mapping[str, str],
    keyring: Keyring | None,
    secure: bool,
    allow_http: bool,
) -> Requested:
    """What a PutObject, CreateMultipartUpload or copy asks for: its headers, else the
    bucket's default encryption (`settings["encryption"]`), else none."""
    method = headers.get(SSE)
    key_id = headers.get(KMS_KEY_ID)
    bucket_key = headers.get(BUCKET_KEY, "").lower() == "true"
    key = customer_key(headers, secure, allow_http)
    if key is not None:
        if method is not None:
            raise invalid_argument(
                "Server Side Encryption with Customer provided key is incompatible with the "
                "encryption method specified",
                SSE,
                method,
            )
        default = default_rule(settings)
        if default is not None and default.blocks_sse_c:
            # AWS's words (blocking-unblocking-s3-c-encryption-gpb.html): 403 AccessDenied.
            raise S3Error(
                "AccessDenied",
                "Requests specifying Server Side Encryption with Customer provided keys are "
                "blocked for this bucket.",
            )
        return _customer(key)
    if method is None:
        if key_id is not None:
            raise invalid_argument(
                "Server Side Encryption with AWS KMS managed key requires HTTP header "
                "x-amz-server-side-encryption : aws:kms",
                SSE,
            )
        default = default_rule(settings)
        if default is None or default.algorithm is None:
            return PLAIN
        if default.algorithm == ALGORITHM:
            return _sse_s3(_keys(keyring))
        bucket_key = default.bucket_key or bucket_key
        dual = default.algorithm == DSSE
        return _kms(_keys(keyring), default.kms_key, None, bucket_key, dual)
    if method == ALGORITHM:
        if key_id is not None:
            raise invalid_argument(
                "Server Side Encryption with AWS KMS managed key requires HTTP header "
                "x-amz-server-side-encryption : aws:kms",
                SSE,
                method,
            )
        return _sse_s3(_keys(keyring))
    if method in (KMS, DSSE):
        context = _context(headers.get(CONTEXT))
        return _kms(_keys(keyring), key_id, context, bucket_key, method == DSSE)
    raise invalid_argument("The encryption method specified is not supported", SSE, method)


def for_upload(attrs: ObjectAttrs, keyring: Keyring | None, key: bytes | None) -> Requested:
    """The encryption of an upload's parts: the one CreateMultipartUpload chose (`key`: the
    part request's customer key)."""
    if attrs.sse_key is not None:
        if key is None:
            raise S3Error("InvalidRequest", _PART_NEEDS_KEY)
        if not crypto.fingerprint_matches(key, attrs.sse_key):
            raise S3Error("InvalidRequest", _PART_OTHER_KEY)
        return Requested(crypto.customer(key), attrs.sse, attrs.sse_key, key)
    if key is not None:
        raise S3Error("InvalidRequest", _PART_OTHER_KEY)
    method = attrs.sse.get(SSE)
    if method == ALGORITHM:
        return Requested(_keys(keyring).sse_s3(), attrs.sse)
    if method in (KMS, DSSE):
        found = _kms(_keys(keyring), attrs.sse[KMS_KEY_ID], None, False, method == DSSE)
        return Requested(found.encryption, attrs.sse)
    return PLAIN


def for_read(
    headers: Mapping[str, str],
    attrs: ObjectAttrs,
    secure: bool,
    allow_http: bool,
    prefix: str = CUSTOMER,
) -> bytes | None:
    """The customer key a GET, HEAD or copy source needs (None for an object that needs
    none); the errors AWS answers for a missing or wrong key, or for asking GET or HEAD to
    change the encryption."""
    if prefix == CUSTOMER and SSE in headers:
        raise invalid_argument(
            "the encryption method can't be changed when you retrieve the object",
            SSE,
            headers[SSE],
        )
    key = customer_key(headers, secure, allow_http, prefix)
    if attrs.sse_key is None:
        if key is not None:
            raise S3Error(
                "InvalidRequest", "The encryption parameters are not applicable to this object."
            )
        return None
    if key is None:
        raise S3Error("InvalidRequest", _NEEDS_KEY)
    if not crypto.fingerprint_matches(key, attrs.sse_key):
        raise S3Error("AccessDenied", _WRONG_KEY)
    return key


def echo(attrs: ObjectAttrs, context: bool = False) -> dict[str, str]:
    """The headers that describe an object's encryption (GET and HEAD leave the encryption
    context out, as AWS's GetObject and HeadObject outputs do)."""
    if context or CONTEXT not in attrs.sse:
        return dict(attrs.sse)
    return {k: v for k, v in attrs.sse.items() if k != CONTEXT}


def requested(ctx: Context) -> Requested:
    """for_write for the request in `ctx`."""
    settings = ctx.bucket_record.settings if ctx.bucket_record is not None else {}
    return for_write(ctx.headers, settings, ctx.store.keys, *_transport(ctx))


# The operations that decrypt an object's bytes, and so need its KMS key usable (HEAD and
# GetObjectAttributes read metadata only).
_DECRYPTING = ("GetObject", "CopyObject", "UploadPartCopy")


def read_key(ctx: Context, attrs: ObjectAttrs, prefix: str = CUSTOMER) -> bytes | None:
    """for_read for the request in `ctx`; an SSE-KMS object whose key has been disabled
    since (in the --kms-keys file) is not decrypted: 400 KMS.DisabledException, as AWS
    answers when KMS refuses to decrypt its data key."""
    key = for_read(ctx.headers, attrs, *_transport(ctx), prefix)
    if ctx.endpoint.operation in _DECRYPTING and attrs.sse.get(SSE) in (KMS, DSSE):
        keyring = _keys(ctx.store.keys)
        try:
            keyring.kms_key(attrs.sse[KMS_KEY_ID])
        except crypto.DisabledKmsKey:
            raise S3Error(
                "KMS.DisabledException", f"{attrs.sse[KMS_KEY_ID]} is disabled."
            ) from None
        except crypto.UnknownKmsKey:
            pass  # no longer declared, yet its material is kept: still readable
    return key


def request_key(ctx: Context) -> bytes | None:
    """The SSE-C key the request carries (UploadPart), checked."""
    return customer_key(ctx.headers, *_transport(ctx))


def _transport(ctx: Context) -> tuple[bool, bool]:
    return ctx.request.secure, ctx.settings.sse_c_over_http == "allow"


# --- the bucket's default ------------------------------------------------------------------


@dataclass(frozen=True)
class DefaultRule:
    algorithm: str | None  # AES256, aws:kms or aws:kms:dsse; None: only (un)blocking SSE-C
    kms_key: str | None = None
    bucket_key: bool = False
    blocked: tuple[str, ...] = ()  # BlockedEncryptionTypes: SSE-C, or NONE

    @property
    def blocks_sse_c(self) -> bool:
        return "SSE-C" in self.blocked


# A new bucket's "encryption" setting unless --bucket-defaults legacy: AWS has disabled SSE-C
# on every new general purpose bucket since April 2026 (blocking-unblocking-s3-c-encryption-
# gpb.html). The rule names no default algorithm: objects here are encrypted only when asked
# (docs/encryption.md, "The default"), and the document must not claim otherwise.
SSE_C_BLOCKED = DefaultRule(None, blocked=("SSE-C",))
# AWS's default of every bucket since January 2023 (UsingServerSideEncryption.html), with
# SSE-C blocked as above: what a new bucket has, and what DeleteBucketEncryption goes back to.
SSE_S3_DEFAULT = DefaultRule(ALGORITHM, blocked=("SSE-C",))


def parse_configuration(body: bytes, keyring: Keyring | None) -> DefaultRule:
    """A PutBucketEncryption document, checked as AWS checks it (its KMS key against
    `keyring`, when given)."""
    root = parse(body)
    if root.tag != "ServerSideEncryptionConfiguration":
        raise S3Error("MalformedXML")
    rules = root.findall("Rule")
    if len(rules) != 1:
        raise S3Error("MalformedXML")
    rule = rules[0]
    blocked = _blocked_types(rule)
    apply = rule.find("ApplyServerSideEncryptionByDefault")
    if apply is None:
        # The model makes every member of a Rule optional: a rule may only (un)block SSE-C.
        if rule.find("BlockedEncryptionTypes") is None:
            raise S3Error("MalformedXML")
        return DefaultRule(None, blocked=blocked)
    algorithm = (child_text(apply, "SSEAlgorithm") or "").strip()
    kms_key = child_text(apply, "KMSMasterKeyID")
    if algorithm not in (ALGORITHM, KMS, DSSE):
        raise S3Error("MalformedXML")
    if kms_key is not None and algorithm == ALGORITHM:
        raise invalid_argument(
            "a KMSMasterKeyID is not applicable if the default sse algorithm is not aws:kms or "
            "aws:kms:dsse",
            "ApplyServerSideEncryptionByDefault",
        )
    if algorithm != ALGORITHM and kms_key is not None and keyring is not None:
        _kms(_keys(keyring), kms_key.strip(), None, False)  # unknown or disabled: refused now
    bucket_key = (child_text(rule, "BucketKeyEnabled") or "").strip().lower() == "true"
    return DefaultRule(algorithm, kms_key.strip() if kms_key else None, bucket_key, blocked)


def _blocked_types(rule: Element) -> tuple[str, ...]:
    blocked: list[str] = []
    block = rule.find("BlockedEncryptionTypes")
    if block is not None:
        for el in block.findall("EncryptionType"):
            value = (el.text or "").strip()
            if value not in ("SSE-C", "NONE"):
                raise S3Error("MalformedXML")
            blocked.append(value)
    return tuple(blocked)


def replace_configuration(
    current: DefaultRule | None, new: DefaultRule | None, default: DefaultRule | None = None
) -> DefaultRule | None:
    """The bucket's rule after PutBucketEncryption (`new`) or DeleteBucketEncryption (None:
    back to `default`, the gateway's default rule, as AWS "resets the default encryption for
    the bucket as SSE-S3"). Whether SSE-C is blocked changes only when a request names
    BlockedEncryptionTypes: AWS has SSE-C enabled only deliberately ("explicitly enable it by
    updating the default encryption configuration"), so a default-encryption change that
    does not mention it, or a delete, leaves a blocked bucket blocked."""
    kept = current.blocked if current is not None else ()
    if new is None:
        if default is not None and default.algorithm is not None:
            return replace(default, blocked=kept)
        return replace(SSE_C_BLOCKED, blocked=kept) if "SSE-C" in kept else None
    if new.algorithm is None and current is not None and current.algorithm is not None:
        # Only (un)blocking SSE-C: the bucket's default encryption stays as it is.
        new = replace(
            new, algorithm=current.algorithm, kms_key=current.kms_key, bucket_key=current.bucket_key
        )
    return new if new.blocked else replace(new, blocked=kept)


def render_configuration(rule: DefaultRule) -> str:
    nodes: list = []
    if rule.algorithm is not None:
        apply = [("SSEAlgorithm", rule.algorithm), ("KMSMasterKeyID", rule.kms_key)]
        nodes.append(("ApplyServerSideEncryptionByDefault", apply))
        nodes.append(("BucketKeyEnabled", rule.bucket_key))
    if rule.blocked:
        nodes.append(("BlockedEncryptionTypes", [("EncryptionType", b) for b in rule.blocked]))
    return render("ServerSideEncryptionConfiguration", [("Rule", nodes)]).decode()


@functools.lru_cache(maxsize=256)
def _parsed(document: str) -> DefaultRule:
    return parse_configuration(document.encode(), None)


def default_rule(settings: Mapping[str, str]) -> DefaultRule | None:
    """The bucket's default encryption (a document this module wrote), or None."""
    document = settings.get("encryption")
    return None if document is None else _parsed(document)


# --- keys ----------------------------------------------------------------------------------
