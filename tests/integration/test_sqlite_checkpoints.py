"""SQLite WAL checkpoints run beside the writer: committed rows reach the database file soon,
and the WAL file stays bounded."""

from __future__ import annotations

import shutil
import sqlite3
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from half_store.storage import checkpointer, database
from tests.integration.conftest import create_topic, make_settings


def _messages_in_database_file(db_path: Path, copy_to: Path) -> int:
    """Messages in the main database file alone, as if the WAL were lost (a row holds a batch of them)."""
    shutil.copyfile(db_path, copy_to)
    with sqlite3.connect(copy_to) as connection:
        try:
            return int(connection.execute("SELECT coalesce(sum(record_count), 0) FROM messages").fetchone()[0])
        except sqlite3.OperationalError:  # the schema itself is still only in the WAL
            return 0


def test_committed_messages_are_checkpointed_into_the_database_file(tmp_path: Path) -> None:
    db_path = tmp_path / "broker.db"
    with TestClient(create_app(make_settings(f"sqlite:///{db_path}"))) as client:
        create_topic(client, "t")
        client.post("/v1/topics/t/messages", json={"messages": [{"value": n} for n in range(50)]})
        deadline = time.monotonic() + 30  # a loaded machine delays the checkpointer's thread, not its outcome
        while _messages_in_database_file(db_path, tmp_path / "copy.db") < 50 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _messages_in_database_file(db_path, tmp_path / "copy.db") == 50


def test_the_wal_is_restarted_and_cut_back_under_a_long_write_load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checkpointer, "RESTART_AFTER_FRAMES", 8)
    monkeypatch.setattr(checkpointer, "CHECKPOINT_EVERY_SECONDS", 0.05)
    monkeypatch.setattr(database, "WAL_SIZE_LIMIT_BYTES", 256 * 1024)
    db_path = tmp_path / "broker.db"
    wal_path = Path(f"{db_path}-wal")
    with TestClient(create_app(make_settings(f"sqlite:///{db_path}"))) as client:
        create_topic(client, "t")
        for _ in range(40):
            client.post("/v1/topics/t/messages", json={"messages": [{"value": "x" * 1000} for _ in range(20)]})
        time.sleep(0.3)
        client.post("/v1/topics/t/messages", json={"messages": [{"value": "last"}]})  # resets the WAL
        assert wal_path.stat().st_size <= 1024 * 1024  # 800 KB written, without checkpoints it would hold all of it
