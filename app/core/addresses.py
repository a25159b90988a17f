"""Which IP addresses outbound HTTP may reach: the one address policy shared by the
`http_request` tool and webhook deliveries. By default only public addresses; private,
loopback, link-local (cloud metadata) and other special ranges are refused unless the
operator allows them all (`allow_private`) or names exact ranges (`allowed_networks`).

An address that carries an IPv4 address inside it (IPv4-mapped, NAT64, 6to4) is judged by
the IPv4 address it reaches. Resolving names is the caller's part: it must check every
address a name resolves to and connect only to an address it checked.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import Protocol

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

_RULES = tuple(
    (ipaddress.ip_network(cidr), reason)
    for cidr, reason in (
        ("0.0.0.0/8", "unspecified address"),
        ("127.0.0.0/8", "loopback address"),
        ("10.0.0.0/8", "private address"),
        ("172.16.0.0/12", "private address"),
        ("192.168.0.0/16", "private address"),
        ("169.254.0.0/16", "link-local address"),  # includes 169.254.169.254, cloud metadata
        ("100.64.0.0/10", "carrier-grade NAT address"),
        ("224.0.0.0/4", "multicast address"),
        ("240.0.0.0/4", "reserved address"),
        ("::/128", "unspecified address"),
        ("::1/128", "loopback address"),
        ("2001::/32", "Teredo address"),  # the IPv4 inside is obfuscated and relay-dependent
        ("64:ff9b:1::/48", "local-use NAT64 address"),  # RFC 8215: where the IPv4 sits is local
        ("fc00::/7", "private address"),
        ("fe80::/10", "link-local address"),
        ("fec0::/10", "site-local address"),
        ("ff00::/8", "multicast address"),
        ("::/8", "reserved address"),  # IPv4-compatible ::a.b.c.d and the rest of ::/8
    )
)
# Packets to these end up at the IPv4 address inside them, so that address is judged instead.
_EMBEDDING = (
    (ipaddress.IPv6Network("::ffff:0:0/96"), "IPv4-mapped", 0),
    (ipaddress.IPv6Network("64:ff9b::/96"), "NAT64", 0),
    (ipaddress.IPv6Network("2002::/16"), "6to4", 80),
)


class AddressPolicy(Protocol):
    """What a caller's policy says about private addresses."""

    @property
    def allow_private(self) -> bool: ...

    @property
    def networks(self) -> tuple[IPNetwork, ...]: ...


def parse_networks(cidrs: Iterable[str]) -> tuple[IPNetwork, ...]:
    """CIDR strings as networks; ValueError naming the first bad one."""
    if isinstance(cidrs, str):  # a bare string would be read char by char
        raise ValueError("allowed_networks must be a list of CIDR strings")
    try:
        return tuple(ipaddress.ip_network(cidr) for cidr in cidrs)
    except ValueError as exc:
        raise ValueError(f"allowed_networks: {exc}") from None


def refusal_reason(address: IPAddress, policy: AddressPolicy) -> str | None:
    """Why a request must not connect to `address`, or None when it may. `networks` (the
    allowed ones) match the address as resolved, never an IPv4 address embedded in it."""
    if policy.allow_private or any(address in network for network in policy.networks):
        return None
    return classify(address)


def classify(address: IPAddress) -> str | None:
    """What kind of non-public address this is (`loopback address`, …), None if public."""
    for prefix, label, shift in _EMBEDDING:
        if address in prefix:
            inner = ipaddress.IPv4Address((int(address) >> shift) & 0xFFFF_FFFF)
            reason = classify(inner)
            return f"{reason} ({label} {inner})" if reason else None
    for network, reason in _RULES:  # embedded forms first: ::ffff:0:0/96 lies inside ::/8
        if address in network:
            return reason
    # Documentation, benchmarking and other special-purpose ranges the table does not name.
    return None if address.is_global else "non-public address"


def literal(host: str) -> IPAddress | None:
    """The address a URL's host names when it is an IP literal; None for a name."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None
