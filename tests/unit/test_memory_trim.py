"""Freed memory goes back to the system: the process's RSS falls after a burst, and the metric says by how much."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Counter

from app.memory import MemoryTrimmer, resident_bytes

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="malloc_trim and /proc are Linux's")


def counter() -> tuple[Counter, CollectorRegistry]:
    registry = CollectorRegistry()
    return Counter("released_bytes", "test", registry=registry), registry


def burst() -> list[bytes]:
    """What a burst of large requests leaves: 60 MB of 1 KiB values freed, one in a thousand still held.

    The ones still held pin the heap: glibc alone gives back only free memory at its top.
    """
    values = [bytes(1024) + i.to_bytes(4, "little") for i in range(60_000)]
    return values[::1000]


def test_a_trim_after_a_burst_gives_memory_back_and_counts_it() -> None:
    released_total, registry = counter()
    trimmer = MemoryTrimmer(5.0, released_total)
    held = burst()
    before = resident_bytes()
    released = trimmer.trim_once()
    assert released > 10 * 1024 * 1024
    assert resident_bytes() < before - 10 * 1024 * 1024
    assert registry.get_sample_value("released_bytes_total") == released
    assert len(held) == 60


def test_the_trimming_thread_runs_until_stopped_and_zero_turns_it_off() -> None:
    released_total, registry = counter()
    off = MemoryTrimmer(0, released_total).start()
    assert not off.enabled
    off.stop()
    trimmer = MemoryTrimmer(0.05, released_total).start()
    try:
        held = burst()
        deadline = time.monotonic() + 10
        while registry.get_sample_value("released_bytes_total") == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (registry.get_sample_value("released_bytes_total") or 0) > 0
        assert held
    finally:
        trimmer.stop()


_REUSE_PROBE = """
import io, pickle, resource, sys
from prometheus_client import CollectorRegistry, Counter
from app.memory import MemoryTrimmer

def faults_per_page():  # pickle a 5 MB value the way the core sends a fetch page, 20 times
    value = bytes(range(256)) * 20_000
    for _ in range(3):
        pickle.dumps(value)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(20):
        pickle.dumps(value)
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 20

trimmer = MemoryTrimmer(float(sys.argv[1]), Counter("released_bytes", "test", registry=CollectorRegistry())).start()
print(faults_per_page())
trimmer.stop()
"""


def faults_per_5_mb_page(trim_seconds: float) -> float:
    """Minor page faults per 5 MB page pickled, in a fresh interpreter with a trimmer started."""
    probe = subprocess.run(
        [sys.executable, "-c", _REUSE_PROBE, str(trim_seconds)], capture_output=True, text=True, check=True, timeout=60
    )
    return float(probe.stdout)


def test_with_the_trimmer_on_a_freed_page_buffer_is_reused_instead_of_faulted_in_again() -> None:
    # 5 MB is 1,250 pages of 4 KiB. With glibc's defaults (trimmer off) this machine faults in
    # about 1,250 for every page (not asserted: transparent huge pages would change it); with
    # the thresholds the trimmer sets, the buffer the last page freed is reused.
    assert faults_per_5_mb_page(60) < 200


def test_a_broker_process_serves_the_kafka_protocol_without_loading_hypothesis() -> None:
    """kio imports hypothesis wherever it is installed; a broker process keeps it out and kio still works."""
    script = (
        "import sys\n"
        "from app.memory import leave_out_test_tools\n"
        "leave_out_test_tools()\n"
        "import app.kafka.front, kio.schema.metadata.v12 as metadata\n"
        "assert metadata.MetadataRequest is not None\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'hypothesis'))\n"
    )
    assert _last_line_printed_by(script) == "['hypothesis']"  # only the placeholder that refused the import


def test_a_broker_without_its_protocol_ports_loads_neither_grpc_nor_kio(tmp_path: Path) -> None:
    database_url = f"sqlite:///{tmp_path / 'broker.db'}"
    script = (
        "import sys\n"
        "from fastapi.testclient import TestClient\n"
        "from app.main import create_app\n"
        "from half_store.settings import Settings\n"
        f"settings = Settings(database_url={database_url!r}, grpc_port=0, kafka_port=0, core_process=False,"
        " run_checker=False)\n"
        "with TestClient(create_app(settings)) as client:\n"
        "    assert client.get('/healthz').status_code == 200\n"
        "    assert client.app.state.rocketmq is None\n"
        "print('grpc' in sys.modules, 'kio' in sys.modules)\n"
    )
    assert _last_line_printed_by(script) == "False False"


def _last_line_printed_by(script: str) -> str:
    """Run ``script`` in a fresh interpreter (its imports are the point); the last line it printed."""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]
