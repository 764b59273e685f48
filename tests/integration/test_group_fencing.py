"""KIP-447: while a group has members, only an owner with its current epoch moves its offsets (both databases)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from half_store.settings import Settings
from tests.integration.conftest import create_topic, error_code, make_settings, read_all
from tests.integration.group_helpers import Member, lapse, settle


@pytest.fixture
def settings(database_url: str) -> Settings:
    return make_settings(database_url, group_min_session_timeout_ms=100)


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings)) as test_client:
        yield test_client


def offsets(client: TestClient, group: str) -> dict[tuple[str, int], int]:
    body = client.get(f"/v1/groups/{group}/offsets").json()
    return {(o["topic"], o["partition"]): o["offset"] for o in body["offsets"]}


def fill(client: TestClient, topic: str, partitions: int, per_partition: int = 5) -> None:
    messages = [{"value": i, "partition": p} for p in range(partitions) for i in range(per_partition)]
    assert client.post(f"/v1/topics/{topic}/messages", json={"messages": messages}).status_code == 200


def refused(response: Any) -> bool:
    return response.status_code == 409 and error_code(response) == "FENCED_MEMBER_EPOCH"


def test_only_the_owner_with_its_current_epoch_commits(client: TestClient) -> None:
    create_topic(client, "orders", 2)
    fill(client, "orders", 2)
    a, b = Member.join(client, "g", ["orders"]), Member.join(client, "g", ["orders"])
    settle(a, b)
    (mine,), (theirs,) = sorted(a.assignment), sorted(b.assignment)
    plain = client.post(
        "/v1/groups/g/offsets", json={"offsets": [{"topic": "orders", "partition": mine[1], "offset": 1}]}
    )
    assert refused(plain)  # no member named while the group has live members
    assert refused(a.commit({theirs: 1}))  # a partition a does not own
    assert refused(a.commit({mine: 1, theirs: 1}))  # all or nothing
    assert refused(a.commit({mine: 1}, epoch=a.member_epoch - 1))  # a stale epoch
    assert refused(a.commit({mine: 1}, epoch=a.member_epoch + 1))
    assert offsets(client, "g") == {}  # none of these changed anything
    assert a.commit({mine: 3}).status_code == 200
    assert offsets(client, "g") == {mine: 3}


def test_a_member_commits_a_revoked_partition_until_it_lets_go(client: TestClient) -> None:
    create_topic(client, "orders", 2)
    fill(client, "orders", 2)
    a = Member.join(client, "g", ["orders"])
    b = Member.join(client, "g", ["orders"])
    a.beat(let_go=False)  # one partition is revoked from a: a commits it before it gives it up
    (revoked,) = a.held - a.assignment
    assert a.commit({revoked: 4}).status_code == 200
    a.beat()  # let go
    assert refused(a.commit({revoked: 5}))  # too late: a zombie's commit
    b.beat()
    assert b.assignment == {revoked}
    assert b.commit({revoked: 5}).status_code == 200
    assert offsets(client, "g")[revoked] == 5


def test_an_empty_group_keeps_the_v1_behaviour_but_a_named_member_is_checked(client: TestClient) -> None:
    create_topic(client, "orders", 1)
    fill(client, "orders", 1)
    zero = [{"topic": "orders", "partition": 0, "offset": 2}]
    assert client.post("/v1/groups/g/offsets", json={"offsets": zero}).status_code == 200
    a = Member.join(client, "g", ["orders"])
    a.leave()
    assert client.post("/v1/groups/g/offsets", json={"offsets": zero}).status_code == 200  # empty again: anyone
    assert refused(a.commit({("orders", 0): 4}))  # but not the member that left
    lapsed = Member.join(client, "g", ["orders"])
    lapse(client, "g", lapsed.member_id)
    assert refused(lapsed.commit({("orders", 0): 4}))  # nor one whose session lapsed
    assert client.post("/v1/groups/g/offsets", json={"offsets": zero}).status_code == 200
    assert offsets(client, "g") == {("orders", 0): 2}


def begin(client: TestClient) -> str:
    response = client.post("/v1/transactions", json={})
    assert response.status_code == 201
    return str(response.json()["txn_id"])


def add_offsets(client: TestClient, txn_id: str, member: Member | None, partition: tuple[str, int], offset: int) -> Any:
    body: dict[str, Any] = {
        "group": "g",
        "offsets": [{"topic": partition[0], "partition": partition[1], "offset": offset}],
    }
    if member is not None:
        body.update(member_id=member.member_id, member_epoch=member.member_epoch)
    return client.post(f"/v1/transactions/{txn_id}/offsets", json=body)


def test_transactional_offsets_are_fenced_when_added_and_again_at_commit(client: TestClient) -> None:
    create_topic(client, "orders", 2)
    create_topic(client, "invoices", 1)
    fill(client, "orders", 2)
    a, b = Member.join(client, "g", ["orders"]), Member.join(client, "g", ["orders"])
    settle(a, b)
    (mine,), (theirs,) = sorted(a.assignment), sorted(b.assignment)

    txn = begin(client)
    assert refused(add_offsets(client, txn, a, theirs, 1))
    assert add_offsets(client, txn, a, mine, 3).status_code == 200
    output = {"messages": [{"value": "invoice"}], "txn_id": txn}
    assert client.post("/v1/topics/invoices/partitions/0/messages", json=output).status_code == 200

    # Meanwhile a stalls and its session lapses: b takes a's partition.
    lapse(client, "g", a.member_id)
    b.beat()
    assert b.assignment == {mine, theirs}
    commit = client.post(f"/v1/transactions/{txn}/commit")
    assert refused(commit)  # the zombie's transaction cannot commit a's old partition's offsets ...
    assert client.get(f"/v1/transactions/{txn}").json()["state"] == "OPEN"  # ... and nothing changed
    fenced = client.get("/metrics").text
    assert 'halfmq_consumer_group_fenced_commits_total{kind="transaction_commit"}' in fenced
    assert client.post(f"/v1/transactions/{txn}/abort").json()["state"] == "ABORTED"
    assert offsets(client, "g") == {}
    assert read_all(client, "invoices") == []  # nor its output

    ok = begin(client)
    assert add_offsets(client, ok, b, mine, 3).status_code == 200
    assert client.post(f"/v1/transactions/{ok}/commit").json()["state"] == "COMMITTED"
    assert offsets(client, "g") == {mine: 3}


def test_a_partition_that_left_and_came_back_since_the_offsets_were_staged_is_fenced(client: TestClient) -> None:
    """Held again at commit time is not enough: held *since* the epoch the offsets were staged under."""
    create_topic(client, "orders", 1)
    create_topic(client, "refunds", 1)
    fill(client, "orders", 1)
    a = Member.join(client, "g", ["orders"])
    txn = begin(client)
    assert add_offsets(client, txn, a, ("orders", 0), 2).status_code == 200

    def subscribe(topics: list[str]) -> None:
        owned = [{"topic": t, "partition": p} for t, p in sorted(a.held)]
        body = client.post(
            f"/v1/groups/g/members/{a.member_id}/heartbeat",
            json={"member_epoch": a.member_epoch, "owned": owned, "topics": topics},
        ).json()
        a.member_epoch, a.assignment = body["member_epoch"], {(p["topic"], p["partition"]) for p in body["assignment"]}
        a.beat()  # let go of what was revoked

    subscribe(["refunds"])  # orders/0 is revoked and given up ...
    subscribe(["orders"])  # ... and granted again, under a later epoch
    assert ("orders", 0) in a.assignment
    assert refused(client.post(f"/v1/transactions/{txn}/commit"))
    assert a.commit({("orders", 0): 1}).status_code == 200
    assert offsets(client, "g") == {("orders", 0): 1}


def test_offsets_in_a_transaction_that_name_no_member_are_taken_whatever_the_members(client: TestClient) -> None:
    """Kafka's TxnOffsetCommit without a member id (generation -1): the pre-KIP-447 path, not member-checked."""
    create_topic(client, "orders", 2)
    fill(client, "orders", 2)
    a, b = Member.join(client, "g", ["orders"]), Member.join(client, "g", ["orders"])
    settle(a, b)
    (mine,), (theirs,) = sorted(a.assignment), sorted(b.assignment)
    staged_early = begin(client)
    assert add_offsets(client, staged_early, None, mine, 2).status_code == 200  # by group name, live members
    txn = begin(client)
    assert add_offsets(client, txn, None, theirs, 4).status_code == 200
    assert client.post(f"/v1/transactions/{txn}/commit").json()["state"] == "COMMITTED"
    assert client.post(f"/v1/transactions/{staged_early}/commit").json()["state"] == "COMMITTED"
    assert offsets(client, "g") == {mine: 2, theirs: 4}
    # A plain commit keeps the rule: while the group has live members it names one of them.
    plain = client.post("/v1/groups/g/offsets", json={"offsets": [{"topic": "orders", "partition": mine[1], "offset": 3}]})
    assert refused(plain)
    assert offsets(client, "g") == {mine: 2, theirs: 4}
