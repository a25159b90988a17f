"""The http_request tool's address check and policy validation, from tables (no network)."""

from __future__ import annotations

from ipaddress import ip_address

import pytest

from app.core.addresses import refusal_reason
from app.runs.tools.http_request import HttpToolPolicy

DEFAULT = HttpToolPolicy()

REFUSED = [
    ("127.0.0.1", "loopback address"),
    ("127.1.2.3", "loopback address"),
    ("10.0.0.1", "private address"),
    ("172.16.5.4", "private address"),
    ("192.168.1.1", "private address"),
    ("169.254.169.254", "link-local address"),
    ("100.64.0.1", "carrier-grade NAT address"),
    ("0.0.0.0", "unspecified address"),
    ("224.0.0.1", "multicast address"),
    ("255.255.255.255", "reserved address"),
    ("192.0.2.1", "non-public address"),  # documentation range, caught by is_global
    ("::1", "loopback address"),
    ("::", "unspecified address"),
    ("fe80::1", "link-local address"),
    ("fc00::1", "private address"),
    ("fd12:3456::1", "private address"),
    ("ff02::1", "multicast address"),
    ("::7f00:1", "reserved address"),  # IPv4-compatible ::127.0.0.1
    ("2001::1", "Teredo address"),
    ("64:ff9b:1::a00:1", "local-use NAT64 address"),
    ("2001:db8::1", "non-public address"),
    ("::ffff:127.0.0.1", "loopback address (IPv4-mapped 127.0.0.1)"),
    ("::ffff:10.0.0.1", "private address (IPv4-mapped 10.0.0.1)"),
    ("::ffff:169.254.169.254", "link-local address (IPv4-mapped 169.254.169.254)"),
    ("64:ff9b::7f00:1", "loopback address (NAT64 127.0.0.1)"),
    ("64:ff9b::a00:1", "private address (NAT64 10.0.0.1)"),
    ("2002:7f00:1::1", "loopback address (6to4 127.0.0.1)"),
    ("2002:a9fe:a9fe::1", "link-local address (6to4 169.254.169.254)"),
]

ALLOWED = [
    "93.184.216.34",
    "1.1.1.1",
    "2606:4700::1111",
    "64:ff9b::5db8:d822",  # NAT64 of 93.184.216.34
    "::ffff:93.184.216.34",
    "2002:5db8:d822::1",  # 6to4 of 93.184.216.34
]


@pytest.mark.parametrize(("address", "reason"), REFUSED)
def test_refused_by_default(address: str, reason: str) -> None:
    assert refusal_reason(ip_address(address), DEFAULT) == reason


@pytest.mark.parametrize("address", ALLOWED)
def test_public_addresses_allowed(address: str) -> None:
    assert refusal_reason(ip_address(address), DEFAULT) is None


@pytest.mark.parametrize(
    "policy",
    [
        HttpToolPolicy(allowed_networks=("127.0.0.0/8",)),
        HttpToolPolicy(allowed_networks=("10.0.0.0/8", "127.0.0.1/32")),
        HttpToolPolicy(allow_private=True),
    ],
)
def test_loopback_allowed_when_the_policy_opens_it(policy: HttpToolPolicy) -> None:
    assert refusal_reason(ip_address("127.0.0.1"), policy) is None


def test_allowed_networks_open_only_what_they_name() -> None:
    policy = HttpToolPolicy(allowed_networks=("127.0.0.1/32",))
    assert refusal_reason(ip_address("127.0.0.2"), policy) == "loopback address"
    assert refusal_reason(ip_address("::1"), policy) == "loopback address"
    assert refusal_reason(ip_address("169.254.169.254"), policy) == "link-local address"
    # The address as resolved is what is matched, never an IPv4 address embedded in it.
    assert refusal_reason(ip_address("::ffff:127.0.0.1"), policy) is not None


def test_allow_private_opens_everything() -> None:
    policy = HttpToolPolicy(allow_private=True)
    for address, _ in REFUSED:
        assert refusal_reason(ip_address(address), policy) is None


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"timeout_s": 0}, "timeout_s"),
        ({"timeout_s": float("nan")}, "timeout_s"),
        ({"max_response_bytes": 0}, "max_response_bytes"),
        ({"max_redirects": -1}, "max_redirects"),
        ({"allowed_schemes": ("http", "ftp")}, "allowed_schemes"),
        ({"allowed_schemes": ()}, "allowed_schemes"),
        # Host bits set: probably not what was meant.
        ({"allowed_networks": ("127.0.0.1/8",)}, "allowed_networks"),
        ({"allowed_networks": ("localhost",)}, "allowed_networks"),
        ({"allowed_networks": "127.0.0.1/32"}, "allowed_networks"),  # a string, not a tuple
    ],
)
def test_policy_rejects_unsafe_or_malformed_values(options: dict[str, object], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        HttpToolPolicy(**options)  # type: ignore[arg-type]


def test_policy_defaults() -> None:
    assert DEFAULT.allow_private is False
    assert DEFAULT.allowed_networks == ()
    assert DEFAULT.allowed_schemes == ("http", "https")
    assert (DEFAULT.timeout_s, DEFAULT.max_response_bytes, DEFAULT.max_redirects) == (
        10.0,
        1_000_000,
        5,
    )
