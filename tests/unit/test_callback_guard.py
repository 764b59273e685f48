"""Which addresses a back-check callback may reach: the allowlist, and what no setting can open."""

from __future__ import annotations

import asyncio
import ipaddress

import pytest

from half_store.domain.errors import CallbackNotAllowed
from half_store.services.callback_guard import CallbackGuard
from half_store.settings import Settings

DEFAULT = CallbackGuard(Settings().callback_networks)
EVERYTHING = CallbackGuard([ipaddress.ip_network("0.0.0.0/0"), ipaddress.ip_network("::/0")])


@pytest.mark.parametrize(
    ("address", "allowed"),
    [
        ("127.0.0.1", True),
        ("::1", True),
        ("10.1.2.3", True),
        ("172.16.0.9", True),
        ("192.168.1.1", True),
        ("fd00::5", True),
        ("8.8.8.8", False),  # public: not in the default list
        ("169.254.169.254", False),  # cloud metadata
        ("fe80::1", False),
        ("0.0.0.0", False),
        ("::", False),
        ("::ffff:169.254.169.254", False),  # the metadata address, IPv4-mapped
        ("::ffff:127.0.0.1", True),
        ("224.0.0.1", False),
    ],
)
def test_the_default_networks(address: str, allowed: bool) -> None:
    assert DEFAULT.address_allowed(ipaddress.ip_address(address)) is allowed


@pytest.mark.parametrize("address", ["169.254.169.254", "0.0.0.0", "fe80::1", "::", "255.255.255.255", "240.0.0.1"])
def test_no_setting_opens_link_local_unspecified_or_reserved_addresses(address: str) -> None:
    assert not EVERYTHING.address_allowed(ipaddress.ip_address(address))


@pytest.mark.parametrize(
    "url",
    [
        "ftp://127.0.0.1/x",
        "file:///etc/passwd",
        "http://169.254.169.254/latest/meta-data/",
        "http://0.0.0.0:8080/",
        "http://[fe80::1]/",
        "http://[::ffff:169.254.169.254]/",
        "http://no-such-host.invalid/",
        "http://127.0.0.1:notaport/",
    ],
)
def test_urls_refused_at_registration(url: str) -> None:
    with pytest.raises(CallbackNotAllowed):
        asyncio.run(DEFAULT.check_url(url))


def test_a_name_is_judged_by_every_address_it_resolves_to() -> None:
    asyncio.run(DEFAULT.check_url("http://localhost:8080/check"))
    only_private = CallbackGuard([ipaddress.ip_network("10.0.0.0/8")])
    with pytest.raises(CallbackNotAllowed, match=r"127\.0\.0\.1|::1"):
        asyncio.run(only_private.check_url("http://localhost:8080/check"))
