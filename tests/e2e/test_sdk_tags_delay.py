"""The SDK's tags and delay messages against a real broker process."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from sdk import Client, Consumer, Producer, ShareConsumer
from tests.e2e.sdk_fixtures import admin, broker, new_topic, unique  # noqa: F401
from tests.support.broker_process import BrokerProcess

pytestmark = pytest.mark.e2e


@pytest.fixture()
def tagged_topic(new_topic: Callable[..., str], broker: BrokerProcess) -> str:
    topic = new_topic(partitions=1)
    with Producer(broker.url) as producer:
        for value, tag in (("a", "TagA"), ("b", "TagB"), ("none", None)):
            producer.send(topic, value, tag=tag)
    return topic


def test_a_consumer_with_a_tag_filter_reads_only_matching_messages(broker: BrokerProcess, tagged_topic: str) -> None:
    with Consumer(broker.url, unique("g"), [tagged_topic], tag="TagA || TagB") as consumer:
        got: list[object] = []
        deadline = time.monotonic() + 10
        while len(got) < 2 and time.monotonic() < deadline:
            got += [m.value for m in consumer.poll(timeout=0.5)]
    assert got == ["a", "b"]


def test_a_share_consumer_with_a_tag_filter_receives_only_matching_messages(
    broker: BrokerProcess, tagged_topic: str
) -> None:
    with ShareConsumer(broker.url, unique("g"), tagged_topic, tag="TagB") as consumer:
        messages = consumer.receive(timeout=2)
        consumer.ack(messages)
    assert [m.value for m in messages] == ["b"] and messages[0].headers == {"rocketmq.tag": "TagB"}


def test_a_delayed_message_waits_for_its_time(broker: BrokerProcess, new_topic: Callable[..., str], admin: Client) -> None:
    topic = new_topic(partitions=1)
    deliver_at = int(time.time() * 1000) + 1000
    with Producer(broker.url) as producer:
        message_id = producer.send_delayed(topic, {"n": 1}, deliver_at=deliver_at, tag="late")
    assert message_id
    with Consumer(broker.url, unique("g"), [topic]) as consumer:
        got: list[object] = []
        deadline = time.monotonic() + 15
        while not got and time.monotonic() < deadline:
            got = [m.value for m in consumer.poll(timeout=0.5)]
        assert time.time() * 1000 >= deliver_at  # never before its time
    assert got == [{"n": 1}]
