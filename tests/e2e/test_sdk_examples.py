"""The examples the README walks through actually run, against a real broker."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from sdk import Client
from tests.e2e.sdk_fixtures import REPO_ROOT, admin, broker, read_all  # noqa: F401

pytestmark = pytest.mark.e2e


def run_example(*args: str) -> str:
    completed = subprocess.run(
        [sys.executable, str(REPO_ROOT / "examples" / args[0]), *args[1:]],
        capture_output=True, text=True, timeout=120, cwd=REPO_ROOT,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    return completed.stdout


def test_order_service_then_invoice_job(admin: Client, tmp_path: Path) -> None:
    db = tmp_path / "orders.db"
    out = run_example("order_service.py", "--url", admin.url, "--db", str(db), "--orders", "5", "--wait", "30")
    assert "ROLLBACK" in out and "UNKNOWN" in out and "is now COMMITTED" in out
    with sqlite3.connect(db) as conn:
        stored = {row[0] for row in conn.execute("SELECT order_id FROM orders")}
    published = {m.value["order_id"] for m in read_all(admin, "orders")}
    assert published == stored and len(stored) == 4  # order #3 was invalid

    out = run_example("invoice_job.py", "--url", admin.url, "--idle-exit", "1")
    assert "4 invoice(s) written" in out
    # A second run finds nothing new: the offsets were committed with the invoices.
    assert "0 invoice(s) written" in run_example("invoice_job.py", "--url", admin.url, "--idle-exit", "0.5")
    invoices = read_all(admin, "invoices")
    assert sorted(i.value["order_id"] for i in invoices) == sorted(stored)

    tail = run_example("tail.py", "invoices", "--url", admin.url)
    assert tail.count("invoices/") == 4
