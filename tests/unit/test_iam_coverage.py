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
