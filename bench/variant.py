"""Start the unmodified broker with one internal knob changed, for diagnosis experiments only.

``python -m bench.variant --writer-threads N`` runs ``halfmq serve`` with the group-commit
writer's thread count forced to N (the broker picks 1 on SQLite and 4 on PostgreSQL
and has no setting for it). Nothing in the broker's code is changed: the
``Store`` constructor is wrapped in this process before the app starts. Today's ``Store``
has no writer-thread count: this runs against the broker of commit 67ffdde, through
``bench/experiments.py --broker-root`` (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
from typing import Any


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--writer-threads", type=int, default=None)
    args, rest = parser.parse_known_args()
    if args.writer_threads is not None:
        from half_store.storage import store

        old_store: Any = store.Store  # the Store of commit 67ffdde, whose constructor took writer_threads
        original = old_store.__init__

        def patched(self: Any, database: Any, *, writer_threads: int | None = None) -> None:
            original(self, database, writer_threads=args.writer_threads)

        old_store.__init__ = patched
    from app.cli import cli

    cli(args=rest or ["serve"], prog_name="bench.variant")


if __name__ == "__main__":
    main()
