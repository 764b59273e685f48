"""schemathesis against a live broker's ``/openapi.json``: no input may cause a server error.

Every operation of the schema gets a bounded number of generated requests, valid
(positive) and invalid (negative), checked with ``not_a_server_error``: no 5xx for
anything a client can send. Failures are collected over all operations (each one
shrunk by hypothesis to a minimal request) and reported together as curl commands.
Runs once: on PostgreSQL when ``HALFMQ_TEST_POSTGRES_URL`` is set (the stricter of the
two: its text columns refuse NUL, its integers are 32/64-bit), else on SQLite; the
database-specific cases are pinned on both in ``test_bad_input.py``. The broker runs
with a short ``max_fetch_wait_ms`` so generated long polls stay short; set
``HALFMQ_FUZZ_EXAMPLES`` for a deeper run (150 per operation and mode found nothing more).

(schemathesis' own pytest loader, ``schemathesis.pytest.from_fixture``, does not
work with pytest 9, hence the explicit loop over operations.)
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error

from tests.support.broker_process import BrokerProcess
from tests.support.databases import postgres_admin_url

pytestmark = pytest.mark.e2e

EXAMPLES = int(os.environ.get("HALFMQ_FUZZ_EXAMPLES", "8"))


@pytest.fixture()
def fuzzed_broker(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BrokerProcess]:
    if postgres_admin_url() is not None:
        database_url = request.getfixturevalue("postgres_databases").new()
    else:
        database_url = f"sqlite:///{tmp_path}/broker.db"
    process = BrokerProcess(
        database_url,
        log_path=tmp_path / "broker.log",
        max_fetch_wait_ms=200,
        check_interval_seconds=0.5,
    )
    process.start()
    with httpx.Client(base_url=process.url) as client:
        # Something for generated requests to find: a topic with data.
        client.post("/v1/topics", json={"name": "fuzz", "partitions": 2})
        client.post("/v1/topics/fuzz/messages", json={"messages": [{"key": "k", "value": {"a": 1}}]})
    try:
        yield process
    finally:
        process.stop()


def fuzz_operation(
    operation: schemathesis.APIOperation, mode: GenerationMode, session: requests.Session, base_url: str
) -> None:
    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=True,
        database=None,
        report_multiple_bugs=False,
    )
    def run(case: schemathesis.Case) -> None:
        case.call_and_validate(base_url=base_url, session=session, checks=[not_a_server_error], timeout=15)

    run()


def test_no_server_errors(fuzzed_broker: BrokerProcess) -> None:
    fuzz_everything(fuzzed_broker, token=None)


FUZZ_ADMIN = "fuzz-admin-token"


@pytest.fixture()
def fuzzed_secured_broker(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[BrokerProcess, str]]:
    """A broker with HALFMQ_AUTH=token, and the token of a principal with some rights (not the admin's,
    which would skip every rights rule)."""
    if postgres_admin_url() is not None:
        database_url = request.getfixturevalue("postgres_databases").new()
    else:
        database_url = f"sqlite:///{tmp_path}/secured.db"
    process = BrokerProcess(
        database_url,
        log_path=tmp_path / "secured.log",
        max_fetch_wait_ms=200,
        check_interval_seconds=0.5,
        auth="token",
        admin_token=FUZZ_ADMIN,
    )
    process.start()
    with httpx.Client(base_url=process.url, headers={"Authorization": f"Bearer {FUZZ_ADMIN}"}) as admin:
        admin.post("/v1/topics", json={"name": "fuzz", "partitions": 2})
        admin.post("/v1/topics/fuzz/messages", json={"messages": [{"key": "k", "value": {"a": 1}}]})
        admin.post("/v1/principals", json={"name": "fuzzer"})
        token = admin.post("/v1/principals/fuzzer/tokens").json()["token"]
        for resource_type, pattern in (
            ("topic", "fuzz"),
            ("group", "*"),
            ("producer_group", "*"),
            ("transactional_id", "f"),
        ):
            acl = {
                "principal": "fuzzer",
                "resource_type": resource_type,
                "pattern": pattern,
                "pattern_type": "prefixed" if pattern == "f" else "literal",
                "operations": ["read", "write", "describe"],
            }
            admin.post("/v1/acls", json=acl)
    try:
        yield process, token
    finally:
        process.stop()


def test_no_server_errors_with_a_token(fuzzed_secured_broker: tuple[BrokerProcess, str]) -> None:
    """The rights rules read paths and bodies before validation: no input may make them fail with a 5xx."""
    process, token = fuzzed_secured_broker
    fuzz_everything(process, token=token)


def fuzz_everything(broker: BrokerProcess, token: str | None) -> None:
    fuzzed_broker = broker
    schema = schemathesis.openapi.from_url(f"{fuzzed_broker.url}/openapi.json")
    failures: list[str] = []
    fuzzed = 0
    with requests.Session() as session:
        if token is not None:
            session.headers["Authorization"] = f"Bearer {token}"
        for result in schema.get_all_operations():
            operation = result.ok()
            for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
                fuzzed += 1
                try:
                    fuzz_operation(operation, mode, session, fuzzed_broker.url)
                except Unsatisfiable:
                    pass  # no invalid request exists for an operation without parameters
                except Exception as error:  # noqa: BLE001 - collect every operation's failure
                    failures.append(f"--- {operation.label} ({mode.value}):\n{error}")
    assert fuzzed >= 30, f"only {fuzzed} operation/mode pairs fuzzed"
    assert not failures, "\n".join(failures) + "\nbroker log:\n" + fuzzed_broker.log_tail(3000)
