"""Every route of the OpenAPI document × (no token, a token without the right, a token with it).

The routes come from the app itself: a route with no case below fails the test (add
its case, with the rights the contract's table gives it), and a route that declares
no rights is refused even with every grant, so it fails too. Each case names the
exact ACLs that must let it through; with any one of them missing it must be 403,
with no token 401, and a refused request must leave the broker as it was.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.main import api_routes, create_app, undeclared_routes
from tests.integration.conftest import make_settings

ADMIN = "admin-secret-for-tests"
Grant = tuple[str, str, str]  # resource type, literal name, operation
Request = tuple[str, str, dict[str, Any] | None]  # method, url, JSON body


@dataclass
class World:
    """Resources every case may use, made by the admin; fresh ones come from ``fresh``."""

    admin: TestClient
    counter: Iterator[int] = field(default_factory=itertools.count)
    last_transactional_id: str = ""

    def call(self, method: str, url: str, body: Any = None, token: str = ADMIN) -> Any:
        response = self.admin.request(method, url, json=body, headers={"Authorization": f"Bearer {token}"})
        assert response.status_code < 300, f"{method} {url}: {response.status_code} {response.text}"
        return response.json() if response.content else None

    def fresh(self, prefix: str) -> str:
        return f"{prefix}{next(self.counter)}"

    def half_message(self, topic: str = "orders", group: str = "pg") -> str:
        body = {"topic": topic, "producer_group": group, "value": {"n": 1}}
        return str(self.call("POST", "/v1/half-messages", body)["message_id"])

    def transactional(self, transactional_id: str, token: str = ADMIN) -> tuple[int, int]:
        found = self.call("POST", "/v1/producers", {"transactional_id": transactional_id}, token)
        return int(found["producer_id"]), int(found["producer_epoch"])

    def transaction(self, transactional_id: str | None) -> str:
        body: dict[str, Any] = {}
        if transactional_id is not None:
            producer_id, epoch = self.transactional(transactional_id)
            body = {"producer_id": producer_id, "producer_epoch": epoch}
        return str(self.call("POST", "/v1/transactions", body)["txn_id"])

    def token_of(self, grants: list[Grant]) -> str:
        name = self.fresh("p")
        self.call("POST", "/v1/principals", {"name": name})
        token = str(self.call("POST", f"/v1/principals/{name}/tokens")["token"])
        for resource_type, pattern, operation in grants:
            acl = {"principal": name, "resource_type": resource_type, "pattern": pattern, "operations": [operation]}
            self.call("POST", "/v1/acls", acl)
        return token


@dataclass
class Case:
    """``setup`` makes what the request acts on and returns it; ``grants`` are the rights it needs."""

    setup: Callable[[World], tuple[Request, list[Grant]]]
    public: bool = False
    # A request that uses a producer id: made by ``owned(world, token)`` for the token that is to succeed,
    # whose principal obtains the producer (a producer id is usable only by its principal).
    owned: Callable[[World, str], Request] | None = None
    # A listing: (list field, item field, name) — the item is listed only with the grants in ``filtered_by``.
    listed: tuple[str, str, str] | None = None
    filtered_by: tuple[Grant, ...] = ()


def _produce_in_transaction(world: World) -> tuple[Request, list[Grant]]:
    tid = world.fresh("tx")
    txn = world.transaction(tid)
    body = {"messages": [{"value": 1}], "txn_id": txn}
    return ("POST", "/v1/topics/orders/partitions/0/messages", body), [
        ("topic", "orders", "write"),
        ("transactional_id", tid, "write"),
    ]


def _begin_with_producer(world: World) -> tuple[Request, list[Grant]]:
    world.last_transactional_id = tid = world.fresh("tx")
    producer_id, epoch = world.transactional(tid)
    return ("POST", "/v1/transactions", {"producer_id": producer_id, "producer_epoch": epoch}), [
        ("transactional_id", tid, "write")
    ]


def _begin_with_own_producer(world: World, token: str) -> Request:
    """The same transactional id, initialised by the principal that is to begin (the id passes to it)."""
    producer_id, epoch = world.transactional(world.last_transactional_id, token)
    return ("POST", "/v1/transactions", {"producer_id": producer_id, "producer_epoch": epoch})


def _txn_offsets(world: World) -> tuple[Request, list[Grant]]:
    tid = world.fresh("tx")
    txn = world.transaction(tid)
    body = {"group": "g1", "offsets": [{"topic": "orders", "partition": 0, "offset": 0}]}
    grants = [("transactional_id", tid, "write"), ("group", "g1", "read"), ("topic", "orders", "read")]
    return ("POST", f"/v1/transactions/{txn}/offsets", body), grants


def _txn_end(action: str, anonymous: bool) -> Callable[[World], tuple[Request, list[Grant]]]:
    def setup(world: World) -> tuple[Request, list[Grant]]:
        tid = None if anonymous else world.fresh("tx")
        txn = world.transaction(tid)
        grant = ("cluster", "cluster", "write") if tid is None else ("transactional_id", tid, "write")
        return ("POST", f"/v1/transactions/{txn}/{action}", None), [grant]

    return setup


def _half(action: str, operation: str) -> Callable[[World], tuple[Request, list[Grant]]]:
    def setup(world: World) -> tuple[Request, list[Grant]]:
        message_id = world.half_message()
        method, url = (
            ("GET", f"/v1/half-messages/{message_id}")
            if action == ""
            else ("POST", f"/v1/half-messages/{message_id}/{action}")
        )
        return (method, url, None), [("producer_group", "pg", operation), ("topic", "orders", operation)]

    return setup


def _listener(world: World, method: str) -> tuple[Request, list[Grant]]:
    group = world.fresh("pg")
    url = f"/v1/producer-groups/{group}/listeners/i1"
    body = {"callback_url": "http://127.0.0.1:9/check", "ttl_seconds": 30}
    if method == "DELETE":
        world.call("PUT", url, body)
        return ("DELETE", url, None), [("producer_group", group, "write")]
    return ("PUT", url, body), [("producer_group", group, "write")]


def _token_revoke(world: World) -> tuple[Request, list[Grant]]:
    world.call("POST", "/v1/principals", {"name": (name := world.fresh("victim"))})
    token_id = world.call("POST", f"/v1/principals/{name}/tokens")["token_id"]
    return ("DELETE", f"/v1/tokens/{token_id}", None), [("cluster", "cluster", "alter")]


def _acl_delete(world: World) -> tuple[Request, list[Grant]]:
    acl = world.call(
        "POST",
        "/v1/acls",
        {"principal": "*", "resource_type": "topic", "pattern": world.fresh("x"), "operations": ["read"]},
    )
    return ("DELETE", f"/v1/acls/{acl['acl_id']}", None), [("cluster", "cluster", "alter")]


def _recheck(world: World) -> tuple[Request, list[Grant]]:
    message_id = world.half_message()
    broker = world.admin.app.state.broker  # type: ignore[attr-defined]
    world.admin.portal.call(broker.halves.discard, message_id)  # type: ignore[union-attr]  # as the checker gives up
    grants = [("producer_group", "pg", "write"), ("topic", "orders", "write")]
    return ("POST", f"/v1/half-messages/{message_id}/recheck", None), grants


def _topic_delete(world: World) -> tuple[Request, list[Grant]]:
    world.call("POST", "/v1/topics", {"name": (name := world.fresh("doomed"))})
    return ("DELETE", f"/v1/topics/{name}", None), [("topic", name, "alter")]


def _member(world: World, action: str) -> tuple[Request, list[Grant]]:
    group = world.fresh("cg")
    joined = world.call("POST", f"/v1/groups/{group}/members", {"topics": ["orders"]})
    url = f"/v1/groups/{group}/members/{joined['member_id']}"
    grants = [("group", group, "read")]
    if action == "leave":
        return ("DELETE", url, None), grants
    owned = joined["assignment"]
    return ("POST", f"{url}/heartbeat", {"member_epoch": joined["member_epoch"], "owned": owned}), grants


def _share_group(world: World) -> tuple[Request, list[Grant]]:
    group = world.fresh("sg")
    world.call("POST", f"/v1/share-groups/{group}/receive", {"topic": "orders", "max_messages": 1})
    return ("GET", f"/v1/share-groups/{group}", None), [("group", group, "describe"), ("topic", "orders", "describe")]


def _receipt(world: World, group: str) -> str:
    """A real receipt of ``group`` for a message of orders (its topic must be readable to acknowledge it)."""
    received = world.call("POST", f"/v1/share-groups/{group}/receive", {"topic": "orders", "max_messages": 1})
    return str(received["messages"][0]["receipt"])


def _share_acks(world: World) -> tuple[Request, list[Grant]]:
    group = world.fresh("sg")
    body = {"acks": [{"receipt": _receipt(world, group), "type": "RELEASE"}]}
    return ("POST", f"/v1/share-groups/{group}/acks", body), [("group", group, "read"), ("topic", "orders", "read")]


def _share_extend(world: World) -> tuple[Request, list[Grant]]:
    group = world.fresh("sg")
    body = {"receipts": [_receipt(world, group)]}
    return ("POST", f"/v1/share-groups/{group}/extend", body), [("group", group, "read"), ("topic", "orders", "read")]


def _share_group_delete(world: World) -> tuple[Request, list[Grant]]:
    group = world.fresh("sg")
    world.call("POST", f"/v1/share-groups/{group}/acks", {"acks": [{"receipt": _receipt(world, group), "type": "RELEASE"}]})
    return ("DELETE", f"/v1/share-groups/{group}", None), [("group", group, "alter")]


def _share_group_listed(world: World) -> tuple[Request, list[Grant]]:
    world.call("POST", "/v1/share-groups/listed-sg/receive", {"topic": "orders", "max_messages": 1, "lock_ms": 100})
    return ("GET", "/v1/share-groups", None), [("group", "listed-sg", "describe")]


def _acks_in_transaction(world: World) -> tuple[Request, list[Grant]]:
    tid = world.fresh("tx")
    txn = world.transaction(tid)
    group = world.fresh("sg")
    body = {"group": group, "receipts": [_receipt(world, group)]}
    grants = [("transactional_id", tid, "write"), ("group", group, "read"), ("topic", "orders", "read")]
    return ("POST", f"/v1/transactions/{txn}/acks", body), grants


def _fixed(request: Request, grants: list[Grant]) -> Callable[[World], tuple[Request, list[Grant]]]:
    return lambda world: (request, grants)


CLUSTER_ALTER = [("cluster", "cluster", "alter")]
CLUSTER_DESCRIBE = [("cluster", "cluster", "describe")]

# (method, path template) -> the cases of that route. The rights are the contract's table.
CASES: dict[tuple[str, str], list[Case]] = {
    ("GET", "/healthz"): [Case(_fixed(("GET", "/healthz", None), []), public=True)],
    ("GET", "/readyz"): [Case(_fixed(("GET", "/readyz", None), []), public=True)],
    ("GET", "/metrics"): [Case(_fixed(("GET", "/metrics", None), CLUSTER_DESCRIBE))],
    ("GET", "/v1/cluster"): [Case(_fixed(("GET", "/v1/cluster", None), CLUSTER_DESCRIBE))],
    ("POST", "/v1/topics"): [
        Case(
            lambda w: (
                ("POST", "/v1/topics", {"name": (n := w.fresh("new")), "partitions": 1}),
                [("topic", n, "alter")],
            )
        )
    ],
    ("GET", "/v1/topics"): [
        Case(
            _fixed(("GET", "/v1/topics", None), [("topic", "orders", "describe")]),
            listed=("topics", "name", "orders"),
            filtered_by=(("topic", "orders", "describe"),),
        )
    ],
    ("GET", "/v1/topics/{topic}"): [
        Case(_fixed(("GET", "/v1/topics/orders", None), [("topic", "orders", "describe")]))
    ],
    ("GET", "/v1/topics/{topic}/offsets"): [
        Case(_fixed(("GET", "/v1/topics/orders/offsets?timestamp=0", None), [("topic", "orders", "describe")]))
    ],
    ("POST", "/v1/topics/{topic}/messages"): [
        Case(
            _fixed(("POST", "/v1/topics/orders/messages", {"messages": [{"value": 1}]}), [("topic", "orders", "write")])
        )
    ],
    ("POST", "/v1/topics/{topic}/partitions/{partition}/messages"): [
        Case(
            _fixed(
                ("POST", "/v1/topics/orders/partitions/1/messages", {"messages": [{"value": 1}]}),
                [("topic", "orders", "write")],
            )
        ),
        Case(_produce_in_transaction),
    ],
    ("GET", "/v1/topics/{topic}/partitions/{partition}/messages"): [
        Case(_fixed(("GET", "/v1/topics/orders/partitions/0/messages", None), [("topic", "orders", "read")]))
    ],
    ("POST", "/v1/producers"): [
        Case(
            lambda w: (
                ("POST", "/v1/producers", {"transactional_id": (t := w.fresh("tx"))}),
                [("transactional_id", t, "write")],
            )
        ),
        Case(_fixed(("POST", "/v1/producers", {}), [])),  # an idempotent producer: any known token
    ],
    ("POST", "/v1/groups/{group}/offsets"): [
        Case(
            _fixed(
                ("POST", "/v1/groups/g1/offsets", {"offsets": [{"topic": "orders", "partition": 0, "offset": 1}]}),
                [("group", "g1", "read"), ("topic", "orders", "read")],
            )
        )
    ],
    ("GET", "/v1/groups/{group}/offsets"): [
        Case(
            _fixed(
                ("GET", "/v1/groups/seeded/offsets", None), [("group", "seeded", "read"), ("topic", "orders", "read")]
            ),
            listed=("offsets", "topic", "orders"),
            filtered_by=(("topic", "orders", "read"),),
        )
    ],
    ("POST", "/v1/transactions"): [
        Case(_begin_with_producer, owned=_begin_with_own_producer),
        Case(_fixed(("POST", "/v1/transactions", {}), [("cluster", "cluster", "write")])),  # Pulsar-style
    ],
    ("GET", "/v1/transactions/{txn_id}"): [
        Case(
            lambda w: (
                ("GET", f"/v1/transactions/{w.transaction(t := w.fresh('tx'))}", None),
                [("transactional_id", t, "describe")],
            )
        ),
        Case(
            lambda w: (("GET", f"/v1/transactions/{w.transaction(None)}", None), [("cluster", "cluster", "describe")])
        ),
    ],
    ("POST", "/v1/transactions/{txn_id}/offsets"): [Case(_txn_offsets)],
    ("POST", "/v1/transactions/{txn_id}/commit"): [Case(_txn_end("commit", False)), Case(_txn_end("commit", True))],
    ("POST", "/v1/transactions/{txn_id}/abort"): [Case(_txn_end("abort", False)), Case(_txn_end("abort", True))],
    ("POST", "/v1/half-messages"): [
        Case(
            _fixed(
                ("POST", "/v1/half-messages", {"topic": "orders", "producer_group": "pg", "value": 1}),
                [("producer_group", "pg", "write"), ("topic", "orders", "write")],
            )
        )
    ],
    ("POST", "/v1/half-messages/{message_id}/commit"): [Case(_half("commit", "write"))],
    ("POST", "/v1/half-messages/{message_id}/rollback"): [Case(_half("rollback", "write"))],
    ("GET", "/v1/half-messages/{message_id}"): [Case(_half("", "describe"))],
    ("GET", "/v1/half-messages"): [
        Case(
            _fixed(
                ("GET", "/v1/half-messages", None),
                [("producer_group", "pg", "describe"), ("topic", "orders", "describe")],
            ),
            listed=("half_messages", "producer_group", "pg"),
            filtered_by=(("producer_group", "pg", "describe"), ("topic", "orders", "describe")),
        )
    ],
    ("PUT", "/v1/producer-groups/{group}/listeners/{instance_id}"): [Case(lambda w: _listener(w, "PUT"))],
    ("DELETE", "/v1/producer-groups/{group}/listeners/{instance_id}"): [Case(lambda w: _listener(w, "DELETE"))],
    ("GET", "/v1/producer-groups/{group}/checks"): [
        Case(_fixed(("GET", "/v1/producer-groups/pg/checks", None), [("producer_group", "pg", "write")]))
    ],
    ("POST", "/v1/principals"): [Case(lambda w: (("POST", "/v1/principals", {"name": w.fresh("new")}), CLUSTER_ALTER))],
    ("GET", "/v1/principals"): [Case(_fixed(("GET", "/v1/principals", None), CLUSTER_DESCRIBE))],
    ("POST", "/v1/principals/{name}/tokens"): [
        Case(
            lambda w: (
                (
                    "POST",
                    f"/v1/principals/{w.call('POST', '/v1/principals', {'name': w.fresh('n')})['name']}/tokens",
                    None,
                ),
                CLUSTER_ALTER,
            )
        )
    ],
    ("GET", "/v1/tokens"): [Case(_fixed(("GET", "/v1/tokens", None), CLUSTER_DESCRIBE))],
    ("DELETE", "/v1/tokens/{token_id}"): [Case(_token_revoke)],
    ("POST", "/v1/acls"): [
        Case(
            lambda w: (
                (
                    "POST",
                    "/v1/acls",
                    {"principal": "*", "resource_type": "group", "pattern": w.fresh("g"), "operations": ["read"]},
                ),
                CLUSTER_ALTER,
            )
        )
    ],
    ("GET", "/v1/acls"): [Case(_fixed(("GET", "/v1/acls", None), CLUSTER_DESCRIBE))],
    ("DELETE", "/v1/acls/{acl_id}"): [Case(_acl_delete)],
    ("PATCH", "/v1/topics/{topic}"): [
        Case(_fixed(("PATCH", "/v1/topics/orders", {"retention_ms": 3_600_000}), [("topic", "orders", "alter")]))
    ],
    ("DELETE", "/v1/topics/{topic}"): [Case(_topic_delete)],
    ("GET", "/v1/transactions"): [Case(_fixed(("GET", "/v1/transactions", None), CLUSTER_DESCRIBE))],
    ("GET", "/v1/checker"): [Case(_fixed(("GET", "/v1/checker", None), CLUSTER_DESCRIBE))],
    ("POST", "/v1/half-messages/{message_id}/recheck"): [Case(_recheck)],
    ("POST", "/v1/groups/{group}/members"): [
        Case(
            lambda w: (
                ("POST", f"/v1/groups/{(g := w.fresh('cg'))}/members", {"topics": ["orders"]}),
                [("group", g, "read"), ("topic", "orders", "read")],
            )
        )
    ],
    ("POST", "/v1/groups/{group}/members/{member_id}/heartbeat"): [Case(lambda w: _member(w, "heartbeat"))],
    ("DELETE", "/v1/groups/{group}/members/{member_id}"): [Case(lambda w: _member(w, "leave"))],
    ("GET", "/v1/groups"): [
        Case(
            _fixed(("GET", "/v1/groups", None), [("group", "seeded", "describe")]),
            listed=("groups", "group", "seeded"),
            filtered_by=(("group", "seeded", "describe"),),
        )
    ],
    ("POST", "/v1/share-groups/{group}/receive"): [
        Case(
            _fixed(
                ("POST", "/v1/share-groups/sg/receive", {"topic": "orders", "max_messages": 1, "lock_ms": 100}),
                [("group", "sg", "read"), ("topic", "orders", "read")],
            )
        )
    ],
    ("POST", "/v1/share-groups/{group}/acks"): [Case(_share_acks)],
    ("POST", "/v1/share-groups/{group}/extend"): [Case(_share_extend)],
    ("GET", "/v1/share-groups/{group}"): [
        Case(_share_group, listed=("topics", "topic", "orders"), filtered_by=(("topic", "orders", "describe"),))
    ],
    ("GET", "/v1/share-groups"): [
        Case(
            _share_group_listed,
            listed=("share_groups", "group", "listed-sg"),
            filtered_by=(("group", "listed-sg", "describe"),),
        )
    ],
    ("DELETE", "/v1/share-groups/{group}"): [Case(_share_group_delete)],
    ("POST", "/v1/transactions/{txn_id}/acks"): [Case(_acks_in_transaction)],
    ("GET", "/v1/groups/{group}"): [
        Case(
            _fixed(("GET", "/v1/groups/seeded", None), [("group", "seeded", "describe"), ("topic", "orders", "describe")]),
            listed=("offsets", "topic", "orders"),
            filtered_by=(("topic", "orders", "describe"),),
        )
    ],
    ("POST", "/v1/topics/{topic}/delayed-messages"): [
        Case(
            _fixed(
                ("POST", "/v1/topics/orders/delayed-messages", {"messages": [{"value": 1, "delay_ms": 3_600_000}]}),
                [("topic", "orders", "write")],
            )
        )
    ],
    ("GET", "/v1/delayed-messages"): [
        Case(
            _fixed(("GET", "/v1/delayed-messages", None), [("topic", "orders", "describe")]),
            listed=("delayed_messages", "topic", "orders"),
            filtered_by=(("topic", "orders", "describe"),),
        )
    ],
    ("GET", "/v1/rocketmq/sessions"): [Case(_fixed(("GET", "/v1/rocketmq/sessions", None), CLUSTER_DESCRIBE))],
}


def openapi_operations(client: TestClient) -> list[tuple[str, str]]:
    document = client.get("/openapi.json").json()
    return sorted((method.upper(), path) for path, item in document["paths"].items() for method in item)


@pytest.fixture
def world(database_url: str) -> Iterator[World]:
    settings = make_settings(database_url, auth="token", admin_token=ADMIN)
    with TestClient(create_app(settings)) as client:
        world = World(client)
        world.call("POST", "/v1/topics", {"name": "orders", "partitions": 2})
        world.call("POST", "/v1/topics/orders/messages", {"messages": [{"value": n} for n in range(3)]})
        world.call("POST", "/v1/groups/seeded/offsets", {"offsets": [{"topic": "orders", "partition": 0, "offset": 1}]})
        world.half_message()  # something for the half-message listing to show
        delayed = {"messages": [{"value": 1, "delay_ms": 3_600_000}]}
        world.call("POST", "/v1/topics/orders/delayed-messages", delayed)  # and for the delay-message listing
        yield world


def send(world: World, request: Request, token: str | None) -> Any:
    method, url, body = request
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    return world.admin.request(method, url, json=body, headers=headers)


ANY_JSON_FIELDS = {"value"}  # fields declared as any JSON value: no type is wrong for them


def wrong_types(value: Any, where: str = "body") -> Iterator[tuple[str, Any]]:
    """Every way to give one field of ``value`` a value of a JSON type it does not have: (where, the body)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key in ANY_JSON_FIELDS:
                continue
            for place, wrong in wrong_types(item, f"{where}.{key}"):
                yield place, {**value, key: wrong}
    elif isinstance(value, list):
        for index, item in enumerate(value):
            for place, wrong in wrong_types(item, f"{where}[{index}]"):
                yield place, [*value[:index], wrong, *value[index + 1 :]]
        yield where, "[]"
    if isinstance(value, bool):
        yield from ((where, wrong) for wrong in ("true", "false", 1, 0, "yes", "on", 1.0))
    elif isinstance(value, int):
        yield from ((where, wrong) for wrong in (str(value), float(value), True, [value]))
    elif isinstance(value, str):
        yield from ((where, wrong) for wrong in (7, True, [value], {"s": value}))
    elif isinstance(value, dict):
        yield where, "{}"


def check_case(world: World, route: tuple[str, str], case: Case) -> list[str]:
    """What went wrong with one case (empty: nothing)."""
    problems: list[str] = []
    request, grants = case.setup(world)
    label = f"{route[0]} {route[1]} ({request[0]} {request[1]})"
    if case.public:
        answer = send(world, request, None)
        return [] if answer.status_code < 300 else [f"{label}: public, but {answer.status_code} without a token"]
    before = world.admin.get("/v1/topics/orders", headers={"Authorization": f"Bearer {ADMIN}"}).json()
    answer = send(world, request, None)
    if answer.status_code != 401 or answer.json()["error"]["code"] != "UNAUTHENTICATED":
        problems.append(f"{label}: without a token {answer.status_code}, expected 401 UNAUTHENTICATED")
    answer = send(world, request, "hmq.0000000000000000.unknown-token-unknown-token-unknown-token-xx")
    if answer.status_code != 401:
        problems.append(f"{label}: with an unknown token {answer.status_code}, expected 401")
    for missing in [g for g in grants if g not in case.filtered_by]:
        answer = send(world, request, world.token_of([g for g in grants if g != missing]))
        if answer.status_code != 403 or answer.json()["error"]["code"] != "FORBIDDEN":
            problems.append(f"{label}: without {missing} {answer.status_code}, expected 403 FORBIDDEN")
    after = world.admin.get("/v1/topics/orders", headers={"Authorization": f"Bearer {ADMIN}"}).json()
    if before != after:
        problems.append(f"{label}: a refused request changed the topic: {before} -> {after}")
    if case.listed is not None:
        items, item_field, name = case.listed
        unfiltered = [g for g in grants if g not in case.filtered_by]
        for missing in case.filtered_by:
            token = world.token_of(unfiltered + [g for g in case.filtered_by if g != missing])
            shown = send(world, request, token).json()[items]
            if any(item[item_field] == name for item in shown):
                problems.append(f"{label}: lists {name} to a principal without {missing}")
        shown = send(world, request, world.token_of(unfiltered)).json()[items]
        if any(item[item_field] == name for item in shown):
            problems.append(f"{label}: lists {name} to a principal without the right")
    method, url, body = request
    if body is not None:
        allowed = world.token_of(grants)
        for where, wrong in wrong_types(body):
            answer = send(world, (method, url, wrong), allowed)
            if answer.status_code < 400 or answer.status_code >= 500:
                problems.append(f"{label}: {where} = {wrong!r} answered {answer.status_code}, expected a 4xx refusal")
    allowed = world.token_of(grants)
    if case.owned is not None:
        request = case.owned(world, allowed)
        stranger = send(world, request, world.token_of(grants))  # the same rights, someone else's producer
        if stranger.status_code != 403:
            problems.append(f"{label}: another principal's producer id answered {stranger.status_code}, expected 403")
    answer = send(world, request, allowed)
    if answer.status_code >= 300:
        problems.append(f"{label}: with {grants} {answer.status_code} {answer.text[:200]}, expected success")
    elif case.listed is not None:
        items, item_field, name = case.listed
        if not any(item[item_field] == name for item in answer.json()[items]):
            problems.append(f"{label}: does not list {name} to a principal with {grants}")
    return problems


def test_every_route_answers_401_403_or_success_by_its_declared_rights(world: World) -> None:
    operations = openapi_operations(world.admin)
    assert len(operations) >= 30
    problems = [
        f"{method} {path}: no case in CASES; add one with its rights"
        for method, path in operations
        if (method, path) not in CASES
    ]
    for route in operations:
        for case in CASES.get(route, []):
            problems.extend(check_case(world, route, case))
    assert not problems, "\n".join(problems)


def test_every_route_of_the_app_declares_its_rights(database_url: str) -> None:
    app = create_app(make_settings(database_url, auth="token", admin_token=ADMIN))
    routes = api_routes(app)
    assert len(routes) >= 30  # the walk finds the routes of the included routers
    assert undeclared_routes(app) == []


def test_a_route_without_a_declaration_is_refused_even_to_the_admin(database_url: str) -> None:
    app = create_app(make_settings(database_url, auth="token", admin_token=ADMIN))

    @app.get("/v1/undeclared")
    async def undeclared() -> dict[str, str]:
        return {"secret": "data"}

    assert undeclared_routes(app) == ["['GET'] /v1/undeclared"]
    with TestClient(app) as client:
        assert client.get("/v1/undeclared").status_code == 401
        refused = client.get("/v1/undeclared", headers={"Authorization": f"Bearer {ADMIN}"})
        assert refused.status_code == 403
        assert refused.json()["error"]["code"] == "FORBIDDEN"


def test_the_share_group_list_names_only_the_topics_the_caller_may_describe(world: World) -> None:
    request, grants = _share_group_listed(world)
    without_topic = send(world, request, world.token_of(grants)).json()["share_groups"]
    with_topic = send(world, request, world.token_of([*grants, ("topic", "orders", "describe")])).json()["share_groups"]
    assert [g["topics"] for g in without_topic if g["group"] == "listed-sg"] == [[]]
    assert [g["topics"] for g in with_topic if g["group"] == "listed-sg"] == [["orders"]]
