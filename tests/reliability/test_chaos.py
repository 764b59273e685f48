"""Chaos: a real broker under mixed load, SIGKILLed and restarted again and again.

Nothing committed is lost or duplicated, nothing rolled back or aborted is ever
visible to ``read_committed``, no half message is left unresolved, and group
offsets end where their producers committed them, never ahead of the data (see
:mod:`tests.reliability.chaos` for the workload and the checks).

The short run (3 kills) is part of the suite; the long one (``HALFMQ_CHAOS_KILLS``,
default 20) runs with ``-m slow`` or ``HALFMQ_CHAOS_LONG=1`` and prints its figures.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest

from tests.reliability.chaos import CHAOS_SETTINGS, run_chaos
from tests.support.broker_process import BrokerProcess
from tests.support.databases import PostgresDatabases

pytestmark = pytest.mark.e2e


def _fail_with(report_failures: list[str], figures: str, broker: BrokerProcess) -> None:
    shown = "\n".join(report_failures[:60])
    more = f"\n... and {len(report_failures) - 60} more" if len(report_failures) > 60 else ""
    pytest.fail(f"{len(report_failures)} failures\n{shown}{more}\n{figures}\nbroker log tail:\n{broker.log_tail(3000)}")


@pytest.mark.timeout(240)
def test_chaos_short(rel_database_url: str, start_broker: Callable[..., BrokerProcess]) -> None:
    broker = start_broker(rel_database_url, **CHAOS_SETTINGS)
    report = run_chaos(broker, kills=3, workers=4, uptime=(1.0, 2.5), seed=7)
    print(report.figures())
    if report.failures:
        _fail_with(report.failures, report.figures(), broker)
    assert report.kills == 3
    assert report.outcomes["operations"] >= 100, report.figures()


def _long_enabled(config: pytest.Config) -> bool:
    return bool(os.environ.get("HALFMQ_CHAOS_LONG")) or "slow" in (config.getoption("-m") or "")


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_chaos_long(
    rel_database_url: str, start_broker: Callable[..., BrokerProcess], request: pytest.FixtureRequest
) -> None:
    if not _long_enabled(request.config):
        pytest.skip("the long chaos run needs -m slow or HALFMQ_CHAOS_LONG=1")
    kills = int(os.environ.get("HALFMQ_CHAOS_KILLS", "20"))
    broker = start_broker(rel_database_url, **CHAOS_SETTINGS)
    report = run_chaos(broker, kills=kills, workers=4, uptime=(2.0, 5.0), seed=int(os.environ.get("HALFMQ_CHAOS_SEED", "1")))
    with request.config.pluginmanager.get_plugin("capturemanager").global_and_fixture_disabled():  # type: ignore[union-attr]
        print(f"\nchaos long run on {rel_database_url.split(':', 1)[0]}:\n{report.figures()}")
    if report.failures:
        _fail_with(report.failures, report.figures(), broker)
    assert report.kills >= 20 or kills < 20


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_chaos_two_brokers_on_postgresql(
    postgres_databases: PostgresDatabases, start_broker: Callable[..., BrokerProcess], request: pytest.FixtureRequest
) -> None:
    """The same workload through two broker processes on one PostgreSQL, killed in turn.

    Clients go to the other process while theirs is down (as behind a load balancer),
    so UNKNOWN outcomes are resolved by the survivor while the killed one restarts,
    and the checker lease moves between them.
    """
    if not _long_enabled(request.config):
        pytest.skip("the long chaos run needs -m slow or HALFMQ_CHAOS_LONG=1")
    kills = int(os.environ.get("HALFMQ_CHAOS_KILLS", "20"))
    url = postgres_databases.new()
    brokers = [start_broker(url, **CHAOS_SETTINGS) for _ in range(2)]
    report = run_chaos(brokers, kills=kills, workers=4, uptime=(2.0, 5.0), seed=int(os.environ.get("HALFMQ_CHAOS_SEED", "2")))
    with request.config.pluginmanager.get_plugin("capturemanager").global_and_fixture_disabled():  # type: ignore[union-attr]
        print(f"\nchaos long run, two brokers on postgresql:\n{report.figures()}")
    if report.failures:
        _fail_with(report.failures, report.figures(), brokers[0])
