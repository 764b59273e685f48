"""Run wrk (C, event-driven, LuaJIT scripts in bench/lua/) against a server and parse its summary."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

LUA_DIR = Path(__file__).resolve().parent / "lua"


@dataclass
class WrkResult:
    requests: int
    seconds: float
    errors: int
    p50_ms: float
    p99_ms: float
    raw: dict[str, float]

    @property
    def rate(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0


def available() -> bool:
    return shutil.which("wrk") is not None


WRK_THREADS = 2


def run(url: str, script: str, args: list[str], *, connections: int, duration: float, threads: int = WRK_THREADS) -> WrkResult:
    """``wrk -t{threads} -c{connections} -d{duration}s -s bench/lua/{script} url -- args``."""
    command = [
        "wrk",
        f"-t{threads}",
        f"-c{connections}",
        f"-d{max(1, round(duration))}s",
        "--timeout",
        "30s",
        "-s",
        str(LUA_DIR / script),
        url,
        "--",
        *args,
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=duration + 120, check=False)
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("WRKJSON ")), None)
    if line is None:
        raise RuntimeError(f"wrk failed ({done.returncode}): {done.stdout}\n{done.stderr}")
    raw = json.loads(line[len("WRKJSON ") :])
    errors = int(raw["errors_connect"] + raw["errors_read"] + raw["errors_write"] + raw["errors_status"] + raw["errors_timeout"])
    return WrkResult(
        requests=int(raw["requests"]),
        seconds=raw["duration_us"] / 1e6,
        errors=errors,
        p50_ms=raw["p50_us"] / 1000,
        p99_ms=raw["p99_us"] / 1000,
        raw=raw,
    )


def post(
    url: str, path: str, body: bytes, *, connections: int, duration: float, authorization: str | None = None
) -> WrkResult:
    with tempfile.NamedTemporaryFile(prefix="halfmq-wrk-", suffix=".json", delete=False) as file:
        file.write(body)
    args = [path, file.name] + ([authorization] if authorization else [])
    try:
        return run(url, "post.lua", args, connections=connections, duration=duration)
    finally:
        Path(file.name).unlink(missing_ok=True)


def fetch(
    url: str, topic: str, partitions: int, high: int, max_messages: int, *,
    connections: int, duration: float, accept: str = "",
) -> WrkResult:
    return run(
        url,
        "fetch.lua",
        [topic, str(partitions), str(high), str(max_messages), *([accept] if accept else [])],
        connections=connections,
        duration=duration,
    )
