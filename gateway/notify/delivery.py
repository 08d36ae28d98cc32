"""What every sender is: one small protocol (send a message to a topic's endpoint, get back a
Delivery; close its connections), so that the worker and the test event pick a sender by the
endpoint's scheme (targets.py) rather than by a chain of ifs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from .topics import Topic


@dataclass(frozen=True)
class Delivery:
    """How one message ended: acknowledged (a 2xx, a broker's ack or reply), else why not. The
    reason never carries the endpoint (it may hold a password or a token)."""

    acknowledged: bool
    reason: str = ""


class Sender(Protocol):
    """A sender keeps its connections across deliveries and closes them in close()."""

    async def send(self, topic: Topic, body: bytes) -> Delivery: ...

    async def close(self) -> None: ...
