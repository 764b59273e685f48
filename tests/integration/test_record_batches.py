"""A produce request's records to a partition are stored as one record batch: readers still see messages.

Fetches start and stop inside batches, aborted batches vanish whole, retries of a batch
get its offsets back, a group's lag counts from inside a batch, and a share group
redelivers one record out of a batch.
"""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app.broker import Broker
from half_store.storage.schema import messages
from tests.integration.conftest import create_topic, error_code, read_all
from tests.integration.share_helpers import ack, receive

PARTITION_URL = "/v1/topics/{}/partitions/0/messages"


def produce(client: TestClient, topic: str, values: list[Any], **body: Any) -> dict[str, Any]:
    response = client.post(PARTITION_URL.format(topic), json={"messages": [{"value": v} for v in values], **body})
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


def fetch(client: TestClient, topic: str, offset: int, max_messages: int, isolation: str = "read_committed") -> dict[str, Any]:
    params = {"offset": offset, "max_messages": max_messages, "isolation": isolation}
    response = client.get(PARTITION_URL.format(topic), params=params)
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


def stored_rows(client: TestClient, topic: str) -> int:
    broker: Broker = client.app.state.broker  # type: ignore[attr-defined]
    topic_id = client.portal.call(broker.store.topic, topic).topic_id  # type: ignore[union-attr]
    count = select(func.count()).select_from(messages).where(messages.c.topic_id == topic_id)
    return int(broker.store.read_sync(lambda conn: conn.execute(count).scalar_one()))


def test_fetches_start_and_stop_inside_a_batch(client: TestClient) -> None:
    create_topic(client, "t")
    produced = produce(client, "t", list(range(10)))
    assert [o["offset"] for o in produced["offsets"]] == list(range(10))
    produce(client, "t", [10])
    produce(client, "t", [11, 12, 13])
    assert stored_rows(client, "t") == 3

    for isolation in ("read_committed", "read_uncommitted"):
        middle = fetch(client, "t", 3, 4, isolation)
        assert [(m["offset"], m["value"]) for m in middle["messages"]] == [(o, o) for o in range(3, 7)]
        assert middle["next_offset"] == 7
        across = fetch(client, "t", 8, 5, isolation)
        assert [m["offset"] for m in across["messages"]] == [8, 9, 10, 11, 12]
        tail = fetch(client, "t", 13, 100, isolation)
        assert [m["offset"] for m in tail["messages"]] == [13] and tail["next_offset"] == 14
    assert [m["value"] for m in read_all(client, "t")] == list(range(14))


def test_keys_headers_and_timestamps_survive_a_batch(client: TestClient) -> None:
    create_topic(client, "t")
    sent = [
        {"value": {"n": 1}, "key": "k1", "headers": {"h": "é"}, "timestamp": 1_700_000_000_001},
        {"value_base64": "AAEC", "timestamp": 1_700_000_000_002},
        {"value": "three", "key": "k3"},
    ]
    assert client.post(PARTITION_URL.format("t"), json={"messages": sent}).status_code == 200
    got = fetch(client, "t", 1, 2)["messages"]
    assert (got[0]["value_base64"], got[0]["key"], got[0]["timestamp"]) == ("AAEC", None, 1_700_000_000_002)
    assert (got[1]["value"], got[1]["key"]) == ("three", "k3")
    first = fetch(client, "t", 0, 1)["messages"][0]
    assert (first["value"], first["key"], first["headers"]) == ({"n": 1}, "k1", {"h": "é"})


def test_an_aborted_batch_vanishes_whole_for_read_committed(client: TestClient) -> None:
    create_topic(client, "t")
    produce(client, "t", ["before-1", "before-2"])
    txn = client.post("/v1/transactions", json={}).json()["txn_id"]
    produce(client, "t", ["lost-1", "lost-2", "lost-3"], txn_id=txn)
    assert client.post(f"/v1/transactions/{txn}/abort").status_code == 200
    produce(client, "t", ["after-1", "after-2"])

    assert [m["value"] for m in fetch(client, "t", 1, 100)["messages"]] == ["before-2", "after-1", "after-2"]
    assert [m["value"] for m in fetch(client, "t", 3, 100)["messages"]] == ["after-1", "after-2"]  # from inside it
    uncommitted = fetch(client, "t", 3, 2, "read_uncommitted")["messages"]
    assert [m["value"] for m in uncommitted] == ["lost-2", "lost-3"]


def test_a_retried_batch_gets_its_offsets_back_and_a_part_of_it_is_refused(client: TestClient) -> None:
    create_topic(client, "t")
    produce(client, "t", ["other"])
    producer = client.post("/v1/producers", json={}).json()
    stamp = {"producer_id": producer["producer_id"], "producer_epoch": producer["producer_epoch"]}
    first = produce(client, "t", ["a", "b", "c"], base_sequence=0, **stamp)
    retry = produce(client, "t", ["a", "b", "c"], base_sequence=0, **stamp)
    assert retry == {**first, "duplicate": True}
    assert [o["offset"] for o in retry["offsets"]] == [1, 2, 3]
    part = client.post(PARTITION_URL.format("t"), json={"messages": [{"value": "b"}], "base_sequence": 1, **stamp})
    assert (part.status_code, error_code(part)) == (409, "OUT_OF_ORDER_SEQUENCE")
    assert [m["value"] for m in read_all(client, "t")] == ["other", "a", "b", "c"]


def test_a_groups_lag_counts_from_inside_a_batch(client: TestClient) -> None:
    create_topic(client, "t")
    produce(client, "t", list(range(10)))
    committed = client.post("/v1/groups/g/offsets", json={"offsets": [{"topic": "t", "partition": 0, "offset": 3}]})
    assert committed.status_code == 200
    [offset] = client.get("/v1/groups/g/offsets").json()["offsets"]
    assert (offset["offset"], offset["lag"]) == (3, 7)


def test_a_share_group_redelivers_one_record_out_of_a_batch(client: TestClient) -> None:
    create_topic(client, "jobs")
    produce(client, "jobs", ["a", "b", "c", "d"])
    handed = receive(client, max_messages=4)
    assert [m["value"] for m in handed] == ["a", "b", "c", "d"]
    assert all(r["ok"] for r in ack(client, [handed[0], handed[1], handed[3]]))
    assert ack(client, [handed[2]], "RELEASE")[0]["ok"]
    again = receive(client, max_messages=4)
    assert [(m["offset"], m["value"], m["delivery_count"]) for m in again] == [(2, "c", 2)]
