"""Principals, tokens and ACLs through the API: errors, idempotence, immediate effect, audit and metrics."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.api.authorize import Authority
from app.main import create_app
from tests.integration.conftest import error_code, make_settings

ADMIN = "admin-token-for-tests"
AS_ADMIN = {"Authorization": f"Bearer {ADMIN}"}


@pytest.fixture
def secured(database_url: str) -> Iterator[TestClient]:
    with TestClient(create_app(make_settings(database_url, auth="token", admin_token=ADMIN))) as client:
        yield client


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def new_principal(client: TestClient, name: str, *acls: dict[str, Any]) -> dict[str, Any]:
    assert client.post("/v1/principals", json={"name": name}, headers=AS_ADMIN).status_code == 201
    issued = client.post(f"/v1/principals/{name}/tokens", headers=AS_ADMIN).json()
    for rule in acls:
        assert client.post("/v1/acls", json={"principal": name, **rule}, headers=AS_ADMIN).status_code == 201
    return issued  # type: ignore[no-any-return]


def metric(client: TestClient, name: str, **labels: str) -> float:
    text = client.get("/metrics", headers=AS_ADMIN).text
    wanted = ",".join(f'{k}="{v}"' for k, v in labels.items())
    found = re.search(rf"^{name}\{{{re.escape(wanted)}\}} (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def test_managing_principals_tokens_and_acls(secured: TestClient) -> None:
    issued = new_principal(secured, "app")
    assert issued["token"].startswith("hmq.") and issued["principal"] == "app"
    again = secured.post("/v1/principals", json={"name": "app"}, headers=AS_ADMIN)
    assert (again.status_code, error_code(again)) == (409, "PRINCIPAL_EXISTS")
    unknown = secured.post("/v1/principals/ghost/tokens", headers=AS_ADMIN)
    assert (unknown.status_code, error_code(unknown)) == (404, "PRINCIPAL_NOT_FOUND")
    listed = secured.get("/v1/tokens", headers=AS_ADMIN).json()["tokens"]
    assert [t["token_id"] for t in listed] == [issued["token_id"]]
    assert all("token" not in t and "secret_hash" not in t for t in listed)  # the secret is shown once only
    rule = {"principal": "app", "resource_type": "topic", "pattern": "orders", "operations": ["read", "write"]}
    first = secured.post("/v1/acls", json=rule, headers=AS_ADMIN).json()
    second = secured.post("/v1/acls", json=rule, headers=AS_ADMIN).json()
    assert first["acl_id"] == second["acl_id"]  # the same rule is stored once
    assert first["operations"] == ["read", "write"] and first["permission"] == "allow"
    assert secured.delete(f"/v1/acls/{first['acl_id']}", headers=AS_ADMIN).status_code == 204
    gone = secured.delete(f"/v1/acls/{first['acl_id']}", headers=AS_ADMIN)
    assert (gone.status_code, error_code(gone)) == (404, "ACL_NOT_FOUND")
    assert secured.delete(f"/v1/tokens/{issued['token_id']}", headers=AS_ADMIN).status_code == 204
    gone = secured.delete(f"/v1/tokens/{issued['token_id']}", headers=AS_ADMIN)
    assert (gone.status_code, error_code(gone)) == (404, "TOKEN_NOT_FOUND")


def test_a_principal_with_cluster_alter_manages_access_but_nothing_else(secured: TestClient) -> None:
    operator = new_principal(
        secured, "operator", {"resource_type": "cluster", "pattern": "cluster", "operations": ["alter"]}
    )
    assert secured.post("/v1/principals", json={"name": "worker"}, headers=bearer(operator["token"])).status_code == 201
    refused = secured.post("/v1/topics", json={"name": "orders"}, headers=bearer(operator["token"]))
    assert (refused.status_code, error_code(refused)) == (403, "FORBIDDEN")


def test_revocation_and_grants_apply_at_once_on_the_same_process(secured: TestClient) -> None:
    assert secured.post("/v1/topics", json={"name": "orders"}, headers=AS_ADMIN).status_code == 201
    issued = new_principal(secured, "app")
    assert secured.get("/v1/topics/orders", headers=bearer(issued["token"])).status_code == 403
    rule = {
        "principal": "app",
        "resource_type": "topic",
        "pattern": "ord",
        "pattern_type": "prefixed",
        "operations": ["describe"],
    }
    acl = secured.post("/v1/acls", json=rule, headers=AS_ADMIN).json()
    assert secured.get("/v1/topics/orders", headers=bearer(issued["token"])).status_code == 200
    deny = {**rule, "pattern": "orders", "pattern_type": "literal", "permission": "deny"}
    assert secured.post("/v1/acls", json=deny, headers=AS_ADMIN).status_code == 201
    assert secured.get("/v1/topics/orders", headers=bearer(issued["token"])).status_code == 403  # deny wins
    assert secured.delete(f"/v1/acls/{acl['acl_id']}", headers=AS_ADMIN).status_code == 204
    assert secured.delete(f"/v1/tokens/{issued['token_id']}", headers=AS_ADMIN).status_code == 204
    refused = secured.get("/v1/topics/orders", headers=bearer(issued["token"]))
    assert (refused.status_code, error_code(refused)) == (401, "UNAUTHENTICATED")


def test_refusals_and_changes_are_audited_and_counted(secured: TestClient, caplog: pytest.LogCaptureFixture) -> None:
    forbidden_before = metric(secured, "halfmq_auth_refusals_total", code="FORBIDDEN")
    unauthenticated_before = metric(secured, "halfmq_auth_refusals_total", code="UNAUTHENTICATED")
    with caplog.at_level(logging.INFO, logger="halfmq.audit"):
        issued = new_principal(secured, "app")
        assert secured.post("/v1/topics", json={"name": "t"}, headers=bearer(issued["token"])).status_code == 403
        assert secured.get("/v1/topics").status_code == 401
    events = [json.loads(r.getMessage()) for r in caplog.records if r.name == "halfmq.audit"]
    assert [e["event"] for e in events] == ["principal_created", "token_created", "forbidden"]
    assert events[1] == {
        "event": "token_created",
        "by": "(admin token)",
        "principal": "app",
        "token_id": issued["token_id"],
    }
    assert (
        events[2]["principal"] == "app" and events[2]["route"] == "/v1/topics" and "topic:alter" in events[2]["reason"]
    )
    assert metric(secured, "halfmq_auth_refusals_total", code="FORBIDDEN") == forbidden_before + 1
    assert metric(secured, "halfmq_auth_refusals_total", code="UNAUTHENTICATED") == unauthenticated_before + 1
    assert metric(secured, "halfmq_auth_changes_total", change="token_created") >= 1


def test_a_cache_that_cannot_refresh_stops_vouching_for_tokens(secured: TestClient) -> None:
    issued = new_principal(secured, "app", {"resource_type": "topic", "pattern": "*", "operations": ["describe"]})
    assert secured.get("/v1/topics", headers=bearer(issued["token"])).status_code == 200
    authority: Authority = secured.app.state.authority  # type: ignore[attr-defined]
    secured.portal.call(authority.cache.close)  # type: ignore[union-attr]  # no refresh from now on
    authority.cache._refreshed_at -= authority.cache.max_staleness_seconds + 1  # as if refreshes had failed since
    stale = secured.get("/v1/topics", headers=bearer(issued["token"]))
    assert (stale.status_code, error_code(stale)) == (503, "STORAGE_UNAVAILABLE")
    assert secured.get("/healthz").status_code == 200
    secured.portal.call(authority.cache.refresh)  # type: ignore[union-attr]
    assert secured.get("/v1/topics", headers=bearer(issued["token"])).status_code == 200


def test_with_auth_none_every_request_is_anonymous_and_allowed(client: TestClient) -> None:
    assert client.post("/v1/topics", json={"name": "open"}).status_code == 201
    assert client.post("/v1/principals", json={"name": "someone"}).status_code == 201
    assert client.get("/metrics").status_code == 200
