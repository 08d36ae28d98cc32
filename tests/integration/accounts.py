"""A gateway with two users of a users file (each an account of its own) and an anonymous
client, for the access-control tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from botocore import UNSIGNED
from botocore.exceptions import ClientError

from gateway.users import account_number
from tests.server import GatewayProcess

OWNER_ID = "0wner0000000000000000000000000000000000000000000000000000000000a"
ALT_ID = "a1t0000000000000000000000000000000000000000000000000000000000000b"
# Their 12-digit account ids, which ARNs carry (a canonical id in an ARN names them too).
OWNER_NUMBER = account_number(OWNER_ID)
ALT_NUMBER = account_number(ALT_ID)
ALT_EMAIL = "alt@example.com"  # what a grant by e-mail address names it by (--email-grants)
USERS = f"""
[[user]]
access_key = "OWNERACCESSKEY000001"
secret_key = "owner-secret"
display_name = "owner"
canonical_id = "{OWNER_ID}"

[[user]]
access_key = "ALTACCESSKEY00000001"
secret_key = "alt-secret"
display_name = "alt"
canonical_id = "{ALT_ID}"
email = "{ALT_EMAIL}"
"""


@dataclass
class Accounts:
    server: GatewayProcess
    owner: Any  # boto3 clients
    alt: Any
    anon: Any
    created: int = 0

    def new_bucket(self, **kw: Any) -> str:
        """A new bucket of the owner's (CreateBucket's arguments in `kw`)."""
        self.created += 1
        name = f"access-{self.created}"
        self.owner.create_bucket(Bucket=name, **kw)
        return name


def start(tmp: Path, bucket_defaults: str, catalog: str | None = None, **settings: str) -> Accounts:
    """`settings`: more S3GW_* variables."""
    users = tmp / "users.toml"
    users.write_text(USERS)
    env = {
        "S3GW_USERS": str(users),
        "S3GW_ACCESS_KEY": "",
        "S3GW_SECRET_KEY": "",
        "S3GW_BUCKET_DEFAULTS": bucket_defaults,
        **settings,
    }
    server = GatewayProcess(tmp / "data", env, catalog=catalog).start()
    return Accounts(
        server,
        server.client("OWNERACCESSKEY000001", "owner-secret"),
        server.client("ALTACCESSKEY00000001", "alt-secret"),
        server.client(signature_version=UNSIGNED),
    )


def accounts_fixture(bucket_defaults: str, **settings: str) -> Any:
    """A module-scoped fixture: a gateway started with --bucket-defaults `bucket_defaults`
    (and the S3GW_* variables `settings`), on each catalog."""

    @pytest.fixture(scope="module")
    def fixture(
        tmp_path_factory: pytest.TempPathFactory, new_catalog: Callable[[], str | None]
    ) -> Iterator[Accounts]:
        tmp = tmp_path_factory.mktemp(bucket_defaults)
        accounts = start(tmp, bucket_defaults, new_catalog(), **settings)
        yield accounts
        accounts.server.stop()

    return fixture


def error(call: Callable[..., Any], **kw: Any) -> tuple[str, int] | None:
    """(code, status) of a call that fails; None if it succeeds."""
    try:
        call(**kw)
    except ClientError as exc:
        meta = exc.response["ResponseMetadata"]
        return exc.response["Error"].get("Code", ""), meta["HTTPStatusCode"]
    return None


def fails(call: Callable[..., Any], **kw: Any) -> tuple[str, int]:
    found = error(call, **kw)
    if found is None:
        pytest.fail(f"{call.__name__} succeeded")
    return found
