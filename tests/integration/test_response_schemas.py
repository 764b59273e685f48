"""Every route answers exactly as ``/openapi.json`` says it does.

Real answers of every route (successes and errors, through the in-process app) are held
to the schema the document declares for their status: the status must be declared, and
a JSON body must have every required property and no property the schema does not
declare. Across all answers, every declared property must turn up at least once, so the
document declares nothing the broker never sends.
"""

from __future__ import annotations

import asyncio
import re
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from app.broker import Broker, running_broker
from app.main import create_app
from half_store.settings import Settings
from tests.integration.conftest import create_topic, make_settings

# FastAPI's own pages, which the document does not describe.
UNDESCRIBED = {"/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"}
JSON_TYPES: dict[str, type | tuple[type, ...]] = {
    "object": dict,
    "array": list,
    "string": str,
    "integer": int,
    "number": (int, float),
    "boolean": bool,
}


def is_json_type(kind: str, value: Any) -> bool:
    # JSON has no booleans among its numbers, Python does.
    return isinstance(value, JSON_TYPES[kind]) and (kind == "boolean" or not isinstance(value, bool))

Seen = defaultdict[str, set[str]]  # component schema -> the properties answers had


class ResponseSchemas:
    """Checks each answer against the document, and remembers what the answers covered."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.paths: dict[str, dict[str, Any]] = document["paths"]
        self.components: dict[str, Any] = document["components"]["schemas"]
        self.templates = [(re.compile(re.sub(r"\{[^/]+\}", "[^/]+", path) + "$"), path) for path in self.paths]
        self.seen: Seen = defaultdict(set)
        self.answered: set[tuple[str, str, int]] = set()

    def check(self, response: httpx.Response) -> None:
        """An httpx response hook: every answer the test client gets goes through here."""
        url_path = response.request.url.path
        if url_path in UNDESCRIBED:
            return
        matches = [path for pattern, path in self.templates if pattern.match(url_path)]
        assert len(matches) == 1, f"{url_path} matches {matches} of the document's paths"
        method, path, status = response.request.method.lower(), matches[0], response.status_code
        declared = self.paths[path][method]["responses"].get(str(status))
        assert declared is not None, f"{method.upper()} {path} answered {status}, which the document does not declare"
        response.read()
        content = declared.get("content")
        if not content:
            assert response.content == b"", f"{method.upper()} {path} {status} declares no body but sent one"
        elif "application/json" in content:
            problems = self._problems(content["application/json"]["schema"], response.json(), "body", self.seen)
            assert not problems, f"{method.upper()} {path} {status}: " + "; ".join(problems)
        else:
            media_type = response.headers["content-type"].split(";")[0]
            assert media_type in content, f"{method.upper()} {path} {status} sent {media_type}, not {list(content)}"
        self.answered.add((method, path, status))

    def _problems(
        self, schema: dict[str, Any], value: Any, where: str, seen: Seen, name: str | None = None
    ) -> list[str]:
        if "$ref" in schema:
            component = schema["$ref"].rsplit("/", 1)[-1]
            seen[component]  # reached, even if it has no properties to see
            return self._problems(self.components[component], value, where, seen, component)
        if "anyOf" in schema:
            for branch in schema["anyOf"]:
                trial: Seen = defaultdict(set)
                if not self._problems(branch, value, where, trial):
                    for component, keys in trial.items():
                        seen[component] |= keys
                    return []
            return [f"{where}: {value!r} matches none of {schema['anyOf']}"]
        if "enum" in schema and value not in schema["enum"]:
            return [f"{where}: {value!r} is not one of {schema['enum']}"]
        kind = schema.get("type")
        if kind is None:
            return []  # any JSON
        if kind == "null":
            return [] if value is None else [f"{where}: {value!r} is not null"]
        if not is_json_type(kind, value):
            return [f"{where}: {value!r} is not {kind}"]
        if kind == "array":
            problems = []
            for n, item in enumerate(value):
                problems += self._problems(schema["items"], item, f"{where}[{n}]", seen)
            return problems
        if kind != "object":
            return []
        properties: dict[str, Any] = schema.get("properties", {})
        others = schema.get("additionalProperties")
        required: list[str] = schema.get("required", [])
        problems = [f"{where}: {key!r} is required, not there" for key in required if key not in value]
        for key, item in value.items():
            if key in properties:
                problems += self._problems(properties[key], item, f"{where}.{key}", seen)
            elif isinstance(others, dict):
                problems += self._problems(others, item, f"{where}.{key}", seen)
            else:
                problems.append(f"{where}: {key!r} is not declared")
        if name is not None:
            seen[name] |= value.keys() & properties.keys()
        return problems

    def assert_covered(self) -> None:
        succeeded = {(method, path) for method, path, status in self.answered if status < 300}
        declared = {(method, path) for path, operations in self.paths.items() for method in operations}
        assert declared <= succeeded, f"operations the test never got an answer from: {sorted(declared - succeeded)}"
        for component, properties in self.seen.items():
            never_sent = self.components[component].get("properties", {}).keys() - properties - ONLY_WITH_AUTH
            assert not never_sent, f"{component} declares {sorted(never_sent)}, which no answer had"


# Fields only a broker with HALFMQ_AUTH=token sends (this test runs without it; test_admin_halves.py has them).
ONLY_WITH_AUTH = {"body_hidden"}


@pytest.fixture(params=["one process", "core process"])
def settings(database_url: str, request: pytest.FixtureRequest) -> Settings:
    """Every route is called once in each mode: services in this process, and behind the core link."""
    return make_settings(database_url, core_process=request.param == "core process")


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings)) as test_client:
        yield test_client


def discard(client: TestClient, settings: Settings, message_id: str) -> None:
    """Give a half message up as the checker would (no route does: it is the checker's decision)."""
    broker = client.app.state.broker  # type: ignore[attr-defined]
    if isinstance(broker, Broker):
        client.portal.call(broker.halves.discard, message_id)  # type: ignore[union-attr]
        return

    async def through_another_broker() -> None:  # the services run in the core process
        async with running_broker(settings.model_copy(update={"run_checker": False})) as other:
            await other.halves.discard(message_id)

    asyncio.run(through_another_broker())


def test_every_route_answers_as_the_document_declares(client: TestClient, settings: Settings) -> None:
    schemas = ResponseSchemas(client.get("/openapi.json").json())
    client.event_hooks = {"request": [], "response": [schemas.check]}

    # Topics, with the errors they answer.
    create_topic(client, "orders", 2)
    assert client.post("/v1/topics", json={"name": "orders"}).status_code == 409
    assert client.post("/v1/topics", json={"name": "RMQ_SYS_MINE"}).status_code == 403
    assert client.post("/v1/topics", content=b"{", headers={"content-type": "application/json"}).status_code == 400
    assert client.post("/v1/topics", json={"name": "orders", "partitions": 0}).status_code == 422
    assert client.get("/v1/topics").status_code == 200
    assert client.get("/v1/topics/orders").status_code == 200
    assert client.get("/v1/topics/missing").status_code == 404

    # Produce and fetch: a JSON message with headers and a binary one.
    messages = [
        {"key": "k", "value": {"n": 1}, "headers": {"h": "v"}, "partition": 1},
        {"value_base64": "AAE=", "partition": 1},
    ]
    assert client.post("/v1/topics/orders/messages", json={"messages": messages}).status_code == 200
    assert client.get("/v1/topics/orders/partitions/1/messages").json()["messages"]
    assert client.get("/v1/topics/orders/partitions/1/messages", params={"offset": 99}).status_code == 416
    # Offsets for a time: a partition with a message at or after it, and the answer's end where none is.
    by_time = client.get("/v1/topics/orders/offsets", params={"timestamp": 0}).json()["partitions"]
    assert any(p["timestamp"] is not None for p in by_time)
    later = client.get("/v1/topics/orders/offsets", params={"timestamp": 253_402_300_799_999}).json()["partitions"]
    assert all(p["timestamp"] is None for p in later)

    # Kafka mode: a transactional producer whose write begins its transaction, and an explicit one.
    producer = client.post("/v1/producers", json={"transactional_id": "etl"}).json()
    stamp = {"producer_id": producer["producer_id"], "producer_epoch": producer["producer_epoch"]}
    write = {"messages": [{"value": 1}], "base_sequence": 0, "transactional": True, **stamp}
    begun = client.post("/v1/topics/orders/partitions/0/messages", json=write).json()["txn_id"]
    assert client.post(f"/v1/transactions/{begun}/commit").json()["state"] == "COMMITTED"
    txn = client.post("/v1/transactions", json={}).json()["txn_id"]
    in_txn = {"messages": [{"value": 2}], "txn_id": txn}
    assert client.post("/v1/topics/orders/partitions/0/messages", json=in_txn).status_code == 200
    offsets = {"group": "g", "offsets": [{"topic": "orders", "partition": 0, "offset": 1}]}
    assert client.post(f"/v1/transactions/{txn}/offsets", json=offsets).status_code == 200
    assert client.get(f"/v1/transactions/{txn}").json()["partitions"]
    assert client.post(f"/v1/transactions/{txn}/abort").status_code == 200
    assert client.post(f"/v1/transactions/{txn}/commit").status_code == 409
    assert client.get("/v1/transactions/txn-missing").status_code == 404

    # Consumer groups: offsets, then members, their assignment and fenced commits.
    commit = {"offsets": [{"topic": "orders", "partition": 1, "offset": 1, "metadata": "m"}]}
    assert client.post("/v1/groups/g/offsets", json=commit).status_code == 200
    assert client.get("/v1/groups/g/offsets").json()["offsets"]
    joined = client.post("/v1/groups/g/members", json={"topics": ["orders"]}).json()
    member = f"/v1/groups/g/members/{joined['member_id']}"
    beat = {"member_epoch": joined["member_epoch"], "owned": joined["assignment"]}
    assert client.post(f"{member}/heartbeat", json=beat).json()["assignment"]
    assert client.post(f"{member}/heartbeat", json={**beat, "member_epoch": 0}).status_code == 409
    assert client.post("/v1/groups/g/members/nobody/heartbeat", json=beat).status_code == 404
    assert client.post("/v1/groups/g/members", json={"topics": ["orders"], "session_timeout_ms": 1}).status_code == 422
    assert client.post("/v1/groups/g/offsets", json=commit).status_code == 409  # not a member's commit
    assert client.get("/v1/groups").json()["groups"]
    assert client.get("/v1/groups/g").json()["members"]
    assert client.delete(member).status_code == 204
    assert client.get("/v1/groups/never-seen").status_code == 404

    # Share groups: receive, acknowledge (alone and with the next receive), extend, inside a transaction.
    received = client.post("/v1/share-groups/sg/receive", json={"topic": "orders", "max_messages": 2}).json()
    first, second = (m["receipt"] for m in received["messages"][:2])
    assert client.post("/v1/share-groups/sg/extend", json={"receipts": [first, "forged"]}).json()["results"]
    assert client.post("/v1/share-groups/sg/acks", json={"acks": [{"receipt": first, "type": "ACCEPT"}]}).json()
    again = {"topic": "orders", "acks": [{"receipt": second, "type": "RELEASE", "delay_ms": 0}]}
    assert client.post("/v1/share-groups/sg/receive", json=again).json()["results"]
    assert client.post("/v1/share-groups/sg/receive", json={"topic": "orders", "lock_ms": 0}).status_code == 422
    assert client.post("/v1/share-groups/sg/receive", json={"topic": "missing"}).status_code == 404
    assert client.get("/v1/share-groups/sg").json()["topics"]
    assert client.get("/v1/share-groups/never-seen").status_code == 404
    share_txn = client.post("/v1/transactions", json={}).json()["txn_id"]
    assert client.post(f"/v1/transactions/{share_txn}/acks", json={"group": "sg", "receipts": [first]}).json()
    assert client.post(f"/v1/transactions/{share_txn}/abort").status_code == 200
    assert "sg" in [g["group"] for g in client.get("/v1/share-groups").json()["share_groups"]]
    taken = client.post("/v1/share-groups/short-lived/receive", json={"topic": "orders", "max_messages": 1}).json()
    done = [{"receipt": m["receipt"], "type": "ACCEPT"} for m in taken["messages"]]
    assert client.post("/v1/share-groups/short-lived/acks", json={"acks": done}).status_code == 200
    assert client.delete("/v1/share-groups/short-lived").status_code == 204

    # Delay messages: scheduled (one far off, listed while it waits), too far, unknown topic.
    later = {"messages": [{"value": 1, "tag": "T", "delay_ms": 3_600_000}, {"value_base64": "AAE=", "deliver_at": 0}]}
    assert client.post("/v1/topics/orders/delayed-messages", json=later).json()["scheduled"]
    too_far = {"messages": [{"value": 1, "delay_ms": 10 * 24 * 3600 * 1000}]}
    assert client.post("/v1/topics/orders/delayed-messages", json=too_far).status_code == 422
    assert client.post("/v1/topics/missing/delayed-messages", json=later).status_code == 404
    assert client.get("/v1/delayed-messages", params={"topic": "orders"}).json()["delayed_messages"]
    assert client.get("/v1/rocketmq/sessions").json() == {"brokers": [], "sessions": []}  # no listener here

    # Mode 1: two half messages, polled for checks (one JSON, one binary), then resolved each way.
    half = {"topic": "orders", "producer_group": "pg", "transaction_id": "t-1", "value": 1, "headers": {"h": "v"}}
    committed = client.post("/v1/half-messages", json=half).json()["message_id"]
    assert client.post("/v1/half-messages", json=half).status_code == 200  # the same transaction id again
    binary = {"topic": "orders", "producer_group": "pg", "value_base64": "AAE="}
    rolled_back = client.post("/v1/half-messages", json=binary).json()["message_id"]
    listener = {"callback_url": "http://127.0.0.1:9/check", "ttl_seconds": 30, "secret": "s"}
    assert client.put("/v1/producer-groups/pg/listeners/i1", json=listener).status_code == 200
    assert client.delete("/v1/producer-groups/pg/listeners/i1").status_code == 204
    assert client.delete("/v1/producer-groups/pg/listeners/i1").status_code == 404
    assert len(client.get("/v1/producer-groups/pg/checks").json()["checks"]) == 2
    assert client.get("/v1/checker").json()["groups"]
    assert client.delete("/v1/topics/orders").status_code == 409  # prepared half messages target it
    assert client.post(f"/v1/half-messages/{committed}/commit").json()["state"] == "COMMITTED"
    assert client.post(f"/v1/half-messages/{rolled_back}/rollback").json()["state"] == "ROLLED_BACK"
    assert client.post(f"/v1/half-messages/{committed}/rollback").status_code == 409
    assert client.get(f"/v1/half-messages/{committed}").json()["state"] == "COMMITTED"
    assert client.get(f"/v1/half-messages/{rolled_back}").json()["value_base64"] == "AAE="
    assert len(client.get("/v1/half-messages", params={"producer_group": "pg"}).json()["half_messages"]) == 2
    given_up = client.post("/v1/half-messages", json={**binary, "transaction_id": "t-3"}).json()["message_id"]
    discard(client, settings, given_up)
    assert client.post(f"/v1/half-messages/{given_up}/recheck").json()["state"] == "PREPARED"
    assert client.post(f"/v1/half-messages/{given_up}/recheck").status_code == 409

    # Administration: alter and delete topics, list transactions.
    assert client.patch("/v1/topics/orders", json={"retention_ms": 3_600_000}).json()["config"]
    assert client.patch("/v1/topics/orders", json={"partitions": 1}).status_code == 422
    create_topic(client, "scratch", 1)
    assert client.delete("/v1/topics/scratch").status_code == 204
    assert client.get("/v1/transactions").json()["transactions"]

    # Access: principals, tokens and ACLs (with auth off, as here, anyone may manage them).
    assert client.post("/v1/principals", json={"name": "svc"}).status_code == 201
    assert client.post("/v1/principals", json={"name": "svc"}).status_code == 409
    assert client.get("/v1/principals").json()["principals"]
    issued = client.post("/v1/principals/svc/tokens").json()
    assert client.post("/v1/principals/nobody/tokens").status_code == 404
    assert client.get("/v1/tokens").json()["tokens"]
    rule = {"principal": "svc", "resource_type": "topic", "pattern": "orders", "pattern_type": "literal"}
    acl = client.post("/v1/acls", json={**rule, "operations": ["read"], "permission": "allow"}).json()
    assert client.get("/v1/acls").json()["acls"]
    assert client.delete(f"/v1/acls/{acl['acl_id']}").status_code == 204
    assert client.delete(f"/v1/tokens/{issued['token_id']}").status_code == 204

    # Operations.
    for path in ("/healthz", "/readyz", "/metrics", "/v1/cluster"):
        assert client.get(path).status_code == 200

    schemas.assert_covered()
