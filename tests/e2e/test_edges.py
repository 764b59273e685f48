"""The edges a newcomer and an operator hit first, walked as they walk them (issue 34).

The ``halfmq`` command in a subprocess and plain HTTP against a real broker process:
every wrong turn must end in one line that says what was wrong, the exit code or
status docs/cli.md and docs/api.md promise for it, and never a traceback.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.broker_process import REPO_ROOT, BrokerProcess, free_port

pytestmark = pytest.mark.e2e

# docs/cli.md#exit-codes
EXIT_REFUSED, EXIT_USAGE, EXIT_NOT_FOUND, EXIT_UNAVAILABLE, EXIT_INTERRUPTED = 1, 2, 3, 6, 130
PYDANTIC_WORDS = ("Value error", "Input should", "Extra inputs", "Field required")


def halfmq_command(*args: str, url: str | None = None) -> tuple[list[str], dict[str, str]]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("HALFMQ_")}
    environment["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + environment.get("PYTHONPATH", "")
    environment["COLUMNS"] = "200"
    if url is not None:
        environment["HALFMQ_URL"] = url
    return [sys.executable, "-m", "app", *args], environment


def halfmq(*args: str, url: str | None = None, cwd: Path = REPO_ROOT) -> subprocess.CompletedProcess[str]:
    command, environment = halfmq_command(*args, url=url)
    return subprocess.run(command, capture_output=True, text=True, env=environment, cwd=cwd, timeout=120)


def one_line_refusal(run: subprocess.CompletedProcess[str], exit_code: int, *phrases: str) -> str:
    """The run ended with ``exit_code`` and one ``error:`` line naming ``phrases``; that line."""
    said = run.stdout + run.stderr
    assert "Traceback" not in said, said
    assert run.returncode == exit_code, f"exit {run.returncode}, not {exit_code}: {said}"
    errors = [line for line in run.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, run.stderr
    for phrase in phrases:
        assert phrase in errors[0], errors[0]
    return errors[0]


@pytest.fixture(scope="module")
def url(module_database_url: str) -> Iterator[str]:
    with BrokerProcess(module_database_url) as broker:
        httpx.post(f"{broker.url}/v1/topics", json={"name": "edges", "partitions": 2}).raise_for_status()
        yield broker.url


# -- the command line --------------------------------------------------------------------


def test_serve_with_an_unreachable_database_says_so_in_one_line() -> None:
    unreachable = f"postgresql+psycopg://edge:s3cret@127.0.0.1:{free_port()}/nowhere"
    run = halfmq("serve", "--port", str(free_port()), "--database-url", unreachable)
    line = one_line_refusal(run, EXIT_UNAVAILABLE, "cannot reach the database", "127.0.0.1", "nowhere", "refused")
    assert "s3cret" not in run.stderr and "***" in line


def test_db_verbs_with_no_database_or_a_bogus_url(tmp_path: Path) -> None:
    one_line_refusal(halfmq("db", "current", "--database-url", "bogus://x"), EXIT_USAGE, "bogus")
    one_line_refusal(halfmq("db", "current", "--database-url", "not a url"), EXIT_USAGE, "not a database URL")
    one_line_refusal(halfmq("db", "current", cwd=tmp_path), EXIT_NOT_FOUND, "no database", "halfmq.db")
    one_line_refusal(halfmq("db", "downgrade", "base", "--yes", cwd=tmp_path), EXIT_NOT_FOUND, "no database")
    assert list(tmp_path.iterdir()) == []  # nothing was created where there was no database
    empty = tmp_path / "empty.db"
    empty.touch()  # a database with no schema: nothing to downgrade, and current says so
    at_empty = ("--database-url", f"sqlite:///{empty}")
    one_line_refusal(halfmq("db", "downgrade", "base", "--yes", *at_empty), EXIT_REFUSED, "no schema")
    behind = halfmq("db", "current", *at_empty)
    assert behind.returncode == EXIT_REFUSED and "no schema yet" in behind.stdout and "Traceback" not in behind.stderr


def test_a_url_that_is_not_a_brokers_root_is_a_usage_error(url: str) -> None:
    one_line_refusal(halfmq("topics", "list", url="notaurl"), EXIT_USAGE, "not a broker URL")
    one_line_refusal(halfmq("topics", "list", url="ftp://127.0.0.1:8080"), EXIT_USAGE, "http://")
    one_line_refusal(halfmq("topics", "list", url=f"{url}/v1"), EXIT_USAGE, "the broker's root", url)
    unreachable = f"http://127.0.0.1:{free_port()}"
    one_line_refusal(halfmq("topics", "list", url=unreachable), EXIT_UNAVAILABLE, "BROKER_UNAVAILABLE")


def test_an_unknown_partition_exits_alike_whichever_verb(url: str) -> None:
    produced = halfmq("produce", "edges", "x", "--partition", "99", url=url)
    consumed = halfmq("consume", "edges", "--partition", "99", "--count", "1", url=url)
    one_line_refusal(produced, EXIT_NOT_FOUND, "PARTITION_NOT_FOUND")
    one_line_refusal(consumed, EXIT_NOT_FOUND, "PARTITION_NOT_FOUND")
    one_line_refusal(halfmq("topics", "describe", "nope", url=url), EXIT_NOT_FOUND, "TOPIC_NOT_FOUND")


def test_ctrl_c_during_consume_count_says_it_was_interrupted(url: str) -> None:
    for value in ("a", "b"):
        assert halfmq("produce", "edges", value, "--partition", "0", url=url).returncode == 0
    command, environment = halfmq_command(
        "consume", "edges", "--partition", "0", "--from-beginning", "--count", "100", "--json", url=url
    )
    with subprocess.Popen(
        command, env=environment, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as consumer:
        assert consumer.stdout is not None and consumer.stderr is not None
        for _ in range(2):  # both printed: it is now waiting for the 98 still to come
            assert consumer.stdout.readline()
        consumer.send_signal(signal.SIGINT)
        stderr = consumer.stderr.read()
        consumer.wait(timeout=60)
    run = subprocess.CompletedProcess(command, consumer.returncode, "", stderr)
    line = one_line_refusal(run, EXIT_INTERRUPTED, "interrupted", "2 of 100")
    assert "--timeout" not in line


# -- HTTP --------------------------------------------------------------------------------


def refused(answer: httpx.Response, status: int, code: str, *phrases: str) -> dict[str, Any]:
    assert "Traceback" not in answer.text
    assert answer.status_code == status, answer.text
    error = answer.json()["error"]
    assert error["code"] == code, error
    for words in PYDANTIC_WORDS:
        assert words not in error["message"], error
    for phrase in phrases:
        assert phrase in error["message"], error
    return dict(error)


def test_http_bodies_types_and_limits(url: str) -> None:
    topic = {"name": "other", "partitions": 1}
    raw = b'{"name": "other", "partitions": 1}'
    with httpx.Client(base_url=url) as http:
        # The media type: none at all is refused as text/plain is.
        refused(http.post("/v1/topics", content=raw, headers={"content-type": ""}), 415, "UNSUPPORTED_MEDIA_TYPE")
        refused(http.post("/v1/topics", content=raw), 415, "UNSUPPORTED_MEDIA_TYPE", "Content-Type")
        refused(http.post("/v1/topics", content=raw, headers={"content-type": "text/plain"}), 415, "UNSUPPORTED_MEDIA_TYPE")
        # 400 only for a body that cannot be read; 422 for values refused, limits included.
        refused(http.post("/v1/topics", content=b"{", headers={"content-type": "application/json"}), 400, "INVALID_REQUEST")
        refused(http.post("/v1/topics", json={**topic, "partitions": "3"}), 422, "VALIDATION_ERROR", "partitions")
        refused(http.post("/v1/topics", json={**topic, "colour": "red"}), 422, "VALIDATION_ERROR", "unknown field")
        refused(http.post("/v1/topics", json=[topic]), 422, "VALIDATION_ERROR", "JSON object")
        both = {"messages": [{"value": 1, "value_base64": "AA=="}]}
        refused(http.post("/v1/topics/edges/messages", json=both), 422, "VALIDATION_ERROR", "give exactly one of")
        fetch = "/v1/topics/edges/partitions/0/messages"
        refused(http.get(fetch, params={"max_messages": 10**7}), 422, "VALIDATION_ERROR", "limited to")
        refused(http.get(fetch, params={"max_messages": "many"}), 422, "VALIDATION_ERROR", "max_messages")
        refused(http.post("/v1/transactions", json={"timeout_ms": 10**9}), 422, "INVALID_TRANSACTION_TIMEOUT")
        refused(http.get(fetch, params={"offset": 10**6}), 416, "OFFSET_OUT_OF_RANGE")
        refused(http.get("/v1/nothing-here"), 404, "NOT_FOUND")
        assert [t["name"] for t in http.get("/v1/topics").json()["topics"]] == ["edges"]  # nothing was created
