"""Where a topic's endpoint may go: --notify-networks (S3GW_NOTIFY_NETWORKS), CIDRs the addresses
an endpoint resolves to must all fall in. A push-endpoint is a request the gateway makes on a
tenant's behalf; unbounded, a tenant could make it reach the cloud's metadata service or the
operator's own back end. The default allows every address except link-local ones
(169.254.0.0/16, fe80::/10: where metadata services answer), so a laptop's compose services
work; docs/security.md says how a multi-tenant operator narrows it.

Checked at CreateTopic and again at each connection (webhook.py's resolver), since what a
name resolves to can change between the two."""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address

LINK_LOCAL: tuple[Network, ...] = (
    ipaddress.ip_network("169.254.0.0/16"),
    ipaddress.ip_network("fe80::/10"),
)


class OutsideNetworks(Exception):
    """An endpoint resolved to an address --notify-networks does not allow."""

    def __init__(self, host: str, address: str) -> None:
        super().__init__(f"{host} resolves to {address}, outside --notify-networks")
        self.host = host
        self.address = address


@dataclass(frozen=True)
class Networks:
    """The allowed networks; `allowed` empty: the default (all but link-local)."""

    allowed: tuple[Network, ...] = ()

    def allows(self, address: str) -> bool:
        return _allows(self.allowed, address)

    def check(self, host: str, addresses: Iterable[str]) -> None:
        for address in addresses:
            if not self.allows(address):
                raise OutsideNetworks(host, address)


@functools.lru_cache(maxsize=4096)
def _allows(allowed: tuple[Network, ...], address: str) -> bool:
    """Networks.allows, judged once per address (each delivery asks again)."""
    try:
        ip: Address = ipaddress.ip_address(address.split("%", 1)[0])  # a zone id: fe80::1%eth0
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped  # ::ffff:169.254.169.254 is 169.254.169.254
    if not allowed:
        return not any(ip in net for net in LINK_LOCAL)
    return any(ip.version == net.version and ip in net for net in allowed)


def parse_cidrs(text: str) -> tuple[Network, ...]:
    """`10.0.0.0/8, 192.168.1.5` -> networks (a bare address is its /32 or /128); ValueError
    names the first that is none."""
    found = []
    for part in text.replace(",", " ").split():
        try:
            found.append(ipaddress.ip_network(part, strict=False))
        except ValueError:
            raise ValueError(f"{part!r} is not a CIDR") from None
    return tuple(found)


@functools.lru_cache(maxsize=16)
def networks(cidrs: tuple[str, ...]) -> Networks:
    """The bound the settings give (their CIDRs as text, checked at start-up)."""
    return Networks(parse_cidrs(" ".join(cidrs)))


@functools.lru_cache(maxsize=1024)
def literal(host: str) -> str | None:
    """`host` itself when it is an address (no resolution happens for it), else None."""
    try:
        return str(ipaddress.ip_address(host.strip("[]").split("%", 1)[0]))
    except ValueError:
        return None


async def resolve(host: str, port: int) -> list[str]:
    """Every address `host` resolves to (OSError when it does not)."""
    if (address := literal(host)) is not None:
        return [address]
    infos = await asyncio.get_running_loop().getaddrinfo(
        host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
    )
    return [str(info[4][0]) for info in infos]


async def check_host(bound: Networks, host: str, port: int) -> None:
    """Before a broker connection: every address `host` resolves to inside the bound
    (OutsideNetworks if one is not, OSError if it does not resolve). The broker senders check
    each connection they open with it, as the webhook's resolver does for each of its own."""
    bound.check(host, await resolve(host, port))
