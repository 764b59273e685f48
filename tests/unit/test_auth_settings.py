"""Settings that must stop a broker from starting, and the warning for an open broker on a public address."""

from __future__ import annotations

import logging

import pytest
from pydantic import ValidationError

from app.main import warn_if_open
from half_store.settings import Settings


def test_token_mode_needs_an_admin_token() -> None:
    assert "HALFMQ_ADMIN_TOKEN" in (Settings(auth="token").startup_problem() or "")
    assert Settings(auth="token", admin_token="x").startup_problem() is None  # type: ignore[arg-type]
    assert Settings().startup_problem() is None


def test_tls_needs_both_files() -> None:
    assert "HALFMQ_SSL_KEYFILE" in (Settings(ssl_certfile="cert.pem").startup_problem() or "")


def test_callback_networks_must_parse() -> None:
    with pytest.raises(ValidationError):
        Settings(callback_allowed_networks="10.0.0.0/8,not-a-network")
    assert [str(n) for n in Settings(callback_allowed_networks=" 10.0.0.0/8 , ::1/128").callback_networks] == [
        "10.0.0.0/8",
        "::1/128",
    ]


@pytest.mark.parametrize(
    ("host", "auth", "warned"),
    [
        ("0.0.0.0", "none", True),
        ("10.1.2.3", "none", True),
        ("broker.internal", "none", True),
        ("127.0.0.1", "none", False),
        ("::1", "none", False),
        ("localhost", "none", False),
        ("0.0.0.0", "token", False),
    ],
)
def test_an_open_broker_on_a_public_address_warns(
    host: str, auth: str, warned: bool, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="app.main"):
        warn_if_open(Settings(host=host, auth=auth, admin_token="x"))  # type: ignore[arg-type]
    assert any("HALFMQ_AUTH=none" in r.getMessage() for r in caplog.records) is warned
