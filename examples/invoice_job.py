"""Consume-transform-produce, exactly once: ``orders`` → ``invoices`` (halfmq Mode 2).

Each batch of orders becomes invoices inside one Kafka-style transaction that also
carries the consumer group's new offsets, so the invoices appear and the orders
count as consumed together - or, if anything fails, neither happens and the batch
is read again. Kill the job at any point and restart it: no invoice is lost or
written twice (read ``invoices`` with ``read_committed``).

    python examples/invoice_job.py --url http://127.0.0.1:8080 --idle-exit 5
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # running as a script from a checkout: make `sdk` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sdk import Client, Consumer, Message, ProducerFencedError, TransactionalProducer

SOURCE, SINK, GROUP = "orders", "invoices", "invoice-job"
VAT = 0.2


def invoice_for(order: Message) -> dict[str, object]:
    """The transformation: an order event becomes an invoice."""
    value = order.value
    return {
        "order_id": value["order_id"],
        "customer": value["customer"],
        "net": value["amount"],
        "total": round(value["amount"] * (1 + VAT), 2),
        "source": f"{order.topic}/{order.partition}/{order.offset}",
    }


def run(url: str, transactional_id: str, idle_exit: float | None) -> int:
    """Process batches until idle for ``idle_exit`` seconds (forever when ``None``)."""
    with Client(url) as client:
        client.create_topic(SOURCE, 3, exist_ok=True)
        client.create_topic(SINK, 3, exist_ok=True)
    invoices = 0
    with TransactionalProducer(url, transactional_id) as producer, Consumer(url, GROUP, SOURCE) as consumer:
        # Fences any older instance with the same transactional id and finishes
        # its open transaction, so a restarted job never races its predecessor.
        producer.init_transactions()
        idle_since = time.monotonic()
        while idle_exit is None or time.monotonic() - idle_since < idle_exit:
            start = consumer.positions()
            batch = consumer.poll(timeout=1.0, max_messages=100)
            if not batch:
                continue
            idle_since = time.monotonic()
            try:
                with producer.transaction():
                    for order in batch:
                        producer.send(SINK, invoice_for(order), key=order.key)
                    producer.send_offsets_to_transaction(consumer.positions(), GROUP)
            except ProducerFencedError:
                print("another instance took over this transactional id; stopping")
                return 1
            except Exception as exc:  # noqa: BLE001 - whatever failed, the batch is read again
                # The transaction was aborted: nothing was written and the group's
                # offsets did not move, so read the same batch again.
                print(f"batch failed ({exc}); retrying it")
                for (topic, partition), offset in start.items():
                    consumer.seek(topic, partition, offset)
                continue
            invoices += len(batch)
            print(f"invoiced {len(batch)} order(s) (total {invoices})")
    print(f"idle for {idle_exit}s; {invoices} invoice(s) written")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="http://127.0.0.1:8080", help="broker URL")
    parser.add_argument("--transactional-id", default="invoice-job-0", help="stable id of this job instance")
    parser.add_argument("--idle-exit", type=float, default=None, help="stop after this many idle seconds")
    args = parser.parse_args(argv)
    return run(args.url, args.transactional_id, args.idle_exit)


if __name__ == "__main__":
    sys.exit(main())
