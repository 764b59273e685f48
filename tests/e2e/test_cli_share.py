"""``halfmq share describe`` against a real broker process."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from app.cli import cli
from sdk import Client, Producer, ShareConsumer
from tests.e2e.sdk_fixtures import admin, broker, unique  # noqa: F401
from tests.support.broker_process import BrokerProcess

pytestmark = pytest.mark.e2e


def test_share_describe(broker: BrokerProcess, admin: Client) -> None:
    topic, group = unique("t"), unique("g")
    admin.create_topic(topic, 2)
    with Producer(broker.url) as producer:
        for n in range(5):
            producer.send(topic, n, partition=n % 2)
    with ShareConsumer(broker.url, group, topic, auto_extend=False) as consumer:
        first, second, *held = consumer.receive(max_messages=5)
        consumer.ack(first)
        consumer.reject(second)
        runner = CliRunner()
        as_json = runner.invoke(cli, ["share", "describe", group, "--url", broker.url, "--json"])
        assert as_json.exit_code == 0, as_json.output
        [summary] = json.loads(as_json.output)["topics"]
        assert (summary["topic"], summary["available"], summary["locked"], summary["accepted"], summary["dlq"]) == (
            topic, 0, 3, 1, 1,
        )
        table = runner.invoke(cli, ["share", "describe", group, "--url", broker.url])
        assert table.exit_code == 0 and topic in table.output and "locked" in table.output
        listed = runner.invoke(cli, ["share", "list", "--url", broker.url, "--json"])
        mine = {"group": group, "topics": [topic], "locked": 3, "accepted": 1, "dlq": 1}
        assert mine in json.loads(listed.output)["share_groups"]
        in_use = runner.invoke(cli, ["share", "delete", group, "--yes", "--url", broker.url])
        assert in_use.exit_code == 4 and "SHARE_GROUP_IN_USE" in in_use.output  # three are locked
        consumer.ack(held)
    unconfirmed = runner.invoke(cli, ["share", "delete", group, "--url", broker.url])
    assert unconfirmed.exit_code == 2 and "--yes" in unconfirmed.output
    deleted = runner.invoke(cli, ["share", "delete", group, "--yes", "--url", broker.url])
    assert deleted.exit_code == 0, deleted.output
    listed = runner.invoke(cli, ["share", "list", "--url", broker.url, "--json"])
    assert group not in [g["group"] for g in json.loads(listed.output)["share_groups"]]
    gone = runner.invoke(cli, ["share", "delete", group, "--yes", "--url", broker.url])
    assert gone.exit_code == 3 and "SHARE_GROUP_NOT_FOUND" in gone.output
    missing = runner.invoke(cli, ["share", "describe", unique("nobody"), "--url", broker.url])
    assert missing.exit_code == 3 and "SHARE_GROUP_NOT_FOUND" in missing.output
