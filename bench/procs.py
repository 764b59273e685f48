"""Server processes the benchmark starts (broker, ceiling app) and RSS sampling."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
# The broker source tree to measure: this repository, or an exported commit (--broker-root).
BROKER_ROOT = Path(os.environ.get("HALFMQ_BENCH_BROKER_ROOT") or REPO_ROOT)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def process_tree(pid: int) -> list[int]:
    """``pid`` and its descendants (the broker's core process is a child of its HTTP front)."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                parent = int(stat.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        parents.setdefault(parent, []).append(int(entry))
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        todo.extend(parents.get(current, []))
    return tree


def _own_rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def rss_mb(pid: int) -> float:
    """Resident set size of ``pid`` and its descendants in MiB (sum of VmRSS), 0 if it is gone."""
    return sum(_own_rss_mb(p) for p in process_tree(pid))


class Server:
    """One server process on 127.0.0.1: ``python -m app`` (the broker) or the ceiling app."""

    def __init__(self, argv: list[str], env: dict[str, str], port: int, name: str) -> None:
        self.argv = argv
        self.env = env
        self.port = port
        self.name = name
        self.log_path = Path(tempfile.mkstemp(prefix=f"halfmq-bench-{name}-", suffix=".log")[1])
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def start(self, timeout: float = 60.0) -> Server:
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(self.argv, cwd=BROKER_ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.process.returncode}: {self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/readyz", timeout=1.0) as answer:
                    if answer.status == 200:
                        return self
            except OSError:
                pass
            time.sleep(0.1)
        self.stop()
        raise TimeoutError(f"{self.name} not ready after {timeout}s: {self.log_tail()}")

    def log_tail(self, chars: int = 3000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:]

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _base_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HALFMQ_")}
    # The broker's packages from BROKER_ROOT first; `bench` itself from this repository.
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys([str(BROKER_ROOT), str(REPO_ROOT), env.get("PYTHONPATH", "")]))
    return env


def broker_source() -> dict[str, object]:
    """Which broker code is measured: commit and uncommitted changes of its packages (read-only git)."""
    info: dict[str, object] = {"root": str(BROKER_ROOT)}
    marker = BROKER_ROOT / ".bench-commit"
    if marker.exists():
        info["commit"] = marker.read_text().strip()
        info["dirty"] = []
        return info
    try:
        info["commit"] = subprocess.run(
            ["git", "-C", str(BROKER_ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=False
        ).stdout.strip()
        status = subprocess.run(
            ["git", "-C", str(BROKER_ROOT), "status", "--porcelain", "--", "app", "half_store", "checker", "migrations"],
            capture_output=True, text=True, check=False,
        ).stdout
        info["dirty"] = [line[3:] for line in status.splitlines()]
    except OSError:
        pass
    return info


def broker(database_url: str, **settings: object) -> Server:
    """The broker exactly as users start it: ``python -m app`` (uvicorn, one process, uvloop/httptools)."""
    port = free_port()
    env = _base_env()
    env.update(HALFMQ_DATABASE_URL=database_url, HALFMQ_HOST="127.0.0.1", HALFMQ_PORT=str(port), HALFMQ_LOG_LEVEL="warning")
    env["HALFMQ_GRPC_PORT"] = "0"  # no RocketMQ listener on the fixed port unless a scenario names one (grpc_port=)
    for name, value in settings.items():
        env[f"HALFMQ_{name.upper()}"] = str(value)
    return Server([sys.executable, "-m", "app"], env, port, "broker")


def ceiling_app() -> Server:
    """The storage-free app, served by uvicorn the same way (``python -m bench.ceiling_app``)."""
    port = free_port()
    env = _base_env()
    return Server([sys.executable, "-m", "bench.ceiling_app", "--port", str(port)], env, port, "ceiling")


def bare_app(workers: int | None = None) -> Server:
    """The bare ASGI ceiling (``python -m bench.bare_app``): uvicorn, httptools, uvloop, one worker per core."""
    port = free_port()
    argv = [sys.executable, "-m", "bench.bare_app", "--port", str(port), "--workers", str(workers or os.cpu_count() or 1)]
    return Server(argv, _base_env(), port, "bare")


def _own_cpu_seconds(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def own_cpu_seconds(pid: int) -> float:
    """utime + stime of ``pid`` alone (the broker's HTTP front, without its core process)."""
    return _own_cpu_seconds(pid)


def cpu_seconds(pid: int) -> float:
    """utime + stime of ``pid`` and its descendants (all their threads) in seconds."""
    return sum(_own_cpu_seconds(p) for p in process_tree(pid))


def machine_busy() -> tuple[float, float]:
    """(busy, total) jiffies of all CPUs since boot, from /proc/stat."""
    with open("/proc/stat") as stat:
        values = [int(v) for v in stat.readline().split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return float(sum(values) - idle), float(sum(values))


class RssSampler:
    """Samples a process's RSS on a thread while a scenario runs; also its CPU use and the machine's."""

    def __init__(self, pid: int, interval: float = 0.5) -> None:
        self.pid = pid
        self.interval = interval
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.server_cpu = 0.0  # cores the server used on average (1.0 = one core saturated)
        self.machine_cpu = 0.0  # cores the whole machine used on average
        self.loadavg = 0.0

    def _run(self) -> None:
        started = time.monotonic()
        while not self._stop.is_set():
            self.samples.append((time.monotonic() - started, rss_mb(self.pid)))
            self._stop.wait(self.interval)

    def __enter__(self) -> RssSampler:
        self._began = time.monotonic()
        self._cpu0 = cpu_seconds(self.pid)
        self._busy0 = machine_busy()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        self.samples.append((self.samples[-1][0] if self.samples else 0.0, rss_mb(self.pid)))
        elapsed = max(time.monotonic() - self._began, 1e-6)
        self.server_cpu = (cpu_seconds(self.pid) - self._cpu0) / elapsed
        busy1 = machine_busy()
        total = busy1[1] - self._busy0[1]
        ncpu = os.cpu_count() or 1
        self.machine_cpu = ncpu * (busy1[0] - self._busy0[0]) / total if total else 0.0
        with open("/proc/loadavg") as loadavg:
            self.loadavg = float(loadavg.read().split()[0])

    @property
    def max_mb(self) -> float:
        return max((mb for _, mb in self.samples), default=0.0)
