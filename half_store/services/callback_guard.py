"""Where back-check callbacks may go: a guard against server-side request forgery.

A listener's callback URL makes the broker send requests from inside its network, so
the URL is checked when it is registered and again at every call:

- the scheme is http or https;
- every address its host resolves to lies in ``HALFMQ_CALLBACK_ALLOWED_NETWORKS``
  (default: loopback and the private ranges), and none is link-local (169.254.0.0/16,
  where cloud metadata services answer, fe80::/10), unspecified (0.0.0.0, ::),
  multicast or reserved, whatever the setting says;
- at call time the name is resolved again and the connection goes to the address that
  was checked (see :mod:`checker.guarded_http`), so a name that resolves elsewhere later
  (DNS rebinding) is refused, not followed.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Iterable
from urllib.parse import urlsplit

from half_store.domain.errors import CallbackNotAllowed

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
ALLOWED_SCHEMES = ("http", "https")


def never_allowed(address: IpAddress) -> bool:
    """Addresses no setting can open: link-local (metadata services), unspecified, multicast, reserved."""
    return (
        address.is_link_local
        or address.is_unspecified
        or address.is_multicast
        or (address.is_reserved and not address.is_loopback)  # ::/8 is reserved, ::1 in it is not refused
        or (isinstance(address, ipaddress.IPv4Address) and address == ipaddress.IPv4Address("255.255.255.255"))
    )


def _plain(address: IpAddress) -> IpAddress:
    """An IPv4-mapped IPv6 address (::ffff:169.254.169.254) is judged as the IPv4 address it is."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


class CallbackGuard:
    def __init__(self, allowed: Iterable[IpNetwork]) -> None:
        self.allowed = tuple(allowed)

    def address_allowed(self, address: IpAddress) -> bool:
        plain = _plain(address)
        if never_allowed(plain):
            return False
        return any(plain.version == network.version and plain in network for network in self.allowed)

    async def resolve(self, host: str, port: int) -> list[str]:
        """Every address ``host`` resolves to, each one allowed; else :class:`CallbackNotAllowed`."""
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (socket.gaierror, UnicodeError) as error:
            raise CallbackNotAllowed(f"callback host {host!r} does not resolve: {error}") from error
        addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
        if not addresses:
            raise CallbackNotAllowed(f"callback host {host!r} resolves to no address")
        refused = [a for a in addresses if not self.address_allowed(ipaddress.ip_address(a.split("%", 1)[0]))]
        if refused:
            raise CallbackNotAllowed(
                f"callback host {host!r} resolves to {', '.join(refused)}, outside HALFMQ_CALLBACK_ALLOWED_NETWORKS"
                " (link-local, unspecified and multicast addresses are never allowed)"
            )
        return addresses

    async def check_url(self, url: str) -> None:
        """Refuse a callback URL with another scheme, or a host that resolves outside the allowed networks."""
        try:
            parts = urlsplit(url)
        except ValueError as error:  # e.g. an unclosed IPv6 bracket
            raise CallbackNotAllowed(f"the callback URL cannot be parsed: {error}") from error
        if parts.scheme.lower() not in ALLOWED_SCHEMES:
            raise CallbackNotAllowed(f"callback URLs must be http or https, not {parts.scheme!r}")
        if not parts.hostname:
            raise CallbackNotAllowed("the callback URL has no host")
        try:
            port = parts.port or (443 if parts.scheme.lower() == "https" else 80)
        except ValueError as error:
            raise CallbackNotAllowed(f"the callback URL's port is invalid: {error}") from error
        await self.resolve(parts.hostname, port)
