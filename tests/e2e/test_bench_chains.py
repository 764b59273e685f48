"""The benchmark's load generator against a real broker: every chain runs without errors.

The benchmark measures nothing if a chain fails against the API it drives (a field the
broker stopped answering with, say); this keeps them in step. Rates are not looked at.
"""

from __future__ import annotations

import httpx
import pytest

from bench import loadgen, payloads, scenarios
from tests.support.broker_process import BrokerProcess
from tests.support.databases import SqliteDatabases

pytestmark = pytest.mark.e2e


def test_every_chain_of_the_load_generator_runs_cleanly_against_the_broker(sqlite_databases: SqliteDatabases) -> None:
    with BrokerProcess(sqlite_databases.new()) as broker:
        scenarios.create_topic(broker.url)
        for chain in loadgen.CHAINS:
            result = loadgen.run(broker.url, chain, concurrency=2, duration=0.3, processes=1)
            assert result.errors == 0, (chain, result.error_samples)
            assert result.ops > 0, chain
        partitions = httpx.get(f"{broker.url}/v1/topics/{payloads.TOPIC}").json()["partitions"]
    # Every mode-2 chain committed what it began: nothing holds a partition's last stable offset back.
    assert all(p["last_stable_offset"] == p["high_watermark"] > 0 for p in partitions)
