"""py-spy against the broker process while a scenario runs, summarised into hot spots.

``py-spy record --format raw`` writes collapsed stacks (``frame;frame;… count``);
the summary gives the functions with the most samples on top of the stack (self)
and, for the broker's own code, the most samples anywhere in the stack (inclusive).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
_FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^:()]+)(?::\d+)?\)$")


def py_spy() -> str | None:
    found = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    return found if Path(found).exists() else None


def start(pid: int, output: Path, duration: float) -> subprocess.Popen[bytes] | None:
    binary = py_spy()
    if binary is None:
        return None
    output.parent.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(
        [binary, "record", "-p", str(pid), "-d", str(max(1, int(duration))), "-r", "97", "-f", "raw", "-o", str(output),
         "--nonblocking"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _name(frame: str) -> str:
    match = _FRAME.match(frame.strip())
    if not match:
        return frame.strip()
    path = match["file"]
    for marker in ("site-packages/", f"{REPO_ROOT}/", "lib/python3"):
        if marker in path:
            path = path.split(marker, 1)[1]
            break
    return f"{match['func']} ({path})"


def summarise(path: Path, top: int = 15) -> dict[str, object]:
    self_counts: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    if not path.exists():
        return {"samples": 0, "self": [], "inclusive": []}
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [_name(f) for f in stack.split(";") if f.strip()]
        if not frames:
            continue
        total += count
        self_counts[frames[-1]] += count
        for name in set(frames):
            inclusive[name] += count
    ours = ("app/", "half_store/", "checker/", "(sqlalchemy", "sqlalchemy/", "psycopg", "sqlite3", "pydantic", "fastapi/",
            "starlette/", "uvicorn/", "orjson")
    own = [(n, c) for n, c in inclusive.most_common() if any(p in n for p in ours)]
    return {
        "samples": total,
        "self": [(n, round(100 * c / total, 1)) for n, c in self_counts.most_common(top)] if total else [],
        "inclusive": [(n, round(100 * c / total, 1)) for n, c in own[: top * 2]] if total else [],
    }
