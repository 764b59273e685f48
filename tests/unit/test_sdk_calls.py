"""The SDK's public call builders (``sdk.calls``): the requests they describe, without a broker."""

from __future__ import annotations

import json

from sdk import calls
from sdk.models import ProducerIdentity, RawFetchResult, TopicMetadata

PRODUCER = ProducerIdentity(producer_id=7, producer_epoch=2)


def test_a_pre_encoded_batch_is_the_same_request_as_one_built_from_messages() -> None:
    messages = [{"key": "k", "value": {"n": 1}, "headers": {}}, {"key": None, "value": "x", "headers": {"h": "v"}}]
    encoded = [json.dumps(m).encode() for m in messages]
    for fields in (
        {"producer": PRODUCER, "base_sequence": 4, "txn_id": "t-1"},
        {"producer": PRODUCER, "base_sequence": 0, "transactional": True},
        {},
    ):
        built = calls.produce_to_partition("orders", 3, messages, **fields)
        spliced = calls.produce_encoded("orders", 3, encoded, **fields)
        assert spliced.content is not None and spliced.json is None
        assert json.loads(spliced.content) == built.json
        assert (spliced.method, spliced.path, spliced.idempotent) == (built.method, built.path, built.idempotent)
        assert spliced.request_arguments()["headers"]["content-type"] == "application/json"


def test_offsets_carry_their_metadata_where_it_is_given() -> None:
    call = calls.add_offsets_to_transaction(
        "t-1", "g", {("b", 0): 5, ("a", 1): 9}, metadata={("b", 0): "snapshot"}
    )
    assert call.json == {
        "group": "g",
        "offsets": [{"topic": "a", "partition": 1, "offset": 9}, {"topic": "b", "partition": 0, "offset": 5,
                                                                   "metadata": "snapshot"}],
    }
    assert calls.commit_group_offsets("g/h", {("a", 0): 1}).path == "/v1/groups/g%2Fh/offsets"


def test_a_raw_fetch_is_the_fetch_request_with_its_messages_left_as_json() -> None:
    decoded = calls.fetch("t", 0, 5, max_messages=10, max_wait_ms=200, isolation="read_committed")
    raw = calls.fetch_raw("t", 0, 5, max_messages=10, max_wait_ms=200, decode=json.loads)
    assert (raw.path, raw.params, raw.extra_timeout) == (decoded.path, decoded.params, decoded.extra_timeout)
    answer = {"messages": [{"offset": 5, "value_base64": "AQI="}], "next_offset": 6, "high_watermark": 6,
              "last_stable_offset": 6}
    assert raw.parse(answer) == RawFetchResult([{"offset": 5, "value_base64": "AQI="}], 6, 6, 6)
    assert decoded.parse(answer).messages[0].value == b"\x01\x02"


def test_an_arrow_fetch_asks_for_arrow_and_hands_back_the_whole_answer() -> None:
    call = calls.fetch_arrow("t", 2, 0, max_messages=100)
    assert call.headers == {"Accept": calls.ARROW_STREAM}
    assert call.whole_answer and call.params is not None and call.params["max_wait_ms"] == 0


def test_returning_json_keeps_the_request_and_hands_back_the_broker_json() -> None:
    call = calls.alter_topic("orders", partitions=4, retention_ms=None)
    assert call.json == {"partitions": 4, "retention_ms": None}  # None: back to the broker's default
    body = {"name": "orders", "partitions": [{"partition": 0}], "config": {"retention_ms": None}}
    assert isinstance(call.parse(body), TopicMetadata)
    as_json = call.returning_json()
    assert (as_json.method, as_json.path, as_json.json) == ("PATCH", "/v1/topics/orders", call.json)
    assert as_json.parse(body) is body


def test_filters_not_given_are_left_out_of_the_query() -> None:
    assert calls.list_transactions(state="OPEN").params == {"state": "OPEN"}
    assert calls.list_half_messages(None, None, limit=5).params == {"limit": 5}
    assert calls.list_acls().params == {}


def test_creating_something_new_is_never_resent_once_it_may_have_arrived() -> None:
    for call in (calls.create_topic("t", 1), calls.create_principal("p"), calls.create_token("p"),
                 calls.create_acl("p", "topic", "t", ["read"])):
        assert not call.idempotent, call.path
    assert calls.create_token("a/b").path == "/v1/principals/a%2Fb/tokens"
