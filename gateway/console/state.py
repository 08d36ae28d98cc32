"""What every console handler reaches: the store, the settings, the sessions, and who an
access key is (the Authenticator's Principals, which IAM actions take)."""

from __future__ import annotations

from dataclasses import dataclass, field

from aiohttp import web

from .. import metrics
from ..config import Settings
from ..iam.principals import Principals
from ..store import Store
from .session import Session, Sessions, SignInLimits


@dataclass
class Console:
    store: Store
    settings: Settings
    sessions: Sessions
    renderer: metrics.Renderer
    principals: Principals
    limits: SignInLimits = field(default_factory=SignInLimits)  # this process's counts


CONSOLE = web.AppKey("console", Console)
SESSION = web.RequestKey("console_session", Session)
# What the access log line names: the action, and the bucket and key it touched.
ACTION = web.RequestKey("console_action", str)
BUCKET = web.RequestKey("console_bucket", str)
KEY = web.RequestKey("console_key", str)


def redirect(location: str) -> web.Response:
    return web.Response(status=303, headers={"Location": location})
