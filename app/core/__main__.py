"""``python -m app.core``: the core process, started by the HTTP front (not by hand)."""

from app.core.server import main

main()
