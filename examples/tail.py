"""Print a topic's messages: ``python examples/tail.py invoices [--uncommitted]``.

Uses a throw-away consumer group, so it always reads from the beginning and never
moves anyone's offsets.
"""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from pathlib import Path

if __package__ in (None, ""):  # running as a script from a checkout: make `sdk` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sdk import Consumer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("topic")
    parser.add_argument("--url", default="http://127.0.0.1:8080", help="broker URL")
    parser.add_argument("--uncommitted", action="store_true", help="read_uncommitted: include aborted/open data")
    args = parser.parse_args(argv)
    isolation = "read_uncommitted" if args.uncommitted else "read_committed"
    with Consumer(args.url, f"tail-{uuid.uuid4().hex}", args.topic, isolation) as consumer:
        while batch := consumer.poll(timeout=1.0):
            for m in batch:
                value = m.value if isinstance(m.value, bytes) else json.dumps(m.value)
                print(f"{m.topic}/{m.partition}@{m.offset} key={m.key} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
