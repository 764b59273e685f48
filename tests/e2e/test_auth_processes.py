"""Authentication against real broker processes: TLS with a self-signed certificate, the SDK and
the CLI with tokens, a process that refuses to start without its admin token, and a token revoked
on one broker process refused by another on the same PostgreSQL within the contract's 5 seconds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from sdk import Client, Consumer, Message, Producer
from sdk.errors import BrokerUnavailableError, HalfmqError
from spark_ingest.arrow_fetch import fetch_rows
from spark_ingest.client import BrokerClient, BrokerRequestFailed, BrokerUnreachable
from tests.support.broker_process import REPO_ROOT, BrokerProcess, free_port
from tests.support.databases import PostgresDatabases

pytestmark = pytest.mark.e2e

ADMIN = "e2e-admin-token"
REVOCATION_BOUND_SECONDS = 5.0  # the contract: a revoked token is refused everywhere within 5 s


def self_signed_certificate(directory: Path) -> tuple[str, str]:
    """A certificate for 127.0.0.1 and its key, made with the openssl command."""
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )
    return str(cert), str(key)


@pytest.fixture(scope="module")
def tls_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    directory = tmp_path_factory.mktemp("tls")
    cert, key = self_signed_certificate(directory)
    process = BrokerProcess(
        f"sqlite:///{directory}/broker.db",
        log_path=directory / "broker.log",
        auth="token",
        admin_token=ADMIN,
        ssl_certfile=cert,
        ssl_keyfile=key,
    )
    process.start()
    yield process
    process.stop()


def cli(broker: BrokerProcess, *args: str, token: str = ADMIN) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HALFMQ_")}
    env.update(HALFMQ_URL=broker.url, HALFMQ_TOKEN=token, HALFMQ_CA_FILE=str(broker.tls_ca))
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run(
        [sys.executable, "-m", "app", *args], env=env, capture_output=True, text=True, timeout=60, cwd=REPO_ROOT
    )


def test_the_sdk_talks_tls_with_a_token(tls_broker: BrokerProcess) -> None:
    ca = tls_broker.tls_ca
    assert ca is not None and tls_broker.url.startswith("https://")
    with Client(tls_broker.url, token=ADMIN, verify=ca) as admin:
        admin.create_topic("secure", exist_ok=True)
    with Producer(tls_broker.url, token=ADMIN, verify=ca) as producer:
        assert producer.send("secure", {"n": 1}) == (0, 0)
    with Consumer(tls_broker.url, "g", "secure", token=ADMIN, verify=ca) as consumer:
        assert [m.value for m in consumer.poll(timeout=5.0)] == [{"n": 1}]
    with pytest.raises(BrokerUnavailableError), Client(tls_broker.url, token=ADMIN) as untrusting:
        untrusting.list_topics()  # the system's CAs do not know the self-signed certificate
    with pytest.raises(HalfmqError) as refused, Client(tls_broker.url, verify=ca) as anonymous:
        anonymous.list_topics()
    assert (refused.value.status, refused.value.code) == (401, "UNAUTHENTICATED")


def test_the_spark_source_reads_arrow_pages_over_tls_with_a_token(tls_broker: BrokerProcess) -> None:
    ca = tls_broker.tls_ca
    assert ca is not None
    with Client(tls_broker.url, token=ADMIN, verify=ca) as admin:
        admin.create_topic("secure-spark", exist_ok=True)
    with Producer(tls_broker.url, token=ADMIN, verify=ca) as producer:
        producer.send_batch("secure-spark", [Message("secure-spark", {"n": n}) for n in range(3)])
    with BrokerClient(tls_broker.url, token=ADMIN, verify=ca, retries=0) as client:
        assert client.topic("secure-spark").partitions[0].last_stable_offset == 3
        page = fetch_rows(client, "secure-spark", 0, 0, 100)
        assert page.next_offset == 3
        assert [row["offset"] for batch in page.batches for row in batch.to_pylist()] == [0, 1, 2]
    with pytest.raises(BrokerUnreachable), BrokerClient(tls_broker.url, token=ADMIN, retries=0) as untrusting:
        untrusting.topic("secure-spark")
    with pytest.raises(BrokerRequestFailed) as refused, BrokerClient(tls_broker.url, verify=ca, retries=0) as anonymous:
        anonymous.topic("secure-spark")
    assert (refused.value.status, refused.value.code) == (401, "UNAUTHENTICATED")


def test_the_cli_manages_principals_tokens_and_acls(tls_broker: BrokerProcess) -> None:
    assert cli(tls_broker, "principals", "create", "reporting").returncode == 0
    created = cli(tls_broker, "tokens", "create", "reporting", "--json")
    assert created.returncode == 0, created.stderr
    issued = json.loads(created.stdout)
    added = cli(
        tls_broker,
        "acl",
        "add",
        "--principal",
        "reporting",
        "-r",
        "topic",
        "--pattern",
        "rep.",
        "--prefixed",
        "-o",
        "read",
        "-o",
        "describe",
        "--json",
    )
    assert added.returncode == 0, added.stderr
    acl = json.loads(added.stdout)
    assert (acl["pattern_type"], acl["operations"]) == ("prefixed", ["describe", "read"])
    listed = json.loads(cli(tls_broker, "acl", "list", "--principal", "reporting", "--json").stdout)
    assert [a["acl_id"] for a in listed["acls"]] == [acl["acl_id"]]
    tokens = json.loads(cli(tls_broker, "tokens", "list", "--principal", "reporting", "--json").stdout)["tokens"]
    assert [t["token_id"] for t in tokens] == [issued["token_id"]] and "token" not in tokens[0]
    # The new token may list principals? No: that needs cluster:describe. The CLI exits 5 on 401/403.
    assert cli(tls_broker, "principals", "list", token=issued["token"]).returncode == 5
    assert cli(tls_broker, "acl", "delete", acl["acl_id"]).returncode == 0
    assert cli(tls_broker, "tokens", "revoke", issued["token_id"]).returncode == 0
    refused = cli(tls_broker, "principals", "list", token=issued["token"])
    assert refused.returncode == 5 and "UNAUTHENTICATED" in refused.stderr


def test_token_mode_refuses_to_start_without_an_admin_token(tmp_path: Path) -> None:
    process = BrokerProcess(f"sqlite:///{tmp_path}/b.db", log_path=tmp_path / "b.log", auth="token")
    with pytest.raises(RuntimeError, match="HALFMQ_ADMIN_TOKEN"):
        process.start(timeout=20)


@pytest.fixture()
def two_brokers(postgres_databases: PostgresDatabases, tmp_path: Path) -> Iterator[tuple[BrokerProcess, BrokerProcess]]:
    url = postgres_databases.new()
    started = [
        BrokerProcess(url, log_path=tmp_path / f"broker-{n}.log", port=free_port(), auth="token", admin_token=ADMIN)
        for n in range(2)
    ]
    try:
        for process in started:
            process.start()
        yield started[0], started[1]
    finally:
        for process in started:
            process.stop()


def wait_for(condition: Callable[[], bool], seconds: float) -> float | None:
    """Seconds until ``condition`` held (polled every 50 ms), or None if it did not within ``seconds``."""
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        if condition():
            return time.monotonic() - started
        time.sleep(0.05)
    return None


def test_a_token_revoked_on_one_process_is_refused_by_the_other_within_5_seconds(
    two_brokers: tuple[BrokerProcess, BrokerProcess],
) -> None:
    a, b = two_brokers
    admin = {"Authorization": f"Bearer {ADMIN}"}
    with httpx.Client(base_url=a.url, headers=admin) as on_a:
        assert on_a.post("/v1/topics", json={"name": "shared"}).status_code == 201
        assert on_a.post("/v1/principals", json={"name": "app"}).status_code == 201
        issued = on_a.post("/v1/principals/app/tokens").json()
        acl = {"principal": "app", "resource_type": "topic", "pattern": "shared", "operations": ["describe"]}
        assert on_a.post("/v1/acls", json=acl).status_code == 201
    with httpx.Client(base_url=b.url, headers={"Authorization": f"Bearer {issued['token']}"}) as app_on_b:

        def status() -> int:
            return app_on_b.get("/v1/topics/shared").status_code

        assert wait_for(lambda: status() == 200, REVOCATION_BOUND_SECONDS) is not None, "b never learned the token"
        with httpx.Client(base_url=a.url, headers=admin) as on_a:
            assert on_a.delete(f"/v1/tokens/{issued['token_id']}").status_code == 204
        refused_after = wait_for(lambda: status() == 401, REVOCATION_BOUND_SECONDS)
        assert refused_after is not None, f"b still accepts the revoked token {REVOCATION_BOUND_SECONDS} s later"
        assert status() == 401
