"""The official RocketMQ 5 Python client against a real broker: one promise per test (CONTRACT v1.2)."""

from __future__ import annotations

import base64
import time

import httpx
import pytest

from tests.e2e.rocketmq_fixtures import (  # noqa: F401
    TX_TOPIC,
    RocketMQClient,
    create_topic,
    rest_messages,
    rocketmq,
    rocketmq_broker,
    unique,
)
from tests.support.broker_process import BrokerProcess

pytestmark = pytest.mark.e2e


def test_a_normal_message_keeps_its_id_tag_keys_and_properties(rocketmq: RocketMQClient, rocketmq_broker: BrokerProcess) -> None:
    topic = create_topic(rocketmq_broker, unique("plain"), partitions=2)
    sent = rocketmq.call("send", topic=topic, body="hello", tag="TagA", keys=["k1", "k2"], properties={"color": "red"})
    [got] = rocketmq.call("receive", group=unique("g"), topic=topic)["messages"]
    assert (got["message_id"], got["body"], got["tag"], got["keys"], got["properties"]) == (
        sent["message_id"], "hello", "TagA", ["k1", "k2"], {"color": "red"},
    )
    assert got["delivery_attempt"] == 1 and not got["corrupted"]


def test_rest_sees_a_rocketmq_message_as_headers_and_a_string_value(
    rocketmq: RocketMQClient, rocketmq_broker: BrokerProcess
) -> None:
    topic = create_topic(rocketmq_broker, unique("to-rest"))
    sent = rocketmq.call("send", topic=topic, body='{"looks": "like json"}', tag="T", keys=["a", "b"], properties={"p": "1"})
    [message] = rest_messages(rocketmq_broker, topic)
    assert message["value"] == '{"looks": "like json"}'
    keys = message["headers"].pop("rocketmq.keys")
    assert sorted(keys.split(" ")) == ["a", "b"]  # space-joined (the Python client keeps keys in a set)
    assert message["headers"] == {"rocketmq.tag": "T", "p": "1", "rocketmq.message_id": sent["message_id"]}


def test_a_binary_body_is_value_base64_over_rest(rocketmq: RocketMQClient, rocketmq_broker: BrokerProcess) -> None:
    topic = create_topic(rocketmq_broker, unique("binary"))
    body = bytes([0xFF, 0x00, 0xFE])
    rocketmq.call("send", topic=topic, body_base64=base64.b64encode(body).decode())
    [message] = rest_messages(rocketmq_broker, topic)
    assert base64.b64decode(message["value_base64"]) == body


@pytest.mark.parametrize(
    ("value", "body"), [({"total": 12}, '{"total":12}'), ("plain text", "plain text"), (7, "7")]
)
def test_a_rest_message_reaches_rocketmq_consumers_as_its_json_text(
    rocketmq: RocketMQClient, rocketmq_broker: BrokerProcess, value: object, body: str
) -> None:
    topic = create_topic(rocketmq_broker, unique("from-rest"))
    message = {"key": "c-1", "value": value, "headers": {"trace": "t-1"}}
    response = httpx.post(f"{rocketmq_broker.url}/v1/topics/{topic}/messages", json={"messages": [message]})
    assert response.status_code == 200, response.text
    [got] = rocketmq.call("receive", group=unique("g"), topic=topic)["messages"]
    assert (got["body"], got["properties"], got["keys"]) == (body, {"trace": "t-1"}, ["c-1"])
    assert got["message_id"] and not got["corrupted"]


@pytest.mark.parametrize(("action", "state", "visible"), [("commit", "COMMITTED", True), ("rollback", "ROLLED_BACK", False)])
def test_end_transaction_commits_or_rolls_back_the_half_message(
    rocketmq: RocketMQClient, rocketmq_broker: BrokerProcess, action: str, state: str, visible: bool
) -> None:
    topic = create_topic(rocketmq_broker, unique("tx"))
    body = unique(action)
    sent = rocketmq.call("transaction", topic=topic, body=body, action=action)
    half = httpx.get(f"{rocketmq_broker.url}/v1/half-messages/{sent['transaction_id']}").json()
    assert (half["state"], half["transaction_id"], half["producer_group"]) == (state, sent["message_id"], f"rmq.{topic}")
    assert [m["value"] for m in rest_messages(rocketmq_broker, topic)] == ([body] if visible else [])


def test_an_undecided_transaction_is_invisible(rocketmq: RocketMQClient, rocketmq_broker: BrokerProcess) -> None:
    topic = create_topic(rocketmq_broker, unique("undecided"))
    rocketmq.call("transaction", topic=topic, body="later", action="none")
    for isolation in ("read_committed", "read_uncommitted"):
        response = httpx.get(
            f"{rocketmq_broker.url}/v1/topics/{topic}/partitions/0/messages", params={"offset": 0, "isolation": isolation}
        )
        assert response.json()["messages"] == []
    assert rocketmq.call("receive", group=unique("g"), topic=topic, timeout_s=1)["messages"] == []


def _wait_for_state(broker: BrokerProcess, half_id: str, wanted: str, timeout: float = 20) -> dict[str, object]:
    deadline = time.monotonic() + timeout
    while True:
        half: dict[str, object] = httpx.get(f"{broker.url}/v1/half-messages/{half_id}").json()
        if half["state"] == wanted or time.monotonic() > deadline:
            return half
        time.sleep(0.2)


@pytest.mark.parametrize(("answer", "state"), [("COMMIT", "COMMITTED"), ("ROLLBACK", "ROLLED_BACK")])
def test_a_back_check_answer_resolves_the_transaction(
    rocketmq: RocketMQClient, rocketmq_broker: BrokerProcess, answer: str, state: str
) -> None:
    body = unique(answer)
    sent = rocketmq.call("transaction", topic=TX_TOPIC, body=body, action="none", properties={"answer": answer})
    half = _wait_for_state(rocketmq_broker, sent["transaction_id"], state)
    assert half["state"] == state
    assert sent["message_id"] in rocketmq.call("checked")["asked"]
    committed = [m["value"] for m in rest_messages(rocketmq_broker, TX_TOPIC)]
    assert (body in committed) == (state == "COMMITTED")


def test_an_unspecified_answer_is_asked_again_later(rocketmq: RocketMQClient, rocketmq_broker: BrokerProcess) -> None:
    sent = rocketmq.call("transaction", topic=TX_TOPIC, body=unique("unknown"), action="none", properties={"answer": "?"})
    deadline = time.monotonic() + 20
    half: dict[str, object] = {}
    while time.monotonic() < deadline:
        half = httpx.get(f"{rocketmq_broker.url}/v1/half-messages/{sent['transaction_id']}").json()
        if isinstance(half["check_times"], int) and half["check_times"] >= 2:
            break
        time.sleep(0.2)
    assert half["state"] == "PREPARED" and half["check_times"] >= 2  # type: ignore[operator]
    assert "UNKNOWN" in [check["answer"] for check in half["checks"]]  # type: ignore[attr-defined]


def test_an_unacked_message_comes_back_with_a_higher_attempt(
    rocketmq: RocketMQClient, rocketmq_broker: BrokerProcess
) -> None:
    topic = create_topic(rocketmq_broker, unique("redeliver"))
    rocketmq.call("send", topic=topic, body="again")
    group = unique("g")
    [first] = rocketmq.call("receive", group=group, topic=topic, invisible_s=1, ack=False)["messages"]
    [second] = rocketmq.call("receive", group=group, topic=topic, invisible_s=15, timeout_s=10)["messages"]
    assert (first["message_id"], first["delivery_attempt"]) == (second["message_id"], 1)
    assert second["delivery_attempt"] == 2


def test_a_message_past_its_max_deliveries_goes_to_the_dead_letter_topic(
    rocketmq: RocketMQClient, rocketmq_broker: BrokerProcess
) -> None:
    topic = create_topic(rocketmq_broker, unique("dlq"))
    sent = rocketmq.call("send", topic=topic, body="poison")
    group = unique("g")
    for _ in range(2):  # share_max_deliveries=2
        assert rocketmq.call("receive", group=group, topic=topic, invisible_s=1, ack=False, timeout_s=10)["messages"]
    assert rocketmq.call("receive", group=group, topic=topic, timeout_s=3)["messages"] == []
    [dead] = rest_messages(rocketmq_broker, f"DLQ.{group}")
    assert (dead["value"], dead["headers"]["rocketmq.message_id"]) == ("poison", sent["message_id"])
    assert dead["headers"]["halfmq-dlq-reason"] == "MAX_DELIVERIES"


@pytest.mark.parametrize(
    ("expression", "expected"), [("*", ["a", "b", "none"]), ("TagA", ["a"]), ("TagA || TagB", ["a", "b"])]
)
def test_a_tag_expression_delivers_only_matching_messages(
    rocketmq: RocketMQClient, rocketmq_broker: BrokerProcess, expression: str, expected: list[str]
) -> None:
    topic = create_topic(rocketmq_broker, unique("tags"))
    for body, tag in (("a", "TagA"), ("b", "TagB"), ("none", None)):
        rocketmq.call("send", topic=topic, body=body, tag=tag)
    got = rocketmq.call(
        "receive", group=unique("g"), topic=topic, expression=expression, count=len(expected), timeout_s=5
    )["messages"]
    assert sorted(m["body"] for m in got) == expected


def test_fifo_messages_of_a_group_come_one_at_a_time_in_order(
    rocketmq: RocketMQClient, rocketmq_broker: BrokerProcess
) -> None:
    topic = create_topic(rocketmq_broker, unique("fifo"), partitions=2)
    for n in range(4):
        for group in ("A", "B"):
            rocketmq.call("send", topic=topic, body=f"{group}{n}", group=group)
    consumer_group = unique("g")
    seen: list[str] = []
    for _ in range(4):
        batch = rocketmq.call("receive", group=consumer_group, topic=topic, max=16, count=2, timeout_s=5)["messages"]
        assert sorted(m["message_group"] for m in batch) == ["A", "B"]  # one of each group in flight
        assert all(m["keys"] == [] for m in batch)  # the group is not one of its keys
        seen += [m["body"] for m in batch]
    for group in ("A", "B"):
        assert [b for b in seen if b.startswith(group)] == [f"{group}{n}" for n in range(4)]


def test_sending_to_an_unknown_topic_fails(rocketmq: RocketMQClient) -> None:
    answer = rocketmq.try_call("send", topic=unique("missing"), body="x")
    assert "route" in answer.get("error", ""), answer  # its QueryRoute was answered TOPIC_NOT_FOUND


def test_a_push_consumer_gets_a_failed_message_again(rocketmq: RocketMQClient, rocketmq_broker: BrokerProcess) -> None:
    topic = create_topic(rocketmq_broker, unique("push"))
    sent = rocketmq.call("send", topic=topic, body="retry me", properties={"fail": "1"})
    seen = rocketmq.call("push", group=unique("g"), topic=topic, count=2, timeout_s=20)["messages"]
    assert [(m["message_id"], m["delivery_attempt"]) for m in seen[:2]] == [(sent["message_id"], 1), (sent["message_id"], 2)]


def test_a_delay_message_is_not_received_before_its_time(rocketmq: RocketMQClient, rocketmq_broker: BrokerProcess) -> None:
    topic = create_topic(rocketmq_broker, unique("delay"))
    deliver_at = int(time.time() * 1000) + 1500
    sent = rocketmq.call("send", topic=topic, body="later", delivery_ms=deliver_at)  # 5.1.2: ms in Timestamp.seconds
    waiting = httpx.get(f"{rocketmq_broker.url}/v1/delayed-messages", params={"topic": topic}).json()["delayed_messages"]
    assert [w["deliver_at"] for w in waiting] == [deliver_at] and rest_messages(rocketmq_broker, topic) == []
    [got] = rocketmq.call("receive", group=unique("g"), topic=topic, timeout_s=15)["messages"]
    assert time.time() * 1000 >= deliver_at
    assert (got["message_id"], got["body"]) == (sent["message_id"], "later")


def test_a_delivery_time_past_the_longest_delay_is_refused(rocketmq: RocketMQClient, rocketmq_broker: BrokerProcess) -> None:
    topic = create_topic(rocketmq_broker, unique("toofar"))
    answer = rocketmq.try_call("send", topic=topic, body="x", delivery_ms=int(time.time() * 1000) + 4 * 24 * 3600 * 1000)
    assert "error" in answer, answer
    assert httpx.get(f"{rocketmq_broker.url}/v1/delayed-messages", params={"topic": topic}).json()["delayed_messages"] == []
