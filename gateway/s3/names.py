"""Bucket names: what a new bucket may be called, and what no bucket anywhere can be called."""

from __future__ import annotations

import re

# A bucket name is a DNS name: labels of lowercase letters, digits and hyphens, each starting
# and ending with a letter or digit, joined by single dots (so no "..", "-." or ".-").
_LABEL = r"[a-z0-9](?:[a-z0-9-]*[a-z0-9])?"
_NAME = re.compile(rf"{_LABEL}(?:\.{_LABEL})*")
# "Must not be formatted as an IP address": four dotted numbers, whatever their values.
_IP_FORM = re.compile(r"[0-9]+(?:\.[0-9]+){3}")
_RESERVED_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
_RESERVED_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")
# What a bucket that exists anywhere can be called: names from before AWS's DNS rules (us-east-1
# until March 2018) were up to 255 letters of either case, digits, ".", "-" and "_".
_ANY_BUCKET = re.compile(r"[A-Za-z0-9._-]{3,255}")


def valid_bucket_name(name: str) -> bool:
    """AWS's general purpose bucket naming rules, for a new bucket (bucketnamingrules.html).
    The per-label rule is the DNS one AWS still applies: s3-tests' dns_dash_dot and
    dns_dot_dash ("foo-.bar", "foo.-bar") expect InvalidBucketName from AWS."""
    if not 3 <= len(name) <= 63 or not _NAME.fullmatch(name) or _IP_FORM.fullmatch(name):
        return False
    return not (name.startswith(_RESERVED_PREFIXES) or name.endswith(_RESERVED_SUFFIXES))


def could_be_a_bucket(name: str) -> bool:
    """False for a name no bucket can have, old or new: a request to it is InvalidBucketName
    rather than NoSuchBucket, as AWS answers (a GetObject from bucket "a", for one)."""
    return _ANY_BUCKET.fullmatch(name) is not None
