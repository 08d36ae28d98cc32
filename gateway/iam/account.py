"""One account's IAM identities as AWS's IAM keeps them: users (with access keys, inline and
attached policies, groups), groups, roles (with a trust policy) and customer managed policies.

Stored as rows, one per entity (Store.change_identities runs an account's changes one at a
time), and every rule below is a pure function of the rows it reads through the view
(view.py): names unique without regard to case, AWS's limits, and DeleteConflict while an
entity still has what must go first (https://docs.aws.amazon.com/IAM/latest/APIReference/,
each action's Errors). A rule reads the entities it names, and the account's counts and
indexes (a group's members, a policy's attachments, a key's owner), never every entity but to
list them.
"""

from __future__ import annotations

import json
import re
import secrets
import string
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from ..s3 import policy
from ..s3.errors import S3Error
from ..store import Store
from ..store.api import IdentityReader
from ..store.identities import IdentityChange
from ..users import account_number, numbered
from . import view
from .view import KINDS, NOTHING, Loaded, Need, Part, View

T = TypeVar("T")

NAMESPACE = "https://iam.amazonaws.com/doc/2010-05-08/"

# IAM's quotas (reference_iam-quotas.html).
MAX_KEYS_PER_USER = 2
MAX_GROUPS_PER_USER = 10
MAX_ATTACHED = 10  # managed policies per user, group or role
MAX_POLICY_VERSIONS = 5
# Inline policies' aggregate size per identity, in characters without white space.
INLINE_BYTES = {"user": 2048, "group": 5120, "role": 10240}
MANAGED_BYTES = 6144
TRUST_BYTES = 2048  # a role's trust policy, in characters without white space
MAX_DESCRIPTION = 1000  # a role's or a managed policy's description
# Entities per account: an account's identities are bounded, and so is what a change of them
# reads and writes.
MAX_ENTITIES = {
    "users": ("UsersPerAccount", 5000),
    "groups": ("GroupsPerAccount", 300),
    "roles": ("RolesPerAccount", 1000),
    "policies": ("PoliciesPerAccount", 1500),
}
DEFAULT_SESSION = 3600
MAX_SESSION_LIMIT = 43200


class IamError(Exception):
    """An IAM or STS error: its code, HTTP status and message, as AWS answers."""

    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.code, self.message, self.status = code, message, status


def no_such(kind: str, name: str) -> IamError:
    return IamError("NoSuchEntity", f"The {kind} with name {name} cannot be found.", 404)


def _validation(message: str) -> IamError:
    return IamError("ValidationError", message)


# ASCII only, as IAM's names: a Unicode look-alike would lower() into another's (K, U+212A).
_NAME = re.compile(r"[\w+=,.@-]+", re.ASCII)
PATH = re.compile(r"/|/[\x21-\x7e]*/")


def check_name(value: str | None, field: str, limit: int) -> str:
    if value is None or value == "":
        raise _validation(f"1 validation error detected: Value null at '{field}' failed to satisfy "
                           "constraint: Member must not be null")  # fmt: skip
    if len(value) > limit or not _NAME.fullmatch(value):
        raise _validation(
            f"1 validation error detected: Value '{value}' at '{field}' failed to satisfy "
            f"constraint: Member must have length less than or equal to {limit} and satisfy "
            r"regular expression pattern: [\w+=,.@-]+"
        )
    return value


def check_path(value: str | None, field: str = "path") -> str:
    if value is None:
        return "/"
    if len(value) > 512 or not PATH.fullmatch(value):
        raise _validation(
            f"The specified value for {field} is invalid. It must begin and end with / and "
            "contain only alphanumeric characters and/or / characters."
        )
    return value


def new_id(prefix: str, n: int = 17) -> str:
    return prefix + "".join(
        secrets.choice(string.ascii_uppercase + string.digits) for _ in range(n)
    )


def new_secret() -> str:
    return "".join(secrets.choice(string.ascii_letters + string.digits + "+/") for _ in range(40))


def check_policy(text: str | None, field: str, kind: policy.Kind) -> str:
    """A policy document as IAM accepts it: MalformedPolicyDocument otherwise."""
    if text is None or text == "":
        raise _validation(f"1 validation error detected: Value null at '{field}' failed to "
                          "satisfy constraint: Member must not be null")  # fmt: skip
    try:
        parsed = policy.parse(text, "", kind, max_bytes=1 << 17)
    except S3Error as exc:
        raise IamError(
            "MalformedPolicyDocument", exc.message or "Syntax errors in policy."
        ) from None
    if kind is policy.Kind.IDENTITY and not parsed.statements:
        raise IamError("MalformedPolicyDocument", "Syntax errors in policy.")
    return text


def _squeezed(text: str) -> int:
    return len(re.sub(r"\s", "", text))


def check_trust(text: str | None) -> str:
    """A role's trust policy: a policy of its kind, within IAM's 2,048 characters."""
    text = check_policy(text, "assumeRolePolicyDocument", policy.Kind.TRUST)
    if _squeezed(text) > TRUST_BYTES:
        raise IamError(
            "LimitExceeded", f"Cannot exceed quota for ACLSizePerRole: {TRUST_BYTES}", 409
        )
    return text


def check_description(value: str | None) -> str:
    if value is not None and len(value) > MAX_DESCRIPTION:
        raise _validation(
            "1 validation error detected: Value at 'description' failed to satisfy constraint: "
            f"Member must have length less than or equal to {MAX_DESCRIPTION}"
        )
    return value or ""


# AWS managed policies a user may attach (the S3, IAM and SNS ones; others name no action
# here). Their documents are AWS's.
AWS_MANAGED: dict[str, str] = {
    "arn:aws:iam::aws:policy/AmazonS3FullAccess": json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {"Effect": "Allow", "Action": ["s3:*", "s3-object-lambda:*"], "Resource": "*"}
            ],
        }
    ),
    "arn:aws:iam::aws:policy/AmazonS3ReadOnlyAccess": json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Action": [
                        "s3:Get*",
                        "s3:List*",
                        "s3:Describe*",
                        "s3-object-lambda:Get*",
                        "s3-object-lambda:List*",
                    ],
                    "Resource": "*",
                }
            ],
        }
    ),
    "arn:aws:iam::aws:policy/IAMFullAccess": json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Action": [
                        "iam:*",
                        "organizations:DescribeAccount",
                        "organizations:DescribeOrganization",
                    ],
                    "Resource": "*",
                }
            ],
        }
    ),
    "arn:aws:iam::aws:policy/IAMReadOnlyAccess": json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Action": [
                        "iam:GenerateCredentialReport",
                        "iam:Get*",
                        "iam:List*",
                        "iam:SimulateCustomPolicy",
                        "iam:SimulatePrincipalPolicy",
                    ],
                    "Resource": "*",
                }
            ],
        }
    ),
    "arn:aws:iam::aws:policy/AmazonSNSFullAccess": json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Action": ["sns:*"], "Resource": "*"}],
        }
    ),
    "arn:aws:iam::aws:policy/AmazonSNSReadOnlyAccess": json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Action": [
                        "sns:GetTopicAttributes",
                        "sns:List*",
                        "sns:CheckIfPhoneNumberIsOptedOut",
                        "sns:GetEndpointAttributes",
                        "sns:GetDataProtectionPolicy",
                        "sns:GetPlatformApplicationAttributes",
                        "sns:GetSMSAttributes",
                        "sns:GetSMSSandboxAccountStatus",
                        "sns:GetSubscriptionAttributes",
                    ],
                    "Resource": "*",
                }
            ],
        }
    ),
}


@dataclass
class Account:
    """An account's identities as a view of its rows (view.py), changed in place by the
    operations below."""

    id: str  # the account's canonical id, which its rows are kept under
    view: View

    @property
    def number(self) -> str:
        """The account's 12-digit id, which its ARNs carry."""
        return account_number(self.id)

    @property
    def doc(self) -> dict[str, Part]:
        """The account's users, groups, roles and policies by lower-case name."""
        return self.view.parts

    @staticmethod
    def load(account: str, text: str | None) -> Account:
        """An account held in memory alone, from a whole document (None: an empty one)."""
        doc = json.loads(text) if text else {}
        loaded = Loaded(complete=True, account_read=True)
        root = doc.get("root")
        loaded.account = None if root is None else json.dumps(root)
        for part in KINDS:
            for name, entry in doc.get(part, {}).items():
                loaded.rows[(part, name)] = json.dumps(entry)
        return Account(account, View(loaded))

    def root(self) -> dict[str, Any]:
        """The root's own entry: its access keys beside its users-file key."""
        return self.view.root()

    def is_root(self, entry: dict[str, Any]) -> bool:
        return self.view.is_root(entry)

    # -- ARNs --

    def arn(self, kind: str, path: str, name: str) -> str:
        return f"arn:aws:iam::{self.number}:{kind}{path}{name}"

    def root_arn(self) -> str:
        return f"arn:aws:iam::{self.number}:root"

    def kept(self, arn: str) -> str:
        """A managed policy's ARN as attachments keep it: with the canonical id, as they were
        written before accounts had numbers (the rows and the attachment index stay as they
        are; what is shown is `numbered`)."""
        number = f"arn:aws:iam::{self.number}:"
        arn = numbered(arn)
        return f"arn:aws:iam::{self.id}:" + arn[len(number) :] if arn.startswith(number) else arn

    # -- finding --

    def _find(self, part: str, kind: str, name: str | None, field: str) -> dict[str, Any]:
        check_name(name, field, 128 if part in ("groups", "policies") else 64)
        assert name is not None
        found = self.doc[part].get(name.lower())
        if found is None:
            raise no_such(kind, name)
        return found

    def user(self, name: str | None) -> dict[str, Any]:
        return self._find("users", "user", name, "userName")

    def group(self, name: str | None) -> dict[str, Any]:
        return self._find("groups", "group", name, "groupName")

    def role(self, name: str | None) -> dict[str, Any]:
        return self._find("roles", "role", name, "roleName")

    def managed(self, arn: str | None) -> tuple[str, dict[str, Any] | None]:
        """A managed policy's document text and its entry (None: one of AWS's)."""
        if not arn:
            raise _validation("1 validation error detected: Value null at 'policyArn'")
        if arn in AWS_MANAGED:
            return AWS_MANAGED[arn], None
        given, arn = arn, numbered(arn)
        prefix = f"arn:aws:iam::{self.number}:policy"
        if not arn.startswith(prefix + "/"):
            raise IamError(
                "NoSuchEntity", f"Policy {arn} does not exist or is not attachable.", 404
            )
        # A policy's ARN ends in its name (after its path): the name finds its one row.
        entry = self.doc["policies"].get(arn.rpartition("/")[2].lower())
        if entry is not None and self.arn("policy", entry["path"], entry["name"]) == arn:
            return entry["versions"][entry["default"]], entry
        raise IamError("NoSuchEntity", f"Policy {given} was not found.", 404)

    def require_managed(self, arns: list[str]) -> None:
        """The rows of this account's managed policies among `arns` read, at once."""
        prefix = f"arn:aws:iam::{self.number}:policy/"
        self.doc["policies"].require(
            a.rpartition("/")[2].lower() for a in map(numbered, arns) if a.startswith(prefix)
        )

    def user_of_key(self, access_key: str) -> dict[str, Any] | None:
        """The user whose key it is (the root's entry for one of the root's keys)."""
        return self.view.key_owner(access_key)

    # -- making --

    def _create(self, part: str, kind: str, name: str, entry: dict[str, Any]) -> dict[str, Any]:
        self._free(part, kind, name)
        quota, limit = MAX_ENTITIES[part]
        if len(self.doc[part]) >= limit:
            raise IamError("LimitExceeded", f"Cannot exceed quota for {quota}: {limit}", 409)
        self.doc[part][name.lower()] = entry
        return entry

    def _free(self, part: str, kind: str, name: str) -> None:
        """EntityAlreadyExists unless `name` is no other entity's, without regard to case."""
        if name.lower() in self.doc[part]:
            raise IamError(
                "EntityAlreadyExists", f"{kind.capitalize()} with name {name} already exists.", 409
            )

    def rename(
        self, part: str, kind: str, entry: dict[str, Any], name: str | None, field: str
    ) -> tuple[str, str]:
        """UpdateUser's and UpdateGroup's new name (the same name in another case is no
        clash); gives the entity's old and new keys."""
        name = check_name(name, field, 64 if part == "users" else 128)
        old, new = entry["name"].lower(), name.lower()
        if new != old:
            self._free(part, kind, name)
        del self.doc[part][old]
        entry["name"] = name
        self.doc[part][new] = entry
        return old, new

    def create_user(self, name: str | None, path: str | None) -> dict[str, Any]:
        name = check_name(name, "userName", 64)
        entry = {"name": name, "path": check_path(path), "id": new_id("AIDA"),
                 "created": time.time(), "policies": {}, "attached": [], "groups": [],
                 "keys": {}}  # fmt: skip
        return self._create("users", "user", name, entry)

    def create_group(self, name: str | None, path: str | None) -> dict[str, Any]:
        name = check_name(name, "groupName", 128)
        entry = {"name": name, "path": check_path(path), "id": new_id("AGPA"),
                 "created": time.time(), "policies": {}, "attached": []}  # fmt: skip
        return self._create("groups", "group", name, entry)

    def create_role(
        self, name: str | None, path: str | None, trust: str | None, max_session: str | None,
        description: str | None,
    ) -> dict[str, Any]:  # fmt: skip
        name = check_name(name, "roleName", 64)
        trust = check_trust(trust)
        entry = {"name": name, "path": check_path(path), "id": new_id("AROA"),
                 "created": time.time(), "trust": trust,
                 "max_session": session_limit(max_session),
                 "description": check_description(description),
                 "policies": {}, "attached": []}  # fmt: skip
        return self._create("roles", "role", name, entry)

    def create_policy(
        self, name: str | None, path: str | None, text: str | None, description: str | None
    ) -> dict[str, Any]:
        name = check_name(name, "policyName", 128)
        text = check_policy(text, "policyDocument", policy.Kind.IDENTITY)
        if _squeezed(text) > MANAGED_BYTES:
            raise IamError(
                "LimitExceeded", f"Cannot exceed quota for PolicySize: {MANAGED_BYTES}", 409
            )
        entry = {"name": name, "path": check_path(path), "id": new_id("ANPA"),
                 "created": time.time(), "updated": time.time(),
                 "description": check_description(description),
                 "versions": {"v1": text}, "default": "v1", "next": 2}  # fmt: skip
        return self._create("policies", "policy", name, entry)

    def customer_policy(self, arn: str | None) -> dict[str, Any]:
        """A customer managed policy of this account (AWS's own have no versions to change)."""
        _, entry = self.managed(arn)
        if entry is None:
            raise IamError("AccessDenied", "An AWS managed policy cannot be changed.", 403)
        return entry

    def create_policy_version(self, arn: str | None, text: str | None, default: bool) -> str:
        entry = self.customer_policy(arn)
        text = check_policy(text, "policyDocument", policy.Kind.IDENTITY)
        if _squeezed(text) > MANAGED_BYTES:
            raise IamError(
                "LimitExceeded", f"Cannot exceed quota for PolicySize: {MANAGED_BYTES}", 409
            )
        if len(entry["versions"]) >= MAX_POLICY_VERSIONS:
            raise IamError(
                "LimitExceeded",
                f"A managed policy can have up to {MAX_POLICY_VERSIONS} versions. Before you "
                "create a new version, you must delete an existing version.",
                409,
            )
        version = f"v{entry['next']}"
        entry["next"] += 1
        entry["versions"][version] = text
        entry.setdefault("dates", {})[version] = entry["updated"] = time.time()
        if default:
            entry["default"] = version
        return version

    def policy_version(self, entry: dict[str, Any], version: str | None) -> str:
        if version not in entry["versions"]:
            raise IamError("NoSuchEntity", f"Policy version {version} does not exist.", 404)
        return version

    def set_default_version(self, arn: str | None, version: str | None) -> None:
        entry = self.customer_policy(arn)
        entry["default"] = self.policy_version(entry, version)
        entry["updated"] = time.time()

    def delete_policy_version(self, arn: str | None, version: str | None) -> None:
        entry = self.customer_policy(arn)
        version = self.policy_version(entry, version)
        if version == entry["default"]:
            raise IamError("DeleteConflict", "Cannot delete the default version of a policy.", 409)
        del entry["versions"][version]
        entry.get("dates", {}).pop(version, None)

    # -- policies of an identity --

    def put_inline(
        self, kind: str, entry: dict[str, Any], name: str | None, text: str | None
    ) -> None:
        name = check_name(name, "policyName", 128)
        text = check_policy(text, "policyDocument", policy.Kind.IDENTITY)
        others = sum(_squeezed(t) for n, t in entry["policies"].items() if n != name)
        if others + _squeezed(text) > INLINE_BYTES[kind]:
            raise IamError("LimitExceeded", f"Maximum policy size of {INLINE_BYTES[kind]} bytes "
                           f"exceeded for {kind} {entry['name']}", 409)  # fmt: skip
        entry["policies"][name] = text

    def inline(self, kind: str, entry: dict[str, Any], name: str | None) -> str:
        name = check_name(name, "policyName", 128)
        text = entry["policies"].get(name)
        if text is None:
            raise IamError(
                "NoSuchEntity", f"The {kind} policy with name {name} cannot be found.", 404
            )
        return text

    def delete_inline(self, kind: str, entry: dict[str, Any], name: str | None) -> None:
        self.inline(kind, entry, name)
        del entry["policies"][name]

    def attach(self, entry: dict[str, Any], arn: str | None) -> None:
        _, _managed = self.managed(arn)
        assert arn is not None
        arn = self.kept(arn)
        if arn in entry["attached"]:
            return
        if len(entry["attached"]) >= MAX_ATTACHED:
            raise IamError(
                "LimitExceeded", f"Cannot exceed quota for PoliciesPerUser: {MAX_ATTACHED}", 409
            )
        entry["attached"].append(arn)

    def detach(self, entry: dict[str, Any], arn: str | None) -> None:
        self.managed(arn)
        assert arn is not None
        if self.kept(arn) not in entry["attached"]:
            raise IamError("NoSuchEntity", f"Policy {arn} was not found.", 404)
        entry["attached"].remove(self.kept(arn))

    def attachments(self, arn: str) -> int:
        kept = self.kept(arn)
        return self.view.attachments([kept])[kept]

    # -- deleting --

    def delete_user(self, name: str | None) -> list[str]:
        user = self.user(name)
        if user["keys"] or user["policies"] or user["attached"] or user["groups"]:
            raise IamError("DeleteConflict", "Cannot delete entity, must delete access keys, "
                           "policies and group memberships first.", 409)  # fmt: skip
        del self.doc["users"][user["name"].lower()]
        return []

    def delete_group(self, name: str | None) -> None:
        group = self.group(name)
        if group["policies"] or group["attached"]:
            raise IamError(
                "DeleteConflict", "Cannot delete entity, must delete policies first.", 409
            )
        if self.view.members(group["name"].lower()):
            raise IamError(
                "DeleteConflict", "Cannot delete entity, must remove users from group first.", 409
            )
        del self.doc["groups"][group["name"].lower()]

    def delete_role(self, name: str | None) -> None:
        role = self.role(name)
        if role["policies"] or role["attached"]:
            raise IamError(
                "DeleteConflict", "Cannot delete entity, must delete policies first.", 409
            )
        del self.doc["roles"][role["name"].lower()]

    def delete_policy(self, arn: str | None) -> None:
        _, entry = self.managed(arn)
        if entry is None:
            raise IamError("AccessDenied", "An AWS managed policy cannot be deleted.", 403)
        assert arn is not None
        if self.attachments(arn):
            raise IamError("DeleteConflict", "Cannot delete a policy attached to entities.", 409)
        if len(entry["versions"]) > 1:
            raise IamError(
                "DeleteConflict",
                "This policy has more than one version. Before you delete a policy, you must "
                "delete the policy's versions. The default version is deleted with the policy.",
                409,
            )
        del self.doc["policies"][entry["name"].lower()]

    # -- what an identity may do --

    def user_policies(self, user: dict[str, Any]) -> list[str]:
        """Every identity policy that applies to `user`: its own (inline and attached) and its
        groups'."""
        self.doc["groups"].require(user["groups"])
        groups = [g for g in map(self.doc["groups"].get, user["groups"]) if g is not None]
        self.require_managed([a for e in [user, *groups] for a in e["attached"]])
        texts = list(user["policies"].values())
        texts += [self.managed(arn)[0] for arn in user["attached"]]
        for group in groups:
            texts += list(group["policies"].values())
            texts += [self.managed(arn)[0] for arn in group["attached"]]
        return texts

    def role_policies(self, role: dict[str, Any]) -> list[str]:
        self.require_managed(role["attached"])
        return list(role["policies"].values()) + [self.managed(a)[0] for a in role["attached"]]


def session_limit(value: str | None) -> int:
    if value is None:
        return DEFAULT_SESSION
    if (
        not (value.isascii() and value.isdigit())
        or not DEFAULT_SESSION <= int(value) <= MAX_SESSION_LIMIT
    ):
        raise _validation(
            f"1 validation error detected: Value '{value}' at 'maxSessionDuration' failed to "
            "satisfy constraint: Member must have value less than or equal to 43200 and "
            "greater than or equal to 3600"
        )
    return int(value)


# -- a rule over the store ------------------------------------------------------------------


async def read(
    reader: IdentityReader,
    account: str,
    rule: Callable[[Account], T],
    need: Need = NOTHING,
    loaded: Loaded | None = None,
) -> T:
    """`rule` run on the rows of `account` it reads (`need` first, after what `loaded` holds),
    each read a statement of its own."""
    loaded = loaded or Loaded()
    await loaded.read(reader, account, need)
    result, _ = await view.run(reader, account, loaded, lambda v: rule(Account(account, v)))
    return result


async def change(
    store: Store, account: str, rule: Callable[[Account], T], need: Need = NOTHING
) -> T:
    """`rule` run on the rows of `account` it reads (`need` first), alone among the account's
    changes; the rows it changed written, in the same transaction."""

    async def run(tx: IdentityReader, current: str | None) -> IdentityChange[T]:
        loaded = Loaded(account=current, account_read=True)
        await loaded.read(tx, account, need)
        result, seen = await view.run(tx, account, loaded, lambda v: rule(Account(account, v)))
        return IdentityChange(result, seen.written())

    return await store.change_identities(account, run)
