"""Helpers for the consumer-group tests: a member that heartbeats like a well-behaved client."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import Connection, update

from half_store.storage.schema import group_members

Partition = tuple[str, int]


@dataclass
class Member:
    """One member: ``beat()`` reports what it holds and takes the answer, like the SDK does."""

    client: TestClient
    group: str
    member_id: str
    member_epoch: int
    assignment: set[Partition] = field(default_factory=set)
    # What it still holds: its assignment, plus revoked partitions it has not let go yet.
    held: set[Partition] = field(default_factory=set)

    @classmethod
    def join(cls, client: TestClient, group: str, topics: list[str], **extra: Any) -> Member:
        response = client.post(f"/v1/groups/{group}/members", json={"topics": topics, **extra})
        assert response.status_code == 200, response.text
        body = response.json()
        member = cls(client, group, body["member_id"], body["member_epoch"])
        member._take(body)
        return member

    def beat(self, *, let_go: bool = True) -> dict[str, Any]:
        """Heartbeat; with ``let_go`` it has given up what was revoked before this call."""
        if let_go:
            self.held = set(self.assignment)
        owned = [{"topic": t, "partition": p} for t, p in sorted(self.held)]
        response = self.client.post(
            f"/v1/groups/{self.group}/members/{self.member_id}/heartbeat",
            json={"member_epoch": self.member_epoch, "owned": owned},
        )
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        self._take(body)
        return body

    def _take(self, body: dict[str, Any]) -> None:
        self.member_epoch = body["member_epoch"]
        self.assignment = {(p["topic"], p["partition"]) for p in body["assignment"]}
        self.held |= self.assignment

    def commit(self, offsets: dict[Partition, int], epoch: int | None = None) -> Any:
        return self.client.post(
            f"/v1/groups/{self.group}/offsets",
            json={
                "offsets": [{"topic": t, "partition": p, "offset": o} for (t, p), o in offsets.items()],
                "member_id": self.member_id,
                "member_epoch": self.member_epoch if epoch is None else epoch,
            },
        )

    def leave(self) -> None:
        assert self.client.delete(f"/v1/groups/{self.group}/members/{self.member_id}").status_code == 204


def describe(client: TestClient, group: str) -> dict[str, Any]:
    response = client.get(f"/v1/groups/{group}")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def holders(client: TestClient, group: str) -> dict[Partition, str]:
    """Who holds each partition (assigned or revoking); fails if any partition has two holders."""
    counted: Counter[Partition] = Counter()
    found: dict[Partition, str] = {}
    for member in describe(client, group)["members"]:
        for p in member["assignment"] + member["revoking"]:
            key = (p["topic"], p["partition"])
            counted[key] += 1
            found[key] = member["member_id"]
    assert all(n == 1 for n in counted.values()), f"partitions with two holders: {counted}"
    return found


def lapse(client: TestClient, group: str, member_id: str) -> None:
    """Make a member's session lapse now, as if it had stopped heartbeating long ago."""

    def unit(conn: Connection) -> None:
        conn.execute(
            update(group_members)
            .where(group_members.c.group_id == group, group_members.c.member_id == member_id)
            .values(last_heartbeat_at=0, expires_at=0)
        )

    client.portal.call(client.app.state.broker.store.write, unit)  # type: ignore[union-attr,attr-defined]


def settle(*members: Member, rounds: int = 5) -> None:
    """Heartbeat every member in turn until the group is stable (a few rounds at most)."""
    for _ in range(rounds):
        states = [m.beat()["state"] for m in members]
        if all(s == "STABLE" for s in states):
            return
    raise AssertionError("the group did not settle")
