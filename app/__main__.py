"""``python -m app`` starts the broker, like ``halfmq serve``; with arguments it is the ``halfmq`` CLI."""

import sys

from app.cli import cli

if __name__ == "__main__":
    cli(args=sys.argv[1:] or ["serve"], prog_name="python -m app")
