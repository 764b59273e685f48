"""What the core process loads: the checker's HTTP client, but not httpx's command-line client."""

from __future__ import annotations

import subprocess
import sys

from tests.support.broker_process import REPO_ROOT

_START_CORE = """
import runpy, sys
try:
    runpy.run_module("app.core", run_name="__main__")
except KeyError:  # no settings from a front: the core stops before serving, its imports done
    pass
print(",".join(sorted(name for name in ("httpx", "click", "rich") if name in sys.modules)))
"""


def test_the_core_loads_httpx_without_its_command_line_client() -> None:
    # click and rich (and the pygments they bring) are 6 MB of the core's memory that it never uses.
    done = subprocess.run(
        [sys.executable, "-c", _START_CORE], capture_output=True, text=True, timeout=60, check=True, cwd=REPO_ROOT
    )
    assert done.stdout.strip() == "httpx"
