"""One consumer of a group, as its own process, for the delivery-guarantee proofs.

    python -m tests.e2e.group_worker --url URL --group G --topic T --delivery at_least_once --record FILE

It consumes until SIGTERM (then closes: leaves the group) or SIGKILL. What it did goes
to ``--record``, one message id a line, appended and flushed as it happens, so a killed
worker leaves behind exactly what it had done:

- ``at_most_once``: the ids ``poll()`` handed out;
- ``at_least_once``: the ids it finished processing;
- ``exactly_once``: nothing; its outputs go to ``--output-topic`` in its transactions.

Processing takes ``--delay`` seconds a batch, so a test can kill or stop it mid-run.
"""

from __future__ import annotations

import argparse
import os
import signal
import time
from typing import Any

from sdk import Consumer, Message, TransactionalProducer
from sdk.errors import ProducerFencedError


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--delivery", required=True)
    parser.add_argument("--record", required=True)
    parser.add_argument("--output-topic")
    parser.add_argument("--session-timeout-ms", type=int, default=1000)
    parser.add_argument("--max-messages", type=int, default=5)
    parser.add_argument("--delay", type=float, default=0.05)
    args = parser.parse_args()

    stopping = False

    def stop(_signum: int, _frame: Any) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    record = os.open(args.record, os.O_WRONLY | os.O_CREAT | os.O_APPEND)

    def note(batch: list[Message]) -> None:
        if batch:
            os.write(record, "".join(f"{m.value['id']}\n" for m in batch).encode())

    consumer = Consumer(
        args.url, args.group, args.topic, delivery=args.delivery, session_timeout_ms=args.session_timeout_ms,
        max_poll_messages=args.max_messages, long_poll_slice=0.1,
    )
    try:
        if args.delivery == "exactly_once":

            def new_producer() -> TransactionalProducer:
                producer = TransactionalProducer(args.url, f"{args.group}-{os.getpid()}", transaction_timeout_ms=2000)
                producer.init_transactions()
                return producer

            def transform(message: Message) -> Message:
                time.sleep(args.delay / args.max_messages)  # the batch takes --delay: a kill lands mid-transaction
                return Message(args.output_topic, {"id": message.value["id"]})

            producer = new_producer()
            while not stopping:
                try:
                    consumer.process_exactly_once(producer, transform, timeout=0.2)
                except ProducerFencedError:
                    # A batch that outlived the short transaction timeout (a loaded machine, or the
                    # zombie) was aborted and the producer fenced; the batch was rewound. As a Kafka
                    # application does: a new producer for the same transactional id, and go on.
                    producer.close()
                    producer = new_producer()
            producer.close()
        else:
            while not stopping:
                batch = consumer.poll(timeout=0.2)  # at-least-once: commits what the previous poll returned
                if args.delivery == "at_most_once":
                    note(batch)  # handed out (already committed)
                time.sleep(args.delay if batch else 0)
                if args.delivery == "at_least_once":
                    note(batch)  # processed (committed by the next poll)
    finally:
        consumer.close()
        os.close(record)


if __name__ == "__main__":
    main()
