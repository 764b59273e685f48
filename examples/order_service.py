"""Order service: a local SQLite ``orders`` table kept in step with an ``orders`` topic.

The RocketMQ transactional-message pattern (halfmq Mode 1):

1. the order event is stored on the broker as a *half message* (invisible to consumers);
2. the local transaction inserts the order row, together with the message's
   ``transaction_id``, in one SQLite transaction;
3. the half message is committed if the row was written, rolled back if not.

If the service dies (or cannot reach the broker) between 2 and 3, the broker's
checker later asks ``check_local_transaction``, which looks the ``transaction_id``
up in the table: the event is published exactly when the order exists.

Run a broker first (see examples/README.md), then::

    python examples/order_service.py --url http://127.0.0.1:8080 --db orders.db --orders 8
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import time
import uuid
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # running as a script from a checkout: make `sdk` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sdk import Client, LocalTransactionState, Message, TransactionListener, TransactionProducer

TOPIC = "orders"
PRODUCER_GROUP = "order-service"

SCHEMA = """
CREATE TABLE IF NOT EXISTS orders (
    order_id       TEXT PRIMARY KEY,
    customer       TEXT NOT NULL,
    amount         REAL NOT NULL CHECK (amount > 0),
    transaction_id TEXT NOT NULL UNIQUE
)
"""


class OrderListener(TransactionListener):
    """Writes the order row in the local transaction; answers checks from the table."""

    def __init__(self, db_path: Path) -> None:
        self.db_path = db_path
        with self._connect() as conn:
            conn.execute(SCHEMA)

    def _connect(self) -> sqlite3.Connection:
        # One connection per call: checks arrive on the callback server's threads.
        return sqlite3.connect(self.db_path, timeout=10)

    def execute_local_transaction(self, message: Message, arg: Any) -> LocalTransactionState:
        """Insert the order; invalid orders fail the CHECK constraint and roll back."""
        order = message.value
        try:
            with self._connect() as conn:  # commits on success, rolls back on exception
                conn.execute(
                    "INSERT INTO orders (order_id, customer, amount, transaction_id) VALUES (?, ?, ?, ?)",
                    (order["order_id"], order["customer"], order["amount"], message.transaction_id),
                )
        except sqlite3.IntegrityError as exc:
            print(f"  order {order['order_id'][:8]} rejected locally ({exc}); rolling the message back")
            return LocalTransactionState.ROLLBACK
        if arg == "lose-the-answer":
            # Simulate dying right after the local commit: the broker never hears
            # COMMIT, so its checker will ask check_local_transaction below.
            print(f"  order {order['order_id'][:8]} stored, but the service 'crashed' before committing")
            return LocalTransactionState.UNKNOWN
        return LocalTransactionState.COMMIT

    def check_local_transaction(self, message: Message) -> LocalTransactionState:
        """The broker asks about an unresolved order event: does its row exist?"""
        # The broker only checks messages older than its transaction timeout, by
        # which time the local transaction has long finished, so "no row" means
        # it rolled back.
        with self._connect() as conn:
            row = conn.execute("SELECT 1 FROM orders WHERE transaction_id = ?", (message.transaction_id,)).fetchone()
        state = LocalTransactionState.COMMIT if row else LocalTransactionState.ROLLBACK
        print(f"  back-check for transaction {message.transaction_id[:8]} (check #{message.check_times}): {state.value}")
        return state


def demo_orders(count: int) -> list[tuple[dict[str, Any], str | None]]:
    """``count`` orders: every 4th is invalid (amount 0), every 5th 'crashes' after its local commit."""
    orders = []
    for i in range(count):
        order = {"order_id": uuid.uuid4().hex, "customer": f"customer-{i % 3}", "amount": 0.0 if i % 4 == 3 else 10.0 + i}
        orders.append((order, "lose-the-answer" if i % 5 == 4 else None))
    return orders


def wait_until_resolved(client: Client, message_ids: list[str], timeout: float) -> None:
    """Wait for the checker to settle the half messages we left unresolved."""
    deadline = time.monotonic() + timeout
    pending = list(message_ids)
    while pending and time.monotonic() < deadline:
        pending = [m for m in pending if client.get_half_message(m).state == "PREPARED"]
        time.sleep(0.2)
    for message_id in message_ids:
        print(f"  half message {message_id[:8]} is now {client.get_half_message(message_id).state}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="http://127.0.0.1:8080", help="broker URL")
    parser.add_argument("--db", type=Path, default=Path("orders.db"), help="the service's SQLite database")
    parser.add_argument("--orders", type=int, default=8, help="how many demo orders to place")
    parser.add_argument("--poll", action="store_true", help="poll for back-checks instead of serving them")
    parser.add_argument("--wait", type=float, default=60.0, help="seconds to wait for back-checks")
    args = parser.parse_args(argv)

    with Client(args.url) as client:
        client.create_topic(TOPIC, 3, exist_ok=True)
        listener = OrderListener(args.db)
        callback_port = None if args.poll else 0
        with TransactionProducer(args.url, PRODUCER_GROUP, listener, callback_port=callback_port) as producer:
            print(f"order service up ({'polling' if args.poll else producer.callback_url}); placing orders")
            unresolved = []
            for order, behaviour in demo_orders(args.orders):
                message = Message(TOPIC, order, key=order["customer"])
                result = producer.send_message_in_transaction(message, behaviour)
                print(f"order {order['order_id'][:8]} amount={order['amount']}: {result.local_state.value}")
                if result.local_state is LocalTransactionState.UNKNOWN:
                    unresolved.append(result.message_id)
            if unresolved:
                print(f"waiting for the broker to back-check {len(unresolved)} order(s)...")
                wait_until_resolved(client, unresolved, args.wait)
    return 0


if __name__ == "__main__":
    sys.exit(main())
