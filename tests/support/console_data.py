"""Data for the console to show: topics with messages, a group with lag, half messages, a hanging transaction.

Written through the broker's HTTP API only, like any client, so it works against any
broker the console can talk to. The browser test and the screenshot script share it.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx


@dataclass(frozen=True)
class ConsoleData:
    prepared_ids: tuple[str, ...]  # half messages still PREPARED, in the group "checkout"
    hanging_txn_id: str  # an open transaction of the transactional producer "etl-orders", on orders-1
    committed_txn_id: str
    groups_offered: bool  # the broker has consumer groups with members: "billing" has one
    share_groups_offered: bool  # the broker has share groups: "shipping" has received from orders


def offered(response: httpx.Response) -> bool:
    """False when the broker serves no such route (a feature of another branch, or an older broker)."""
    if response.status_code not in (404, 405):
        return True
    return response.json().get("error", {}).get("code") not in ("NOT_FOUND", "METHOD_NOT_ALLOWED")


def ok(response: httpx.Response) -> dict[str, object]:
    assert response.is_success, f"{response.request.method} {response.request.url}: {response.status_code} {response.text}"
    return response.json() if response.content else {}  # type: ignore[no-any-return]


def seed(url: str, *, hanging_timeout_ms: int = 600_000, prepared_immunity_seconds: float | None = None) -> ConsoleData:
    """Write the data; ``prepared_immunity_seconds`` keeps the checker off the prepared half messages."""
    with httpx.Client(base_url=url, timeout=10) as client:
        ok(client.post("/v1/topics", json={"name": "orders", "partitions": 3}))
        ok(client.post("/v1/topics", json={"name": "payments", "partitions": 1}))
        orders = [
            {
                "key": f"customer-{n % 7}",
                "value": {"order": 1000 + n, "amount": round(9.5 + n * 1.25, 2), "currency": "EUR"},
                "headers": {"source": "web"} if n % 3 == 0 else {},
            }
            for n in range(60)
        ]
        written = ok(client.post("/v1/topics/orders/messages", json={"messages": orders}))["offsets"]
        ends = {p: 1 + max(o["offset"] for o in written if o["partition"] == p) for p in {o["partition"] for o in written}}
        payments = [{"key": f"order-{1000 + n}", "value": f"captured {1000 + n}"} for n in range(12)]
        ok(client.post("/v1/topics/payments/messages", json={"messages": payments}))

        # A consumer group part of the way through orders: it has lag to show.
        commits = [{"topic": "orders", "partition": p, "offset": end // 2} for p, end in sorted(ends.items())]
        ok(client.post("/v1/groups/billing/offsets", json={"offsets": commits}))

        # A transaction that committed, and one left open by a transactional producer: it holds orders-1 back.
        committed = ok(client.post("/v1/transactions", json={}))["txn_id"]
        ok(client.post("/v1/topics/payments/partitions/0/messages", json={"messages": payments[:2], "txn_id": committed}))
        ok(client.post(f"/v1/transactions/{committed}/commit"))
        producer = ok(client.post("/v1/producers", json={"transactional_id": "etl-orders"}))
        hanging = ok(
            client.post(
                "/v1/transactions",
                json={**producer, "timeout_ms": hanging_timeout_ms},
            )
        )["txn_id"]
        ok(
            client.post(
                "/v1/topics/orders/partitions/1/messages",
                json={"messages": [{"key": "customer-1", "value": {"order": 2001, "amount": 42.0}}], "txn_id": hanging},
            )
        )

        # Half messages: three waiting for their producer, one committed, one rolled back.
        def prepare(n: int) -> str:
            body = {"topic": "orders", "producer_group": "checkout", "key": f"cart-{n}", "value": {"cart": n, "total": 30 + n}}
            if prepared_immunity_seconds is not None:
                body["check_immunity_seconds"] = prepared_immunity_seconds
            return str(ok(client.post("/v1/half-messages", json=body))["message_id"])

        prepared = tuple(prepare(n) for n in range(3))
        ok(client.post(f"/v1/half-messages/{prepare(3)}/commit"))
        ok(client.post(f"/v1/half-messages/{prepare(4)}/rollback"))

        # Where the broker has them: a live member of billing, and a share group part of the way through orders.
        joined = client.post("/v1/groups/billing/members", json={"topics": ["orders"]})
        groups_offered = offered(joined)
        if groups_offered:
            ok(joined)
        received = client.post("/v1/share-groups/shipping/receive", json={"topic": "orders", "max_messages": 6})
        share_groups_offered = offered(received)
        if share_groups_offered:
            receipts = [m["receipt"] for m in ok(received)["messages"]]  # type: ignore[attr-defined]
            acks = [{"receipt": r, "type": "ACCEPT"} for r in receipts[:4]] + [{"receipt": receipts[4], "type": "REJECT"}]
            ok(client.post("/v1/share-groups/shipping/acks", json={"acks": acks}))
        return ConsoleData(prepared, str(hanging), str(committed), groups_offered, share_groups_offered)
