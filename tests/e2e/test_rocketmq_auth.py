"""RocketMQ signatures over halfmq tokens and ACLs (HALFMQ_AUTH=token), with the official client and raw calls."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc
import httpx
import pytest

from app.rocketmq.protocol import SERVICE_NAME, enum_name, message_class, new
from tests.e2e.rocketmq_fixtures import RocketMQClient, create_topic, unique
from tests.support.broker_process import BrokerProcess, free_port

pytestmark = pytest.mark.e2e
ADMIN = "admin-token-for-rocketmq-tests"


@pytest.fixture(scope="module")
def secured(module_database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    path = tmp_path_factory.mktemp("rocketmq-auth")
    broker = BrokerProcess(
        module_database_url, log_path=path / "broker.log", grpc_port=free_port(), auth="token", admin_token=ADMIN
    )
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


def _admin(broker: BrokerProcess, method: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    response = httpx.request(method, f"{broker.url}{path}", json=body, headers={"authorization": f"Bearer {ADMIN}"})
    assert response.status_code in (200, 201), response.text
    answer: dict[str, Any] = response.json()
    return answer


@pytest.fixture(scope="module")
def keys(secured: BrokerProcess) -> dict[str, Any]:
    """A principal allowed to write and read topics sec-*, read groups sec-* and resolve their transactions."""
    _admin(secured, "POST", "/v1/principals", {"name": "shop"})
    token = _admin(secured, "POST", "/v1/principals/shop/tokens", {})
    for resource, pattern, operations in (
        ("topic", "sec-", ["read", "write"]), ("group", "sec-", ["read"]), ("producer_group", "rmq.sec-", ["write"])
    ):
        _admin(secured, "POST", "/v1/acls", {
            "principal": "shop", "resource_type": resource, "pattern": pattern, "pattern_type": "prefixed",
            "operations": operations, "permission": "allow",
        })
    return token


@pytest.fixture(scope="module")
def signed(secured: BrokerProcess, keys: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[RocketMQClient]:
    create_topic(secured, "sec-orders", token=ADMIN)
    client = RocketMQClient(
        f"127.0.0.1:{secured.settings['grpc_port']}", ["sec-orders"], tmp_path_factory.mktemp("rocketmq-home"),
        (keys["token_id"], keys["rocketmq_secret_key"]),
    )
    try:
        yield client
    finally:
        client.close()


def test_a_signed_client_with_the_rights_sends_commits_and_receives(signed: RocketMQClient) -> None:
    sent = signed.call("send", topic="sec-orders", body="paid")
    signed.call("transaction", topic="sec-orders", body="tx", action="commit")
    got = signed.call("receive", group=unique("sec-g"), topic="sec-orders", count=2)["messages"]
    assert sent["message_id"] in [m["message_id"] for m in got] and sorted(m["body"] for m in got) == ["paid", "tx"]


def test_a_signed_client_without_the_right_is_refused(signed: RocketMQClient, secured: BrokerProcess) -> None:
    topic = create_topic(secured, unique("other"), token=ADMIN)
    answer = signed.try_call("send", topic=topic, body="x")  # its route: no topic:describe on other-*
    assert "error" in answer


def _query_route(broker: BrokerProcess, topic: str, metadata: list[tuple[str, str]]) -> Any:
    request_class, response_class = message_class("QueryRouteRequest"), message_class("QueryRouteResponse")
    with grpc.insecure_channel(f"127.0.0.1:{broker.settings['grpc_port']}") as channel:
        call = channel.unary_unary(
            f"/{SERVICE_NAME}/QueryRoute",
            request_serializer=request_class.SerializeToString,
            response_deserializer=response_class.FromString,
        )
        return call(new("QueryRouteRequest", topic=new("Resource", name=topic)), metadata=metadata, timeout=5)


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "MQv2-HMAC-SHA1 Credential=0123456789abcdef, SignedHeaders=x-mq-date-time, Signature=00",
        "Bearer something",
    ],
)
def test_an_unsigned_or_wrongly_signed_call_is_unauthorized(
    secured: BrokerProcess, keys: dict[str, Any], authorization: str | None
) -> None:
    metadata = [("x-mq-client-id", "raw-client"), ("x-mq-date-time", "20260101T000000Z")]
    if authorization is not None:
        metadata.append(("authorization", authorization))
    answer = _query_route(secured, "sec-orders", metadata)
    assert enum_name("Code", answer.status.code) == "UNAUTHORIZED"


def test_a_signature_with_the_wrong_secret_key_is_unauthorized(secured: BrokerProcess, keys: dict[str, Any]) -> None:
    import hashlib
    import hmac
    from datetime import UTC, datetime

    date_time = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    signature = hmac.new(b"not-the-secret-key", date_time.encode(), hashlib.sha1).hexdigest()
    authorization = f"MQv2-HMAC-SHA1 Credential={keys['token_id']}, SignedHeaders=x-mq-date-time, Signature={signature}"
    metadata = [("x-mq-client-id", "raw"), ("x-mq-date-time", date_time), ("authorization", authorization)]
    assert enum_name("Code", _query_route(secured, "sec-orders", metadata).status.code) == "UNAUTHORIZED"
    good = hmac.new(keys["rocketmq_secret_key"].encode(), date_time.encode(), hashlib.sha1).hexdigest()
    metadata[-1] = ("authorization", authorization.replace(signature, good))
    assert enum_name("Code", _query_route(secured, "sec-orders", metadata).status.code) == "OK"
