"""Bad RocketMQ calls get RocketMQ's status for what is wrong, never a crash (raw gRPC calls, one promise each)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from app.rocketmq.protocol import SERVICE_NAME, enum_name, enum_value, message_class, new
from tests.e2e.rocketmq_fixtures import create_topic
from tests.support.broker_process import BrokerProcess, free_port

pytestmark = pytest.mark.e2e
CLIENT = [("x-mq-client-id", "raw-client")]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    path = tmp_path_factory.mktemp("rocketmq-protocol")
    process = BrokerProcess(f"sqlite:///{path}/broker.db", log_path=path / "broker.log", grpc_port=free_port())
    process.start()
    try:
        create_topic(process, "raw")
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="module")
def channel(broker: BrokerProcess) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(f"127.0.0.1:{broker.settings['grpc_port']}") as opened:
        yield opened


def call(channel: grpc.Channel, method: str, request: Any, metadata: list[tuple[str, str]] | None = None) -> Any:
    descriptor = {m.name: m for m in _methods()}[method]
    serialize = message_class(descriptor.input_type.name).SerializeToString
    deserialize = message_class(descriptor.output_type.name).FromString
    path = f"/{SERVICE_NAME}/{method}"
    if method in ("ReceiveMessage", "PullMessage"):
        stream = channel.unary_stream(path, request_serializer=serialize, response_deserializer=deserialize)
        return list(stream(request, metadata=CLIENT if metadata is None else metadata, timeout=10))
    unary = channel.unary_unary(path, request_serializer=serialize, response_deserializer=deserialize)
    return unary(request, metadata=CLIENT if metadata is None else metadata, timeout=10)


def _methods() -> Any:
    from app.rocketmq.protocol import service_descriptor

    return service_descriptor().methods


def code(answer: Any) -> str:
    return enum_name("Code", answer.status.code)


def message(**system: Any) -> Any:
    properties = {"message_id": "01AB", "message_type": enum_value("MessageType", "NORMAL"), **system}
    system_properties = new("SystemProperties", **properties)
    return new("Message", topic=new("Resource", name="raw"), body=b"body", system_properties=system_properties)


def test_a_call_without_a_client_id_is_refused(channel: grpc.Channel) -> None:
    answer = call(channel, "QueryRoute", new("QueryRouteRequest", topic=new("Resource", name="raw")), metadata=[])
    assert code(answer) == "CLIENT_ID_REQUIRED"


def test_query_route_of_an_unknown_topic_is_topic_not_found(channel: grpc.Channel) -> None:
    assert code(call(channel, "QueryRoute", new("QueryRouteRequest", topic=new("Resource", name="nope")))) == "TOPIC_NOT_FOUND"


def test_query_route_of_a_system_topic_is_forbidden(channel: grpc.Channel) -> None:
    request = new("QueryRouteRequest", topic=new("Resource", name="RMQ_SYS_TRANS_HALF_TOPIC"))
    assert code(call(channel, "QueryRoute", request)) == "FORBIDDEN"


@pytest.mark.parametrize(
    ("system", "expected"),
    [
        ({"message_id": ""}, "ILLEGAL_MESSAGE_ID"),
        ({"tag": "a|b"}, "ILLEGAL_MESSAGE_TAG"),
        ({"keys": ["has space"]}, "ILLEGAL_MESSAGE_KEY"),
        ({"body_digest": new("Digest", type=enum_value("DigestType", "MD5"), checksum="00")}, "MESSAGE_CORRUPTED"),
        (
            {"message_type": enum_value("MessageType", "TRANSACTION"), "message_group": "g"},
            "MESSAGE_PROPERTY_CONFLICT_WITH_TYPE",
        ),
    ],
)
def test_a_malformed_message_is_refused_with_its_code(channel: grpc.Channel, system: dict[str, Any], expected: str) -> None:
    answer = call(channel, "SendMessage", new("SendMessageRequest", messages=[message(**system)]))
    assert (code(answer), enum_name("Code", answer.entries[0].status.code)) == (expected, expected)


def test_a_body_with_a_matching_digest_is_taken(channel: grpc.Channel) -> None:
    digest = new("Digest", type=enum_value("DigestType", "SHA1"), checksum=hashlib.sha1(b"body").hexdigest().upper())
    answer = call(channel, "SendMessage", new("SendMessageRequest", messages=[message(body_digest=digest)]))
    assert code(answer) == "OK" and answer.entries[0].message_id == "01AB"


def test_a_reserved_user_property_is_refused(channel: grpc.Channel) -> None:
    bad = message()
    bad.user_properties["rocketmq.message_id"] = "forged"
    assert code(call(channel, "SendMessage", new("SendMessageRequest", messages=[bad]))) == "ILLEGAL_MESSAGE_PROPERTY_KEY"


def _receive(**fields: Any) -> Any:
    queue = new("MessageQueue", topic=new("Resource", name="raw"))
    return new("ReceiveMessageRequest", group=new("Resource", name="raw-g"), message_queue=queue, batch_size=1, **fields)


def test_an_sql_filter_is_not_implemented(channel: grpc.Channel) -> None:
    expression = new("FilterExpression", type=enum_value("FilterType", "SQL"), expression="a > 1")
    [answer] = call(channel, "ReceiveMessage", _receive(filter_expression=expression))
    assert code(answer) == "NOT_IMPLEMENTED"


def test_an_invisible_duration_below_the_minimum_is_refused(channel: grpc.Channel) -> None:
    request = _receive()
    request.invisible_duration.FromMilliseconds(1)
    [answer] = call(channel, "ReceiveMessage", request)
    assert code(answer) == "ILLEGAL_INVISIBLE_TIME"


def test_acking_a_forged_receipt_is_an_invalid_receipt_handle(channel: grpc.Channel) -> None:
    entry = new("AckMessageEntry", message_id="01AB", receipt_handle="forged")
    request = new("AckMessageRequest", group=new("Resource", name="raw-g"), topic=new("Resource", name="raw"), entries=[entry])
    assert code(call(channel, "AckMessage", request)) == "INVALID_RECEIPT_HANDLE"


def test_an_unknown_transaction_id_is_invalid(channel: grpc.Channel) -> None:
    request = new("EndTransactionRequest", topic=new("Resource", name="raw"), message_id="01AB", transaction_id="nope")
    request.resolution = enum_value("TransactionResolution", "COMMIT")
    assert code(call(channel, "EndTransaction", request)) == "INVALID_TRANSACTION_ID"


@pytest.mark.parametrize("method", ["UpdateOffset", "RecallMessage"])
def test_what_halfmq_does_not_serve_is_unsupported(channel: grpc.Channel, method: str) -> None:
    request = message_class({m.name: m for m in _methods()}[method].input_type.name)()
    assert code(call(channel, method, request)) == "UNSUPPORTED"
