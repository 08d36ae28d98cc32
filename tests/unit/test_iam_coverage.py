"""Every IAM and STS action the gateway answers is called by some test: a new action in the
table (gateway/iam/actions.py, gateway/iam/sts.py) fails here until a test sends it. A call is
boto3's method (`iam.attach_group_policy(`), aws-cli's command (`"attach-group-policy"`) or the
action's name sent as a query (`Action=AttachGroupPolicy`, `"Action": "AttachGroupPolicy"`)."""

from __future__ import annotations

import re
from pathlib import Path

from gateway.iam.actions import IAM_ACTIONS
from gateway.iam.sts import STS_ACTIONS

TESTS = Path(__file__).resolve().parents[1]


def _snake(action: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", action).lower()


def _called(action: str, text: str) -> bool:
    snake = _snake(action)
    return (
        f".{snake}(" in text
        or f'"{snake.replace("_", "-")}"' in text
        or re.search(rf"Action[\"']?\s*[=:]\s*[\"']?{action}\b", text) is not None
    )


def test_every_iam_action_is_called_by_a_test() -> None:
    text = "\n".join(
        p.read_text() for p in sorted(TESTS.rglob("*.py")) if p != Path(__file__).resolve()
    )
    actions = sorted({*IAM_ACTIONS, *STS_ACTIONS})
    assert len(actions) > 50  # the tables were found
    assert [a for a in actions if not _called(a, text)] == []


def test_the_scan_knows_the_three_ways_to_call() -> None:
    assert _snake("GetAccessKeyLastUsed") == "get_access_key_last_used"
    assert _snake("ListOpenIDConnectProviders") == "list_open_id_connect_providers"
    assert _called("AttachGroupPolicy", "iam.attach_group_policy(GroupName=g)")
    assert _called("AttachGroupPolicy", '_aws(s, k, "iam", "attach-group-policy")')
    assert _called("AttachGroupPolicy", "?Action=AttachGroupPolicy&Version=2010-05-08")
    assert not _called("AttachGroupPolicy", "iam.attach_role_policy(RoleName=r)")


_VERB = re.compile(
    r"\b((?:Create|Get|List|Update|Delete|Tag|Untag|Add|Remove|Put|Attach|Detach|Set|Assume)"
    r"[A-Z][A-Za-z]+)\b"
)


def test_every_iam_sts_and_topic_action_the_readme_lists_is_served_and_called() -> None:
    """The README's IAM, STS and notification-topic bullets name actions a user may rely on:
    each is in the gateway's tables (or the topics' API) and called by some test."""
    from gateway.notify import sns

    readme = (TESTS.parent / "README.md").read_text()
    bullets = [
        b.split("\n\n")[0]
        for b in readme.split("\n- ")
        if b.startswith(("IAM (", "STS (", "Notification topics"))
    ]
    assert len(bullets) == 3, "the README's IAM, STS and topics bullets were not found"
    listed = {m for b in bullets for m in _VERB.findall(b)} - {"UserName"}
    served = {*IAM_ACTIONS, *STS_ACTIONS, *sns.ACTIONS}
    assert listed - served == set()
    text = "\n".join(
        p.read_text() for p in sorted(TESTS.rglob("*.py")) if p != Path(__file__).resolve()
    )
    assert sorted(a for a in listed if not _called(a, text)) == []
