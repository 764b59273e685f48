"""``python -m app.core``: the core process, started by the HTTP front (not by hand)."""

import sys

# httpx imports its command-line client whenever click and rich are installed, as they are
# for halfmq's own CLI: 6 MB of click and rich in a process that only makes the
# checker's callback requests. A None entry makes httpx take its "not installed" branch.
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]

from app.core.server import main  # noqa: E402 - after the entry above, which must come first

main()
