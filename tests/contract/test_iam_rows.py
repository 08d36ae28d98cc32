"""IAM's rows (security review 4, M1): a change reads the rows its rule needs and writes the
rows it changed, whatever the size of its account, and one account's look-ups never read
another's rows, while that other account changes its identities. On both catalogs, through
IAM's own actions (iam/api.perform) over a real Store; the catalog's IAM calls are recorded
on their way to the adapter, which answers them."""

from __future__ import annotations

import asyncio
import contextvars
import json
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gateway.iam.account import AWS_MANAGED, IamError
from gateway.iam.api import perform
from gateway.iam.principals import Principals, seal_token
from gateway.store import Store, open_catalog
from gateway.store.crypto import Keyring
from gateway.store.model import IamWrite
from gateway.users import User
from tests.contract.conftest import BACKENDS

BUSY = User("BUSYROOTKEY000000001", "busy-secret", "busy", "busy0000000000000000000000000000")
QUIET = User("QUIETROOTKEY00000001", "quiet-secret", "quiet", "quiet000000000000000000000000000")
KEYS = Keyring(secrets.token_bytes(32), [("s3", secrets.token_bytes(32))], {}, "aws-s3")
MANY = 120  # users, roles; a third as many groups and policies
IAM_READS = ("get_iam_account", "get_iam_entities", "list_iam_entities", "iam_counts",
             "iam_attachment_counts", "iam_group_members", "access_key_owner",
             "lock_iam_account")  # fmt: skip
POLICY = json.dumps({"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*"}]})  # fmt: skip
TRUST = json.dumps({"Version": "2012-10-17", "Statement": [{"Effect": "Allow",
    "Principal": {"AWS": BUSY.canonical_id}, "Action": "sts:AssumeRole"}]})  # fmt: skip
P0 = f"arn:aws:iam::{BUSY.canonical_id}:policy/p0"


# Which of the test's tasks a call came from (a transaction the SQLite writer runs in its own
# thread is nobody's).
WHO: contextvars.ContextVar[str] = contextvars.ContextVar("who", default="")
Log = list[tuple[str, tuple[Any, ...], Any, str]]


class Recorded:
    """A catalog reader or transaction whose IAM calls are written down (the account each
    names, the rows each returned, the task that asked) on their way to it, and its IAM
    writes."""

    def __init__(self, inner: Any, log: Log) -> None:
        self._inner = inner
        self._log = log

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._inner, name)
        if name not in (*IAM_READS, "write_identities"):
            return found

        async def call(*args: Any) -> Any:
            answer = await found(*args)
            self._log.append((name, args, answer, WHO.get()))
            return answer

        return call


class Gateway:
    def __init__(self, root: Path, url: str | None) -> None:
        self.runner = asyncio.Runner()
        self.store = Store(root, lambda pool: open_catalog(root, pool, url), keys=KEYS)
        self.principals = Principals(
            {u.access_key: u for u in (BUSY, QUIET)}, self.store, KEYS, ttl=0
        )
        self.log: Log = []
        self.store._read = Recorded(self.store._read, self.log)  # type: ignore[assignment]
        catalog = self.store.catalog
        write = catalog.write
        catalog.write = lambda fn, **kw: write(  # type: ignore[method-assign]
            lambda tx: fn(Recorded(tx, self.log)), **kw
        )

    def iam(self, user: User, action: str, **params: str) -> Any:
        return self.runner.run(
            perform(self.store, self.principals, user, "iam", action,
                    {"Action": action, **params})
        )  # fmt: skip

    def recorded(self, fn: Any) -> Log:
        """The IAM calls the catalog answered while `fn` ran."""
        self.log.clear()
        fn()
        return list(self.log)

    def close(self) -> None:
        self.store.close()
        self.runner.close()


@pytest.fixture(scope="module", params=sorted(BACKENDS))
def gateway(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Gateway]:
    gw = Gateway(
        tmp_path_factory.mktemp(f"iam-rows-{request.param}"), BACKENDS[request.param](request)
    )
    for n in range(MANY):
        gw.iam(BUSY, "CreateUser", UserName=f"u{n}")
        gw.iam(BUSY, "CreateRole", RoleName=f"r{n}", AssumeRolePolicyDocument=TRUST,
               Description="d" * 1000)  # fmt: skip
        if n < MANY // 3:
            gw.iam(BUSY, "CreateGroup", GroupName=f"g{n}")
            gw.iam(BUSY, "CreatePolicy", PolicyName=f"p{n}", PolicyDocument=POLICY)
        gw.iam(BUSY, "AddUserToGroup", GroupName=f"g{n % (MANY // 3)}", UserName=f"u{n}")
        gw.iam(BUSY, "AttachRolePolicy", RoleName=f"r{n}", PolicyArn=P0)
    yield gw
    gw.close()


def _rows_read(log: Log) -> int:
    """Entity rows the catalog returned (the account's own row counted as one)."""
    rows = 0
    for name, _, answer, _ in log:
        if name in ("get_iam_entities", "list_iam_entities"):
            rows += len(answer)
        elif name in ("get_iam_account", "lock_iam_account"):
            rows += answer is not None
    return rows


def _written(log: Log) -> list[IamWrite]:
    return [args[1] for name, args, _, _ in log if name == "write_identities"]


def test_a_change_reads_and_writes_its_own_rows(gateway: Gateway) -> None:
    log = gateway.recorded(lambda: gateway.iam(
        BUSY, "CreateRole", RoleName="one-more", AssumeRolePolicyDocument=TRUST))  # fmt: skip
    (write,) = _written(log)
    assert [(r.kind, r.name, r.new) for r in write.rows] == [("role", "one-more", True)]
    assert write.account_doc is None and not (write.keys_added or write.attached)
    # The account's row (its lock) and the counts for the quota: no other role's row.
    assert _rows_read(log) == 1
    assert "list_iam_entities" not in [entry[0] for entry in log]

    member = {"GroupName": "g1", "UserName": "one"}
    log = gateway.recorded(lambda: _refused(gateway, "NoSuchEntity", "AddUserToGroup", member))
    assert not _written(log)  # nothing written
    gateway.iam(BUSY, "CreateUser", UserName="one")
    log = gateway.recorded(lambda: gateway.iam(BUSY, "AddUserToGroup", **member))
    (write,) = _written(log)
    assert [(r.kind, r.name) for r in write.rows] == [("user", "one")]
    assert write.members_added == (("g1", "one"),)
    assert _rows_read(log) == 3  # the account's, the group's, the user's


def test_account_wide_rules_read_indexes_not_entities(gateway: Gateway) -> None:
    # A group with members and a policy attached to MANY roles: DeleteConflict, found in the
    # indexes.
    for action, params in (("DeleteGroup", {"GroupName": "g2"}),
                           ("DeletePolicy", {"PolicyArn": P0})):  # fmt: skip
        log = gateway.recorded(lambda a=action, p=params: _refused(gateway, "DeleteConflict", a, p))
        assert not _written(log)
        assert _rows_read(log) == 2, action  # the account's row and the entity's
    summary = gateway.iam(BUSY, "GetAccountSummary")["SummaryMap"]
    counts = {e["key"]: e["value"] for e in summary}
    listed = {part: len(gateway.iam(BUSY, f"List{part}", MaxItems="1000")[part])
              for part in ("Users", "Roles", "Groups", "Policies")}  # fmt: skip
    assert listed["Roles"] >= MANY and listed["Groups"] == MANY // 3
    assert {part: counts[part] for part in listed} == {
        **listed,
        # AWS's managed policies are listed, not counted.
        "Policies": listed["Policies"] - len(AWS_MANAGED),
    }
    policy = gateway.iam(BUSY, "GetPolicy", PolicyArn=P0)
    assert policy["Policy"]["AttachmentCount"] == MANY


def _refused(gateway: Gateway, code: str, action: str, params: dict[str, str]) -> None:
    with pytest.raises(IamError) as refused:
        gateway.iam(BUSY, action, **params)
    assert refused.value.code == code


def test_another_accounts_look_ups_never_read_the_busy_accounts_rows(gateway: Gateway) -> None:
    gateway.iam(QUIET, "CreateUser", UserName="reader")
    gateway.iam(QUIET, "CreateGroup", GroupName="readers")
    gateway.iam(QUIET, "AddUserToGroup", GroupName="readers", UserName="reader")
    made = gateway.iam(QUIET, "CreatePolicy", PolicyName="read", PolicyDocument=POLICY)
    gateway.iam(QUIET, "AttachGroupPolicy", GroupName="readers", PolicyArn=made["Policy"]["Arn"])
    key = gateway.iam(QUIET, "CreateAccessKey", UserName="reader")["AccessKey"]
    access_key = key["AccessKeyId"]

    async def busy_loop() -> None:
        WHO.set("busy")
        for n in range(20):
            await perform(gateway.store, gateway.principals, BUSY, "iam", "CreateRole",
                          {"RoleName": f"loop{n}", "AssumeRolePolicyDocument": TRUST})  # fmt: skip
            await perform(gateway.store, gateway.principals, BUSY, "iam", "DeleteRole",
                          {"RoleName": f"loop{n}"})  # fmt: skip

    async def quiet_look_ups() -> list[User]:
        WHO.set("quiet")
        found = []
        for _ in range(20):
            gateway.principals.forget()  # every look-up reads the catalog (ttl 0 besides)
            await gateway.principals.prepare(access_key, None)
            found.append(gateway.principals[access_key])
            await asyncio.sleep(0)
        return found

    async def both() -> list[User]:
        _, users = await asyncio.gather(busy_loop(), quiet_look_ups())
        return users

    gateway.log.clear()
    users = gateway.runner.run(both())
    assert {(u.secret_key, u.canonical_id) for u in users} == {
        (key["SecretAccessKey"], QUIET.canonical_id)
    }
    assert all(u.identity is not None and len(u.identity.policies) == 1 for u in users)
    # Every write of the loop touched one row of the busy account (the role made, then gone).
    writes = _written(gateway.log)
    assert len(writes) == 40 and all(len(w.rows) == 1 for w in writes)
    # Each look-up of the quiet account's key read the key's index entry and three rows of its
    # own account (its user, its group, the group's policy): none of the busy account's.
    quiet = [entry for entry in gateway.log if entry[3] == "quiet"]
    assert [e[0] for e in quiet].count("access_key_owner") == 20
    assert all(e[1][0] in (access_key, QUIET.canonical_id) for e in quiet), quiet
    assert _rows_read(quiet) == 20 * 3


def test_a_deleted_roles_session_reads_one_row_and_is_refused(gateway: Gateway) -> None:
    made = gateway.iam(BUSY, "CreateRole", RoleName="gone", AssumeRolePolicyDocument=TRUST)
    gateway.iam(BUSY, "DeleteRole", RoleName="gone")
    claims = {"kind": "role", "role": "gone", "role_id": made["Role"]["RoleId"], "session": "s",
              "ak": "ASIAGONE", "sk": "temp", "exp": time.time() + 900,
              "acc": BUSY.canonical_id}  # fmt: skip
    token = seal_token(KEYS.master, claims)
    for _ in range(3):  # each request asks again (nothing is kept of a session refused)
        log = gateway.recorded(
            lambda: gateway.runner.run(gateway.principals.prepare("ASIAGONE", token))
        )
        assert [(e[0], e[1][:2]) for e in log] == [
            ("get_iam_entities", (BUSY.canonical_id, "role"))
        ]
        assert _rows_read(log) == 0
        with pytest.raises(KeyError):
            gateway.principals["ASIAGONE"]
