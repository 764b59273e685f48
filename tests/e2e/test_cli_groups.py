"""``halfmq groups list|describe|reset-offsets`` against a real broker."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from typer.testing import CliRunner

from app.cli import cli
from app.cli.remote import EXIT_CONFLICT, EXIT_NOT_FOUND, EXIT_REFUSED
from sdk import Client, Consumer
from tests.support.broker_process import BrokerProcess

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    path = tmp_path_factory.mktemp("cli-groups")
    process = BrokerProcess(f"sqlite:///{path}/broker.db", log_path=path / "broker.log").start()
    with httpx.Client(base_url=process.url) as http:
        assert http.post("/v1/topics", json={"name": "orders", "partitions": 2}).status_code == 201
        messages = [{"value": i, "partition": i % 2} for i in range(10)]
        assert http.post("/v1/topics/orders/messages", json={"messages": messages}).status_code == 200
        offsets = [{"topic": "orders", "partition": p, "offset": 3} for p in range(2)]
        assert http.post("/v1/groups/billing/offsets", json={"offsets": offsets}).status_code == 200
    yield process
    process.stop()


def halfmq(broker: BrokerProcess, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, [*args, "--url", broker.url])
    return result.exit_code, result.output


def test_list_and_describe(broker: BrokerProcess) -> None:
    code, output = halfmq(broker, "groups", "list", "--json")
    # 5 messages in each of 2 partitions, 3 read in each: 4 to go.
    assert code == 0 and {"group": "billing", "state": "EMPTY", "members": 0, "lag": 4} in json.loads(output)["groups"]
    code, output = halfmq(broker, "groups", "list")
    (row,) = [line.strip("│ ").split("│") for line in output.splitlines() if "billing" in line]
    assert code == 0 and "lag" in output and row[-1].strip() == "4"
    code, output = halfmq(broker, "groups", "describe", "billing")
    assert code == 0 and "billing: EMPTY" in output and "orders" in output
    code, output = halfmq(broker, "groups", "describe", "nobody")
    assert code == EXIT_NOT_FOUND and "GROUP_NOT_FOUND" in output


def test_reset_offsets(broker: BrokerProcess) -> None:
    code, output = halfmq(broker, "groups", "reset-offsets", "billing", "--topic", "orders", "--to-latest", "--json")
    assert code == 0 and [o["offset"] for o in json.loads(output)["offsets"]] == [5, 5]
    code, _ = halfmq(broker, "groups", "reset-offsets", "billing", "--topic", "orders", "--to-offset", "99",
                     "--partition", "1")
    assert code == 0  # kept within the partition's range
    code, _ = halfmq(broker, "groups", "reset-offsets", "billing", "--topic", "orders", "--to-earliest",
                     "--partition", "0")
    assert code == 0
    committed = httpx.get(f"{broker.url}/v1/groups/billing/offsets").json()["offsets"]
    assert [(o["partition"], o["offset"]) for o in committed] == [(0, 0), (1, 5)]
    code, output = halfmq(broker, "groups", "reset-offsets", "billing", "--topic", "orders")
    assert code == EXIT_REFUSED and "exactly one of" in output
    code, output = halfmq(broker, "groups", "reset-offsets", "billing", "--topic", "orders", "--to-latest",
                          "--partition", "7")
    assert code == EXIT_REFUSED and "partitions [0, 1]" in output


def test_reset_offsets_is_refused_while_the_group_has_members(broker: BrokerProcess) -> None:
    with httpx.Client(base_url=broker.url) as http:
        member = http.post("/v1/groups/live/members", json={"topics": ["orders"]}).json()
        try:
            code, output = halfmq(broker, "groups", "reset-offsets", "live", "--topic", "orders", "--to-earliest")
            assert code == EXIT_CONFLICT and "1 live member" in output
            code, output = halfmq(broker, "groups", "describe", "live", "--json")
            assert json.loads(output)["members"][0]["member_id"] == member["member_id"]
        finally:
            http.delete(f"/v1/groups/live/members/{member['member_id']}")
        code, _ = halfmq(broker, "groups", "reset-offsets", "live", "--topic", "orders", "--to-earliest")
        assert code == 0  # empty again


def test_seek_and_reset_by_time(broker: BrokerProcess) -> None:
    """Kafka's offsets-for-times, over the CLI (consume --from-time, reset-offsets --to-datetime) and the SDK."""
    stamped = [{"value": n, "partition": 0, "timestamp": t} for n, t in enumerate((1_000, 2_000, 3_000))]
    with httpx.Client(base_url=broker.url) as http:
        assert http.post("/v1/topics", json={"name": "timed", "partitions": 2}).status_code == 201
        assert http.post("/v1/topics/timed/messages", json={"messages": stamped}).status_code == 200
    code, output = halfmq(broker, "consume", "timed", "--from-time", "1500", "--count", "2", "--json")
    assert code == 0 and [json.loads(line)["value"] for line in output.splitlines() if line.startswith("{")] == [1, 2]
    code, output = halfmq(broker, "groups", "reset-offsets", "by-time", "--topic", "timed", "--to-datetime", "1500", "--json")
    assert code == 0 and [(o["partition"], o["offset"]) for o in json.loads(output)["offsets"]] == [(0, 1), (1, 0)]
    code, output = halfmq(broker, "consume", "timed", "--from-time", "yesterday-ish")
    assert code == 2 and "is not a time" in output

    with Client(broker.url) as client:
        assert client.offsets_for_time("timed", 2_500) == {0: 2, 1: 0}
    with Consumer(broker.url, "sdk-by-time", ["timed"]) as consumer:
        consumer.seek_to_time(1_500)
        got: list[int] = []
        while len(got) < 2:
            got += [m.value for m in consumer.poll(timeout=1.0)]
        assert got == [1, 2]
