"""Several broker processes on one PostgreSQL: QueryRoute lists them all, the admin API shows every
process's RocketMQ sessions, and a client keeps working when the broker it talked to is killed."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc
import httpx
import pytest

from app.rocketmq.protocol import SERVICE_NAME, message_class, new
from tests.e2e.rocketmq_fixtures import RocketMQClient, create_topic, unique
from tests.support.broker_process import BrokerProcess, brokers_on, wait_for

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def postgres_url_for_module(postgres_databases: Any) -> Iterator[str]:
    url: str = postgres_databases.new()
    yield url
    postgres_databases.release(url)


@pytest.fixture(scope="module")
def brokers(postgres_url_for_module: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[BrokerProcess]]:
    directory = tmp_path_factory.mktemp("rocketmq-brokers")
    settings = {"grpc_session_timeout_seconds": 3, "broker_heartbeat_seconds": 1, "broker_expiry_seconds": 3}
    with brokers_on(postgres_url_for_module, directory, 2, listeners=("grpc_port",), **settings) as started:
        yield started


def _route_addresses(broker: BrokerProcess, topic: str) -> set[str]:
    with grpc.insecure_channel(f"127.0.0.1:{broker.settings['grpc_port']}") as channel:
        call = channel.unary_unary(
            f"/{SERVICE_NAME}/QueryRoute",
            request_serializer=message_class("QueryRouteRequest").SerializeToString,
            response_deserializer=message_class("QueryRouteResponse").FromString,
        )
        answer: Any = call(new("QueryRouteRequest", topic=new("Resource", name=topic)), metadata=[("x-mq-client-id", "t")])
    return {f"{q.broker.endpoints.addresses[0].host}:{q.broker.endpoints.addresses[0].port}" for q in answer.message_queues}


def test_query_route_lists_every_live_broker_and_sessions_show_everywhere(
    brokers: list[BrokerProcess], tmp_path_factory: pytest.TempPathFactory
) -> None:
    first, second = brokers
    topic = create_topic(first, unique("spread"), partitions=4)
    wanted = {f"127.0.0.1:{b.settings['grpc_port']}" for b in brokers}
    wait_for(lambda: _route_addresses(first, topic) == wanted, "the route to list both brokers")
    client = RocketMQClient(f"127.0.0.1:{first.settings['grpc_port']}", [topic], tmp_path_factory.mktemp("home"))
    try:
        client.call("send", topic=topic, body="hello")

        def listed() -> list[dict[str, Any]]:
            sessions: list[dict[str, Any]] = httpx.get(f"{second.url}/v1/rocketmq/sessions").json()["sessions"]
            return [s for s in sessions if s["client_type"] == "PRODUCER" and topic in s["topics"]]

        wait_for(listed, "the producer's session, seen from the other broker process", timeout=15)
    finally:
        client.close()


def test_a_client_keeps_working_when_its_broker_is_killed(
    brokers: list[BrokerProcess], tmp_path_factory: pytest.TempPathFactory
) -> None:
    first, _ = brokers
    topic = create_topic(first, unique("failover"), partitions=4)
    wanted = {f"127.0.0.1:{b.settings['grpc_port']}" for b in brokers}
    wait_for(lambda: _route_addresses(first, topic) == wanted, "the route to list both brokers")
    client = RocketMQClient(f"127.0.0.1:{first.settings['grpc_port']}", [topic], tmp_path_factory.mktemp("home"))
    try:
        group = unique("g")
        client.call("send", topic=topic, body="before")
        assert [m["body"] for m in client.call("receive", group=group, topic=topic)["messages"]] == ["before"]
        first.kill()
        sent = [client.try_call("send", topic=topic, body=f"after-{n}") for n in range(6)]
        assert all("error" not in s for s in sent), sent
        got = client.call("receive", group=group, topic=topic, count=6, timeout_s=30)["messages"]
        assert sorted(m["body"] for m in got) == sorted(f"after-{n}" for n in range(6))
    finally:
        client.close()
