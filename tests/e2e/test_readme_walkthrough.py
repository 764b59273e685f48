"""The README's curl walk-through runs as written against a real broker, on both databases.

The block is taken from README.md itself, so the test fails as soon as the README and the
broker disagree. Every curl in it runs with ``--fail-with-body``: any error status stops the
script, and the failing command and its answer are in the assertion message.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.broker_process import REPO_ROOT, BrokerProcess

pytestmark = pytest.mark.e2e

README_URL = "B=http://127.0.0.1:8080"

# Every curl of the block stops the script on an error status (and prints the body),
# gives up after a while instead of hanging, and ends its answer with a newline so that
# the answers come out one per line.
STRICT_CURL = """set -euo pipefail -x
curl() { command curl --fail-with-body --show-error --max-time 30 -w '\\n' "$@"; }
"""


def readme_curl_block() -> str:
    readme = (REPO_ROOT / "README.md").read_text()
    section = readme[readme.index("## A walk through with curl") :]
    found = re.search(r"```bash\n(.*?)```", section, re.DOTALL)
    assert found, "the README's curl section has no bash block"
    return found.group(1)


def answers(stdout: str) -> list[Any]:
    """The JSON answers the script printed, in order."""
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


@pytest.mark.skipif(shutil.which("jq") is None, reason="jq is not installed (the README's block uses it)")
@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_the_readme_walkthrough_runs_as_written(database_url: str, tmp_path: Path) -> None:
    block = readme_curl_block()
    assert README_URL in block, "the block no longer starts by naming the broker's URL"
    with BrokerProcess(database_url, log_path=tmp_path / "broker.log") as broker:
        script = STRICT_CURL + block.replace(README_URL, f"B={broker.url}", 1)
        done = subprocess.run(
            ["bash", "-c", script], capture_output=True, text=True, timeout=120, cwd=tmp_path, check=False
        )
        assert done.returncode == 0, f"{done.stdout}\n{done.stderr}\nbroker log:\n{broker.log_tail()}"

    bodies = answers(done.stdout)
    assert bodies[0] == {"name": "orders", "partitions": 3}
    # What the comments of the block say: c-1 went to partition 2, and the fetch there shows it.
    assert bodies[1] == {"offsets": [{"partition": 2, "offset": 0}]}
    first_fetch = bodies[2]["messages"]
    assert [(m["key"], m["value"]) for m in first_fetch] == [("c-1", {"total": 12})]

    committed_half = next(b for b in bodies if b.get("state") == "COMMITTED" and "message_id" in b)
    assert committed_half["topic"] == "orders" and committed_half["offset"] >= 0
    described = next(b for b in bodies if "check_times" in b)
    assert described["state"] == "COMMITTED"

    fetches_of_partition_0 = [b for b in bodies if "next_offset" in b][1:]
    before_commit, after_commit = fetches_of_partition_0
    assert before_commit["messages"] == []  # read_committed holds the open transaction back
    assert [m["value"] for m in after_commit["messages"]] == [1]

    group_offsets = next(b for b in bodies if set(b) == {"offsets"} and "lag" in (b["offsets"] or [{}])[0])
    assert [(o["topic"], o["partition"], o["offset"]) for o in group_offsets["offsets"]] == [("orders", 2, 1)]

    implicit = next(b for b in bodies if b.get("txn_id") and "duplicate" in b)
    ended = [b for b in bodies if set(b) == {"txn_id", "state"}]
    assert ended[-1] == {"txn_id": implicit["txn_id"], "state": "COMMITTED"}
    assert len(ended) == 2  # both transactions of the walk-through committed
