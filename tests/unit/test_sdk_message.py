"""Wire encoding of messages: JSON values as ``value``, bytes as ``value_base64``."""

from __future__ import annotations

from sdk.message import Message, decode_value, from_wire, to_wire


def test_bytes_travel_as_base64_and_come_back_as_bytes() -> None:
    wire = to_wire(b"\x00\xffbinary", key="k", headers={"h": "v"})
    assert wire == {"key": "k", "headers": {"h": "v"}, "value_base64": "AP9iaW5hcnk="}
    assert decode_value(wire) == b"\x00\xffbinary"


def test_json_values_travel_as_value() -> None:
    for value in ({"a": [1, 2]}, "text", 3.5, None, [1, "x"]):
        wire = to_wire(value)
        assert wire["value"] == value and "value_base64" not in wire
        assert decode_value(wire) == value


def test_message_defaults_and_fetched_fields() -> None:
    m = Message("orders", {"id": 1})
    assert (m.key, m.headers, m.partition, m.offset) == (None, {}, None, None)
    assert Message("t", 1, None, None).headers == {}
    fetched = from_wire({"topic": "t", "partition": 2, "offset": 7, "timestamp": 99, "key": None,
                         "value_base64": "aGk=", "headers": {}})
    assert (fetched.value, fetched.partition, fetched.offset, fetched.timestamp) == (b"hi", 2, 7, 99)


def test_check_request_becomes_a_message_with_transaction_fields() -> None:
    check = {"message_id": "m1", "transaction_id": "t1", "producer_group": "g", "topic": "orders", "key": "k",
             "value": {"x": 1}, "headers": {}, "check_times": 2, "born_timestamp": 1234}
    m = from_wire(check)
    assert (m.topic, m.message_id, m.transaction_id, m.check_times, m.timestamp) == ("orders", "m1", "t1", 2, 1234)


def test_a_share_group_message_carries_every_field_a_fetched_message_does() -> None:
    """Built from the same fields by name, so a field added to Message reaches ReceivedMessage too."""
    from dataclasses import fields

    from sdk.models import ReceivedMessage

    body = {"topic": "t", "partition": 1, "offset": 4, "timestamp": 99, "key": "k", "value_base64": "aGk=",
            "headers": {"h": "v"}, "message_id": "m-1", "transaction_id": "x-1", "check_times": 2,
            "receipt": "r-1", "delivery_count": 3, "lock_expires_ms": 1234}
    received, fetched = ReceivedMessage.from_json(body), from_wire(body)
    for field in fields(Message):
        assert getattr(received, field.name) == getattr(fetched, field.name), field.name
    assert (received.receipt, received.delivery_count, received.lock_expires_ms) == ("r-1", 3, 1234)
    assert received.value == b"hi"
