"""Two broker processes on one PostgreSQL serve one consumer group.

Members join, heartbeat and leave through either process, concurrently. Every group change
is one transaction under the group's row lock, so both processes see one truth: throughout
the churn no partition is ever held by two members (sampled through both processes), and at
the end both describe the same balanced, stable group.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from tests.support.broker_process import BrokerProcess
from tests.support.databases import PostgresDatabases

pytestmark = pytest.mark.e2e

SETTINGS: dict[str, object] = {
    "group_min_session_timeout_ms": 500,
    "group_heartbeat_interval_ms": 100,
    "lease_seconds": 2,
}
PARTITIONS = 8


class MemberLoop:
    """A member heartbeating through one broker process on a thread, letting go of revoked partitions at once."""

    def __init__(self, url: str) -> None:
        self.http = httpx.Client(base_url=url, timeout=30)
        body = self.http.post("/v1/groups/g/members", json={"topics": ["orders"], "session_timeout_ms": 5000}).json()
        self.member_id, self.epoch = body["member_id"], body["member_epoch"]
        self.assignment = [(p["topic"], p["partition"]) for p in body["assignment"]]
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run)
        self.thread.start()

    def run(self) -> None:
        while not self.stop.wait(0.02):
            owned = [{"topic": t, "partition": p} for t, p in self.assignment]
            response = self.http.post(
                f"/v1/groups/g/members/{self.member_id}/heartbeat", json={"member_epoch": self.epoch, "owned": owned}
            )
            assert response.status_code == 200, response.text
            body = response.json()
            self.epoch = body["member_epoch"]
            self.assignment = [(p["topic"], p["partition"]) for p in body["assignment"]]

    def leave(self) -> None:
        self.stop.set()
        self.thread.join()
        assert self.http.delete(f"/v1/groups/g/members/{self.member_id}").status_code == 204
        self.http.close()


@pytest.fixture()
def two_brokers(
    postgres_databases: PostgresDatabases, start_broker: Callable[..., BrokerProcess]
) -> Iterator[tuple[BrokerProcess, BrokerProcess]]:
    url = postgres_databases.new()
    with ThreadPoolExecutor(2) as pool:
        a, b = pool.map(lambda _: start_broker(url, **SETTINGS), range(2))
    yield a, b


def holders(view: dict[str, Any]) -> Counter[tuple[str, int]]:
    return Counter((p["topic"], p["partition"]) for m in view["members"] for p in m["assignment"] + m["revoking"])


def test_two_processes_serve_one_group_without_two_owners(two_brokers: tuple[BrokerProcess, BrokerProcess]) -> None:
    a, b = two_brokers
    clients = [httpx.Client(base_url=p.url, timeout=30) for p in (a, b)]
    members: list[MemberLoop] = []
    samples = 0
    try:
        assert clients[0].post("/v1/topics", json={"name": "orders", "partitions": PARTITIONS}).status_code == 201
        members += [MemberLoop((a, b)[i % 2].url) for i in range(4)]
        deadline = time.monotonic() + 3
        churned = False
        while time.monotonic() < deadline:
            for client in clients:  # what either process says, at any moment: never two holders
                view = client.get("/v1/groups/g").json()
                assert all(n == 1 for n in holders(view).values()), view
                samples += 1
            if not churned and time.monotonic() > deadline - 2:
                members += [MemberLoop((b, a)[i % 2].url) for i in range(2)]  # two join ...
                for leaver in members[:2]:
                    leaver.leave()  # ... two leave
                members = members[2:]
                churned = True

        def settled() -> bool:
            views = [client.get("/v1/groups/g").json() for client in clients]
            return all(v["state"] == "STABLE" and len(v["members"]) == 4 for v in views) and views[0] == views[1]

        settle_by = time.monotonic() + 30
        while not settled():
            assert time.monotonic() < settle_by, clients[0].get("/v1/groups/g").json()
            time.sleep(0.05)
        view = clients[1].get("/v1/groups/g").json()
        assert sorted(len(m["assignment"]) for m in view["members"]) == [2, 2, 2, 2]
        assert set(holders(view)) == {("orders", p) for p in range(PARTITIONS)}
        assert samples > 10
    finally:
        for member in members:
            member.stop.set()
            member.thread.join()
            member.http.close()
        for client in clients:
            client.close()
