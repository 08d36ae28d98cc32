"""Console sessions and CSRF tokens: signed, expiring, and kept by nobody.

A session is a token in a cookie, MACed with a secret of the data folder, so that any worker
and any node serving that folder accepts it (an in-memory table would sign a user out whenever
a request landed on another process). The MAC also covers a digest of the user's secret key:
a user whose secret changes in the users file is signed out everywhere. Sign-out forgets the
cookie; a copy of the token taken before stays valid until it expires (SESSION_SECONDS), the
price of keeping no session table.

The users are the Authenticator's (`Principals`): the roots of the users file, and IAM users'
access keys, which its `prepare` coroutine reads from the catalog before a sign-in or a
session is checked here; a key deleted or deactivated ends its sessions within
--iam-cache-seconds. Temporary credentials (STS) sign no one in: they are valid only with
their session token, which the sign-in form does not take.

A form's CSRF token is an HMAC of the session's nonce: a page of another origin can make the
browser send the cookie (SameSite=Strict already stops that in current browsers) but cannot
read the token. The sign-in form, before any session, is bound the same way to a random
pre-session cookie.

Failed sign-ins are bounded (SignInLimits): a guesser gets a few tries per access key and per
address, then waits. Those counts, unlike sessions, are kept in each process's memory: the
bound holds per worker.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import math
import os
import secrets
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ..users import User

SESSION_SECONDS = 8 * 3600
SECRET_FILE = "console.key"
# Failed sign-ins allowed within FAILURE_WINDOW: a handful per access key (a user mistyping
# is not locked out for long), more per address (several users behind one NAT).
FAILURE_WINDOW = 15 * 60
FAILURES_PER_KEY = 5
FAILURES_PER_ADDRESS = 20
# Counters kept at most: past it, those with no failure in the window are dropped, and if
# none is, the oldest (a flood of new keys or addresses cannot grow the table without end).
MAX_COUNTERS = 100_000


def folder_secret(data: Path) -> bytes:
    """The data folder's console secret, made once by whichever process comes first (a link
    is atomic, also on a shared file system: the others read the winner's)."""
    path = data / SECRET_FILE
    try:
        return bytes.fromhex(path.read_text().strip())
    except FileNotFoundError:
        pass
    tmp = data / f".{SECRET_FILE}.{os.getpid()}.{secrets.token_hex(4)}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, secrets.token_hex(32).encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)
    except FileExistsError:
        pass
    finally:
        tmp.unlink()
    return bytes.fromhex(path.read_text().strip())


@dataclass(frozen=True)
class Session:
    user: User
    nonce: str
    expires: int


def _b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def _unb64(text: str) -> str:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode()


class Sessions:
    def __init__(
        self,
        secret: bytes,
        users: Mapping[str, User],
        clock: Callable[[], float] = time.time,
        seconds: int = SESSION_SECONDS,
    ) -> None:
        self._secret = secret
        self._users = users
        self._clock = clock
        self._seconds = seconds

    def _mac(self, *parts: str) -> str:
        message = "\n".join(parts).encode()
        return hmac.new(self._secret, message, hashlib.sha256).hexdigest()

    def sign_in(self, access_key: str, secret_key: str) -> tuple[Session, str] | None:
        """A new session and its token, if the keys are a user's (compared in constant time)."""
        user = self._users.get(access_key)
        if (
            user is None
            or user.session_token
            or not hmac.compare_digest(user.secret_key.encode(), secret_key.encode())
        ):
            return None
        session = Session(user, secrets.token_hex(16), int(self._clock()) + self._seconds)
        return session, self._token(session)

    def _token(self, session: Session) -> str:
        fields = (_b64(session.user.access_key), str(session.expires), session.nonce)
        mac = self._mac("session", *fields, _fingerprint(session.user))
        return ".".join((*fields, mac))

    def access_key(self, token: str | None) -> str | None:
        """The access key a cookie's token names (not yet verified), to look its user up."""
        fields = (token or "").split(".")
        if len(fields) != 4:
            return None
        try:
            return _unb64(fields[0])
        except (ValueError, UnicodeDecodeError):
            return None

    def verify(self, token: str | None) -> Session | None:
        """The session a cookie holds, or None: malformed, forged, expired, or its user gone
        or given another secret."""
        if not token:
            return None
        fields = token.split(".")
        if len(fields) != 4 or not fields[1].isdigit():
            return None
        try:
            access_key = _unb64(fields[0])
        except (ValueError, UnicodeDecodeError):
            return None
        user = self._users.get(access_key)
        if user is None or user.session_token:
            return None
        expected = self._mac("session", *fields[:3], _fingerprint(user))
        if not hmac.compare_digest(expected, fields[3]):
            return None
        expires = int(fields[1])
        if expires <= self._clock():
            return None
        return Session(user, fields[2], expires)

    def csrf(self, nonce: str) -> str:
        """The CSRF token of a session (its nonce) or of a pre-session cookie."""
        return self._mac("csrf", nonce)

    def check_csrf(self, nonce: str | None, token: str | None) -> bool:
        if not nonce or not token:
            return False
        return hmac.compare_digest(self.csrf(nonce), token)


class SignInLimits:
    """Failed sign-ins counted per access key and per client address over the last
    FAILURE_WINDOW seconds. Past either bound a sign-in is refused without its secret being
    checked, even the right one, until the oldest failure counted leaves the window. A
    successful sign-in clears its key's count, not its address's (a guesser who also holds
    one user's keys does not get to guess on).

    In this process's memory: each worker counts its own, so the bound a client meets is the
    number of workers times these."""

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        window: float = FAILURE_WINDOW,
        per_key: int = FAILURES_PER_KEY,
        per_address: int = FAILURES_PER_ADDRESS,
    ) -> None:
        self._clock = clock
        self._window = window
        self._bounds = {"key": per_key, "address": per_address}
        # ("key" or "address", its value) -> times of its failures, oldest first.
        self._failures: dict[tuple[str, str], deque[float]] = {}

    def _recent(self, counter: tuple[str, str], now: float) -> deque[float]:
        times = self._failures.get(counter, deque())
        while times and times[0] <= now - self._window:
            times.popleft()
        if not times:
            self._failures.pop(counter, None)
        return times

    def refused(self, access_key: str, address: str | None) -> tuple[str, int] | None:
        """Whether a sign-in must wait: what is over its bound ("key" or "address") and the
        seconds until it no longer is; None if it may go ahead."""
        now = self._clock()
        worst: tuple[str, int] | None = None
        for counter in (("key", access_key), ("address", address or "")):
            times = self._recent(counter, now)
            bound = self._bounds[counter[0]]
            if len(times) >= bound:
                # Free again once enough of its failures have left the window.
                wait = math.ceil(times[len(times) - bound] + self._window - now)
                if worst is None or wait > worst[1]:
                    worst = (counter[0], max(1, wait))
        return worst

    def failed(self, access_key: str, address: str | None) -> None:
        now = self._clock()
        if len(self._failures) >= MAX_COUNTERS:
            self._forget(now)
        for counter in (("key", access_key), ("address", address or "")):
            times = self._recent(counter, now)
            times.append(now)
            self._failures[counter] = times

    def succeeded(self, access_key: str) -> None:
        self._failures.pop(("key", access_key), None)

    def _forget(self, now: float) -> None:
        for counter in list(self._failures):
            self._recent(counter, now)
        while len(self._failures) >= MAX_COUNTERS:
            del self._failures[next(iter(self._failures))]


def _fingerprint(user: User) -> str:
    return hashlib.sha256(b"s3gw-console:" + user.secret_key.encode()).hexdigest()
