"""Consumer groups with members through the HTTP API, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from half_store.settings import Settings
from tests.integration.conftest import create_topic, error_code, make_settings
from tests.integration.group_helpers import Member, describe, holders, lapse, settle

GROUP_SETTINGS = {"group_min_session_timeout_ms": 100, "group_heartbeat_interval_ms": 1000}


@pytest.fixture
def settings(database_url: str) -> Settings:
    return make_settings(database_url, **GROUP_SETTINGS)


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings)) as test_client:
        yield test_client


def test_a_second_member_gets_its_share_only_once_the_first_lets_go(client: TestClient) -> None:
    create_topic(client, "orders", 4)
    a = Member.join(client, "g", ["orders"])
    assert a.assignment == {("orders", p) for p in range(4)} and a.member_epoch == 1
    assert describe(client, "g")["state"] == "STABLE"

    b = Member.join(client, "g", ["orders"])
    assert b.assignment == set()  # a still holds everything
    assert describe(client, "g")["state"] == "RECONCILING"
    revoked = a.beat(let_go=False)  # a is told first: two partitions leave its assignment
    assert len(a.assignment) == 2 and a.member_epoch == 2 and revoked["state"] == "UNREVOKED_PARTITIONS"
    assert revoked["heartbeat_interval_ms"] < 1000  # it is asked to come back soon
    assert b.beat()["assignment"] == []  # ... but a has not let them go yet
    assert set(holders(client, "g").values()) == {a.member_id}
    a.beat()  # its heartbeat omits them: released
    granted = b.beat()
    assert len(b.assignment) == 2 and b.member_epoch == 2 and granted["state"] == "STABLE"
    assert a.assignment.isdisjoint(b.assignment)
    assert holders(client, "g") == {
        tp: (a if tp in a.assignment else b).member_id for tp in a.assignment | b.assignment
    }
    view = describe(client, "g")
    assert view["state"] == "STABLE" and {m["member_epoch"] for m in view["members"]} == {2}
    assert all(m["last_heartbeat_ms"] > 0 and m["target"] == m["assignment"] for m in view["members"])


def test_members_of_one_subscription_are_balanced_and_a_leaver_hands_over(client: TestClient) -> None:
    create_topic(client, "orders", 5)
    members = [Member.join(client, "g", ["orders"]) for _ in range(3)]
    settle(*members)
    assert sorted(len(m.assignment) for m in members) == [1, 2, 2]
    holders(client, "g")
    leaver = max(members, key=lambda m: len(m.assignment))
    leaver.leave()
    rest = [m for m in members if m is not leaver]
    settle(*rest)
    assert sorted(len(m.assignment) for m in rest) == [2, 3]
    assert len(holders(client, "g")) == 5
    assert (
        error_code(
            leaver.client.post(
                f"/v1/groups/g/members/{leaver.member_id}/heartbeat", json={"member_epoch": leaver.member_epoch}
            )
        )
        == "UNKNOWN_MEMBER"
    )


def test_a_lapsed_member_is_removed_when_its_group_next_hears_from_anyone(client: TestClient) -> None:
    create_topic(client, "orders", 2)
    a, b = Member.join(client, "g", ["orders"]), Member.join(client, "g", ["orders"])
    settle(a, b)
    lapse(client, "g", a.member_id)
    b.beat()  # no job ran: b's own heartbeat removes a, and a's partitions are free at once
    assert b.assignment == {("orders", 0), ("orders", 1)}
    assert [m["member_id"] for m in describe(client, "g")["members"]] == [b.member_id]
    response = client.post(f"/v1/groups/g/members/{a.member_id}/heartbeat", json={"member_epoch": a.member_epoch})
    assert response.status_code == 404 and error_code(response) == "UNKNOWN_MEMBER"


def test_the_expiry_job_removes_lapsed_members(client: TestClient) -> None:
    create_topic(client, "orders", 2)
    a, b = Member.join(client, "g", ["orders"]), Member.join(client, "g", ["orders"])
    settle(a, b)
    lapse(client, "g", a.member_id)
    assert client.portal.call(client.app.state.broker.groups.expire_sessions) == 1  # type: ignore[union-attr,attr-defined]
    view = describe(client, "g")
    assert [m["member_id"] for m in view["members"]] == [b.member_id]
    assert view["state"] == "RECONCILING"  # b is still to take a's partition, at its next heartbeat
    b.beat()
    assert b.assignment == {("orders", 0), ("orders", 1)}
    assert client.portal.call(client.app.state.broker.groups.expire_sessions) == 0  # type: ignore[union-attr,attr-defined]


def test_a_retried_join_answers_the_same_member(client: TestClient) -> None:
    create_topic(client, "orders", 2)
    first = client.post("/v1/groups/g/members", json={"topics": ["orders"], "member_id": "client-chosen-1"}).json()
    again = client.post("/v1/groups/g/members", json={"topics": ["orders"], "member_id": "client-chosen-1"}).json()
    assert first == again and first["member_id"] == "client-chosen-1"
    assert len(describe(client, "g")["members"]) == 1


def test_a_new_subscription_moves_partitions_between_topics(client: TestClient) -> None:
    create_topic(client, "orders", 2)
    create_topic(client, "refunds", 2)
    a = Member.join(client, "g", ["orders"])
    body = client.post(
        f"/v1/groups/g/members/{a.member_id}/heartbeat",
        json={
            "member_epoch": a.member_epoch,
            "owned": [{"topic": "orders", "partition": p} for p in range(2)],
            "topics": ["refunds"],
        },
    ).json()
    # refunds are free, so granted at once; orders are revoked and still held until a lets go.
    assert body["assignment"] == [{"topic": "refunds", "partition": p} for p in range(2)]
    assert body["state"] == "UNREVOKED_PARTITIONS"
    assert set(holders(client, "g")) == {("orders", 0), ("orders", 1), ("refunds", 0), ("refunds", 1)}
    a.member_epoch, a.assignment = body["member_epoch"], {("refunds", 0), ("refunds", 1)}
    assert a.beat()["state"] == "STABLE"
    assert set(holders(client, "g")) == {("refunds", 0), ("refunds", 1)}


def test_listing_and_describing_groups(client: TestClient) -> None:
    create_topic(client, "orders", 2)
    client.post("/v1/topics/orders/messages", json={"messages": [{"value": i, "partition": 0} for i in range(5)]})
    assert (
        client.post(
            "/v1/groups/v1-style/offsets", json={"offsets": [{"topic": "orders", "partition": 0, "offset": 2}]}
        ).status_code
        == 200
    )
    a = Member.join(client, "live", ["orders"])
    assert a.commit({("orders", 0): 4}).status_code == 200
    listed = {g["group"]: g for g in client.get("/v1/groups").json()["groups"]}
    assert listed["v1-style"] == {"group": "v1-style", "state": "EMPTY", "members": 0, "lag": 3}
    assert listed["live"] == {"group": "live", "state": "STABLE", "members": 1, "lag": 1}
    view = describe(client, "live")
    assert view["offsets"] == [{"topic": "orders", "partition": 0, "offset": 4, "metadata": None, "lag": 1}]
    assert view["members"][0]["assignment"] == [
        {"topic": "orders", "partition": 0},
        {"topic": "orders", "partition": 1},
    ]
    assert describe(client, "v1-style")["members"] == []
    a.leave()
    assert describe(client, "live")["state"] == "EMPTY"
    missing = client.get("/v1/groups/nobody")
    assert missing.status_code == 404 and error_code(missing) == "GROUP_NOT_FOUND"


BAD_INPUT = [
    ("/v1/groups/g/members", {"topics": ["nope"]}, 404, "TOPIC_NOT_FOUND"),
    ("/v1/groups/g/members", {"topics": ["orders"], "session_timeout_ms": 99}, 422, "INVALID_SESSION_TIMEOUT"),
    ("/v1/groups/g/members", {"topics": ["orders"], "session_timeout_ms": 300_001}, 422, "INVALID_SESSION_TIMEOUT"),
    ("/v1/groups/g/members", {"topics": ["orders"], "session_timeout_ms": 0}, 422, "VALIDATION_ERROR"),
    ("/v1/groups/g/members", {"topics": []}, 422, "VALIDATION_ERROR"),
    ("/v1/groups/g/members", {"topics": ["orders"], "member_id": "x" * 65}, 422, "VALIDATION_ERROR"),
    ("/v1/groups/g/members/nobody/heartbeat", {"member_epoch": 1}, 404, "UNKNOWN_MEMBER"),
    ("/v1/groups/never-joined/members/nobody/heartbeat", {"member_epoch": 1}, 404, "UNKNOWN_MEMBER"),
    ("/v1/groups/g/members/nobody/heartbeat", {"member_epoch": -1}, 422, "VALIDATION_ERROR"),
    (
        "/v1/groups/g/offsets",
        {"offsets": [{"topic": "orders", "partition": 0, "offset": 0}], "member_id": "m"},
        422,
        "VALIDATION_ERROR",
    ),
]


def test_bad_input_is_refused_and_changes_nothing(client: TestClient) -> None:
    create_topic(client, "orders", 1)
    member = Member.join(client, "g", ["orders"])
    for path, body, status, code in BAD_INPUT:
        response = client.post(path, json=body)
        assert (response.status_code, error_code(response)) == (status, code), (path, body, response.text)
    view = describe(client, "g")
    assert [m["member_id"] for m in view["members"]] == [member.member_id]  # nothing else joined or left
    assert view["state"] == "STABLE" and view["offsets"] == []


def test_a_stale_epoch_is_fenced_and_an_unknown_member_cannot_leave(client: TestClient) -> None:
    create_topic(client, "orders", 2)
    a = Member.join(client, "g", ["orders"])
    b = Member.join(client, "g", ["orders"])
    stale = a.member_epoch
    a.beat(let_go=False)
    assert a.member_epoch > stale
    response = client.post(f"/v1/groups/g/members/{a.member_id}/heartbeat", json={"member_epoch": stale, "owned": []})
    assert (response.status_code, error_code(response)) == (409, "FENCED_MEMBER_EPOCH")
    assert ("orders", 1) in holders(client, "g") or ("orders", 0) in holders(client, "g")  # nothing was released
    assert error_code(client.delete("/v1/groups/g/members/nobody")) == "UNKNOWN_MEMBER"
    assert client.delete("/v1/groups/g/members/nobody").status_code == 404
    b.beat()


def test_the_group_survives_a_restart(settings: Settings) -> None:
    with TestClient(create_app(settings)) as client:
        create_topic(client, "orders", 2)
        a = Member.join(client, "g", ["orders"])
        epoch, assignment = a.member_epoch, a.assignment
    with TestClient(create_app(settings)) as client:
        a.client = client
        a.beat()
        assert (a.member_epoch, a.assignment) == (epoch, assignment)
        assert describe(client, "g")["state"] == "STABLE"


def test_group_metrics(client: TestClient) -> None:
    create_topic(client, "orders", 2)
    a = Member.join(client, "metered", ["orders"])
    a.commit({("orders", 0): 0}, epoch=a.member_epoch + 5)
    text = client.get("/metrics").text
    assert 'halfmq_consumer_group_members{group="metered"} 1.0' in text
    assert 'halfmq_consumer_group_rebalances_total{reason="join"}' in text
    assert 'halfmq_consumer_group_fenced_commits_total{kind="offsets"}' in text
    a.leave()
    assert 'halfmq_consumer_group_members{group="metered"}' not in client.get("/metrics").text
