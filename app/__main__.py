"""``python -m app`` starts the broker, like ``halfmq serve``; with arguments it is the ``halfmq`` CLI."""

import sys

if __name__ == "__main__":
    if len(sys.argv) == 1:
        from app.serving import serve_from_environment

        sys.exit(serve_from_environment())
    from app.cli import cli

    cli(args=sys.argv[1:], prog_name="python -m app")
