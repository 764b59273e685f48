"""A share-group consumer process for the reliability tests: ``python -m tests.support.share_worker``.

It receives through one broker process and acknowledges through another (any process
accepts any receipt), and writes one JSON line per delivery and per acknowledgement
to ``--log`` (flushed at once, so a SIGKILL loses at most the line being written).
What it does with a message depends on the message's ``id``, so the test knows what
to expect: ids divisible by 11 are rejected, by 13 always released (they reach the
dead-letter topic after the last allowed delivery), odd ones released on their first
delivery, everything else accepted. ``--slow`` seconds of work per message make a
process that a test can kill while it holds locks.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from typing import IO, Any

from sdk import ReceivedMessage, ShareConsumer


def decide(message: ReceivedMessage) -> str:
    ident = int(message.value["id"])
    if ident % 11 == 0:
        return "REJECT"
    if ident % 13 == 0 or (ident % 2 == 1 and message.delivery_count == 1):
        return "RELEASE"
    return "ACCEPT"


def write(log: IO[str], **entry: Any) -> None:
    log.write(json.dumps(entry) + "\n")
    log.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--receive-url", required=True)
    parser.add_argument("--ack-url", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--lock-ms", type=int, required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--slow", type=float, default=0.0)
    args = parser.parse_args(argv)
    stopping = False

    def stop(_signal: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    # Locks are not renewed: the test checks delivery times against lock_ms exactly.
    receiver = ShareConsumer(args.receive_url, args.group, args.topic, max_messages=10, lock_ms=args.lock_ms,
                             auto_extend=False)
    acker = ShareConsumer(args.ack_url, args.group, args.topic, lock_ms=args.lock_ms, auto_extend=False)
    with open(args.log, "a") as log, receiver, acker:
        while not stopping:
            for message in receiver.receive(timeout=0.5):
                write(log, event="delivery", worker=args.name, id=message.value["id"], partition=message.partition,
                      offset=message.offset, delivery_count=message.delivery_count,
                      lock_expires_ms=message.lock_expires_ms, receipt=message.receipt)
                time.sleep(args.slow)
                kind = decide(message)
                sent_at_ms = time.time() * 1000
                receiver.forget(message)
                write(log, event="acking", worker=args.name, id=message.value["id"], receipt=message.receipt, kind=kind)
                [result] = acker.release(message) if kind == "RELEASE" else (
                    acker.reject(message) if kind == "REJECT" else acker.ack(message)
                )
                write(log, event="ack", worker=args.name, id=message.value["id"], receipt=message.receipt, kind=kind,
                      ok=result.ok, error=result.error, sent_at_ms=sent_at_ms)
    return 0


if __name__ == "__main__":
    sys.exit(main())
