"""The ``halfmq`` client verbs, run as a user runs them (``python -m app`` and the console script) against a real broker.

Output is read through ``--json``; a refusal must leave the broker's code and message on
standard error, an exit code a script can test, and no traceback. Verbs whose routes come
with the admin API (topic alter/delete, transaction listing, recheck) are checked either
way: their answer where the broker serves them, exit code 7 ("not offered") where it does not.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from half_store.storage.database import open_database
from half_store.storage.migrate import revisions
from tests.support.broker_process import REPO_ROOT, BrokerProcess
from tests.support.databases import migrate

pytestmark = pytest.mark.e2e

CONSOLE_SCRIPT = Path(sys.executable).with_name("halfmq")
EXIT_REFUSED, EXIT_USAGE, EXIT_NOT_FOUND, EXIT_CONFLICT, EXIT_UNAVAILABLE, EXIT_NOT_OFFERED = 1, 2, 3, 4, 6, 7


def halfmq(*args: str, url: str | None = None, stdin: str = "", script: bool = False) -> subprocess.CompletedProcess[str]:
    """Run one verb; standard input is a pipe, as in a script (never a terminal)."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("HALFMQ_")}
    environment["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + environment.get("PYTHONPATH", "")
    environment["COLUMNS"] = "200"
    if url is not None:
        environment["HALFMQ_URL"] = url
    command = [str(CONSOLE_SCRIPT)] if script else [sys.executable, "-m", "app"]
    return subprocess.run(
        [*command, *args], input=stdin, capture_output=True, text=True, env=environment, cwd=REPO_ROOT, timeout=120
    )


def answer_of(run: subprocess.CompletedProcess[str]) -> Any:
    assert run.returncode == 0, f"exit {run.returncode}: {run.stderr}"
    return json.loads(run.stdout)


def refused(run: subprocess.CompletedProcess[str], exit_code: int, *phrases: str) -> None:
    assert run.returncode == exit_code, f"exit {run.returncode}, not {exit_code}: {run.stdout} {run.stderr}"
    assert "Traceback" not in run.stderr + run.stdout
    for phrase in phrases:
        assert phrase in run.stderr


def offers(url: str, method: str, path: str) -> bool:
    """Whether the broker serves this route (the admin API comes from another branch)."""
    answer = httpx.request(method, f"{url}{path}")
    return not (answer.status_code in (404, 405) and answer.json()["error"]["code"] in ("NOT_FOUND", "METHOD_NOT_ALLOWED"))


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    directory = tmp_path_factory.mktemp("cli")
    with BrokerProcess(f"sqlite:///{directory}/cli.db") as broker:
        yield broker.url


def test_topics_create_list_describe_and_refusals(url: str) -> None:
    created = answer_of(halfmq("topics", "create", "orders", "--partitions", "3", "--json", url=url, script=True))
    assert created == {"name": "orders", "partitions": 3}
    listed = answer_of(halfmq("topics", "list", "--json", url=url))
    assert {"name": "orders", "partitions": 3} in listed["topics"]

    refused(halfmq("topics", "create", "orders", url=url), EXIT_CONFLICT, "TOPIC_EXISTS")
    refused(halfmq("topics", "describe", "nope", url=url), EXIT_NOT_FOUND, "TOPIC_NOT_FOUND", "topic 'nope' does not exist")
    refused(halfmq("topics", "list", url="http://127.0.0.1:9"), EXIT_UNAVAILABLE, "BROKER_UNAVAILABLE")
    # The table a person reads: one row per partition, under the topic's name.
    table = halfmq("topics", "describe", "orders", url=url)
    assert table.returncode == 0 and "topic orders" in table.stdout and "high watermark" in table.stdout
    assert [line.split()[1] for line in table.stdout.splitlines() if line.startswith("│")] == ["0", "1", "2"]


def test_produce_a_file_then_consume_it_with_a_group(url: str, tmp_path: Path) -> None:
    create_topic(url, "events", partitions=2)
    lines = [json.dumps({"key": f"k{n % 5}", "value": {"n": n}}) for n in range(1200)]
    source = tmp_path / "events.jsonl"
    source.write_text("\n".join(lines) + "\n")
    produced = answer_of(halfmq("produce", "events", "--file", str(source), "--batch-size", "500", "--json", url=url))
    assert produced["produced"] == 1200
    assert sum(p["count"] for p in produced["partitions"]) == 1200

    one = answer_of(halfmq("produce", "events", "hello", "--key", "k9", "-H", "source=cli", "--json", url=url))
    assert one["produced"] == 1

    consumed = halfmq("consume", "events", "--from-beginning", "--count", "1201", "--group", "audit", "--json", url=url)
    messages = [json.loads(line) for line in answer_lines(consumed)]
    assert len(messages) == 1201
    assert sorted(m["value"]["n"] for m in messages if isinstance(m["value"], dict)) == list(range(1200))
    assert next(m for m in messages if m["value"] == "hello")["headers"] == {"source": "cli"}

    # The group's offsets were committed: the next run has nothing left and says so.
    committed = httpx.get(f"{url}/v1/groups/audit/offsets").json()["offsets"]
    assert sorted((o["partition"], o["lag"]) for o in committed) == [(0, 0), (1, 0)]
    refused(
        halfmq("consume", "events", "--group", "audit", "--count", "1", "--timeout", "500ms", "--json", url=url),
        EXIT_REFUSED,
        "got 0 of 1",
    )

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"value": 1}\nnot json\n')
    refused(halfmq("produce", "events", "--file", str(bad), url=url), EXIT_REFUSED, "line 2 is not JSON", "nothing was produced")


def answer_lines(run: subprocess.CompletedProcess[str]) -> list[str]:
    assert run.returncode == 0, f"exit {run.returncode}: {run.stderr}"
    return run.stdout.splitlines()


def test_consume_isolation_and_transactions(url: str) -> None:
    create_topic(url, "ledger")
    httpx.post(f"{url}/v1/topics/ledger/messages", json={"messages": [{"value": "settled"}]}).raise_for_status()
    txn = httpx.post(f"{url}/v1/transactions", json={}).json()["txn_id"]
    written = {"messages": [{"value": "pending"}], "txn_id": txn}
    assert httpx.post(f"{url}/v1/topics/ledger/partitions/0/messages", json=written).status_code == 200

    def values(isolation: str) -> list[Any]:
        run = halfmq("consume", "ledger", "--from-beginning", "--isolation", isolation, "--timeout", "300ms", "--json", url=url)
        return [json.loads(line)["value"] for line in answer_lines(run)]

    assert values("read_committed") == ["settled"]
    assert values("read_uncommitted") == ["settled", "pending"]

    described = answer_of(halfmq("txn", "describe", txn, "--json", url=url))
    assert described["state"] == "OPEN" and described["partitions"] == [{"topic": "ledger", "partition": 0}]
    assert described["transactional_id"] is None and described["age_ms"] >= 0  # anonymous (Pulsar-style)
    shown = halfmq("txn", "describe", txn, url=url)
    assert shown.returncode == 0 and "started" in shown.stdout and " ago" in shown.stdout
    listing = halfmq("txn", "list", "--state", "OPEN", "--json", url=url)
    if offers(url, "GET", "/v1/transactions"):
        assert answer_of(listing)["transactions"][0]["txn_id"] == txn
    else:
        refused(listing, EXIT_NOT_OFFERED, "does not offer GET /v1/transactions")

    assert answer_of(halfmq("txn", "abort", txn, "--json", url=url))["state"] == "ABORTED"
    partition = httpx.get(f"{url}/v1/topics/ledger").json()["partitions"][0]
    assert partition["last_stable_offset"] == partition["high_watermark"]  # read_committed readers go on
    committed = httpx.post(f"{url}/v1/transactions", json={}).json()["txn_id"]
    httpx.post(f"{url}/v1/transactions/{committed}/commit").raise_for_status()
    refused(halfmq("txn", "abort", committed, url=url), EXIT_CONFLICT, "ALREADY_RESOLVED")


def test_half_messages_by_hand(url: str) -> None:
    create_topic(url, "carts")
    prepared = [
        httpx.post(f"{url}/v1/half-messages", json={"topic": "carts", "producer_group": "shop", "value": n}).json()["message_id"]
        for n in range(2)
    ]
    listed = answer_of(halfmq("half", "list", "--group", "shop", "--state", "PREPARED", "--json", url=url))
    assert sorted(h["message_id"] for h in listed["half_messages"]) == sorted(prepared)
    # What an operator decides on: the message's key, headers and value, in the table and in describe.
    cart = {"topic": "carts", "producer_group": "shop", "key": "cart-7", "value": {"sku": "A-12"}, "headers": {"via": "web"}}
    looked_at = httpx.post(f"{url}/v1/half-messages", json=cart).json()["message_id"]
    table = halfmq("half", "list", "--group", "shop", url=url)
    assert table.returncode == 0 and "cart-7" in table.stdout and '{"sku": "A-12"}' in table.stdout
    shown = halfmq("half", "describe", looked_at, url=url)
    assert shown.returncode == 0 and all(part in shown.stdout for part in ("cart-7", '{"via": "web"}', '{"sku": "A-12"}'))
    assert answer_of(halfmq("half", "rollback", looked_at, "--json", url=url))["state"] == "ROLLED_BACK"

    committed = answer_of(halfmq("half", "commit", prepared[0], "--json", url=url))
    assert committed["state"] == "COMMITTED" and committed["topic"] == "carts"
    assert answer_of(halfmq("half", "rollback", prepared[1], "--json", url=url))["state"] == "ROLLED_BACK"
    refused(halfmq("half", "commit", prepared[1], url=url), EXIT_CONFLICT, "ALREADY_RESOLVED")
    described = answer_of(halfmq("half", "describe", prepared[0], "--json", url=url))
    assert described["state"] == "COMMITTED" and described["resolved_by"] == "producer"
    assert httpx.get(f"{url}/v1/half-messages/{prepared[1]}").json()["state"] == "ROLLED_BACK"

    recheck = halfmq("half", "recheck", prepared[0], url=url)
    if offers(url, "POST", f"/v1/half-messages/{prepared[0]}/recheck"):
        refused(recheck, EXIT_CONFLICT, "ALREADY_RESOLVED")  # only a DISCARDED message is rechecked
    else:
        refused(recheck, EXIT_NOT_OFFERED, "does not offer POST")


def test_topic_alter_and_delete(url: str) -> None:
    create_topic(url, "scratch")
    refused(halfmq("topics", "delete", "scratch", url=url), EXIT_USAGE, "needs --yes")
    refused(halfmq("topics", "alter", "scratch", url=url), EXIT_USAGE, "nothing to change")

    altered = halfmq("topics", "alter", "scratch", "--partitions", "2", "--retention-ms", "7d", "--json", url=url)
    deleted = halfmq("topics", "delete", "scratch", "--yes", "--json", url=url)
    if offers(url, "DELETE", "/v1/topics/no-such-topic"):
        assert len(answer_of(altered)["partitions"]) == 2
        assert answer_of(altered)["config"]["retention_ms"] == 7 * 86_400_000
        assert answer_of(deleted) == {"deleted": "scratch"}
        refused(halfmq("topics", "describe", "scratch", url=url), EXIT_NOT_FOUND, "TOPIC_NOT_FOUND")
    else:
        refused(altered, EXIT_NOT_OFFERED, "does not offer PATCH /v1/topics/scratch")
        refused(deleted, EXIT_NOT_OFFERED, "does not offer DELETE /v1/topics/scratch")


def test_db_current_and_downgrade(database_url: str) -> None:
    def current() -> subprocess.CompletedProcess[str]:
        return halfmq("db", "current", "--json", "--database-url", database_url)

    at_head = answer_of(current())
    assert at_head["at_head"] is True and at_head["current"] == at_head["head"]

    refused(halfmq("db", "downgrade", "0001", "--database-url", database_url), EXIT_USAGE, "--yes")
    assert revision_of(database_url) == at_head["head"]  # nothing was touched

    downgraded = halfmq("db", "downgrade", "0001", "--yes", "--database-url", database_url)
    assert downgraded.returncode == 0, downgraded.stderr
    assert revision_of(database_url) == "0001"
    behind = current()
    assert behind.returncode == EXIT_REFUSED  # not at head: a deploy script can stop here
    assert json.loads(behind.stdout) == {"current": "0001", "head": at_head["head"], "at_head": False}
    migrate(database_url)  # back to head, for the next test that gets this database


def revision_of(database_url: str) -> str | None:
    database = open_database(database_url)
    try:
        return revisions(database.writer).current
    finally:
        database.dispose()


def create_topic(url: str, name: str, partitions: int = 1) -> None:
    httpx.post(f"{url}/v1/topics", json={"name": name, "partitions": partitions}).raise_for_status()
