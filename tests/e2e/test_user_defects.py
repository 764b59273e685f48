"""Three things a new user hit against a real broker (issue #33), on both databases.

- Consume-transform-produce by group name: a transaction's offsets that name no member are
  taken while the group's consumer is a live member (Kafka's pre-KIP-447 TxnOffsetCommit).
- A token works on every broker process of the database the moment its creation answered.
- A callback URL of another scheme is refused as CALLBACK_NOT_ALLOWED, like any refused address.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import httpx
import pytest

from sdk import Client, Consumer, Message, Producer, TransactionalProducer
from tests.support.broker_process import BrokerProcess, brokers_on

pytestmark = pytest.mark.e2e

ADMIN = "defects-admin-token"


@pytest.fixture(scope="module")
def brokers(module_database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[BrokerProcess]]:
    """Two token-auth broker processes on one database."""
    directory = tmp_path_factory.mktemp("defects")
    with brokers_on(module_database_url, directory, 2, listeners=(), auth="token", admin_token=ADMIN) as started:
        yield started


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_consume_transform_produce_by_group_name_commits_while_the_consumer_is_a_member(
    brokers: list[BrokerProcess],
) -> None:
    url = brokers[0].url
    source, sink, group = unique("in"), unique("out"), unique("doubler")
    with Client(url, token=ADMIN) as admin:
        admin.create_topic(source, 1)
        admin.create_topic(sink, 1)
    with Producer(url, token=ADMIN) as producer:
        producer.send_batch(source, [Message(source, n) for n in range(5)])
    with (
        Consumer(url, group, [source], token=ADMIN) as consumer,
        TransactionalProducer(url, unique("doubler-txn"), token=ADMIN) as producer,
    ):
        producer.init_transactions()
        batch = consumer.poll(timeout=10.0)
        assert [m.value for m in batch] == [0, 1, 2, 3, 4]
        with producer.transaction():
            for m in batch:
                producer.send(sink, m.value * 2, partition=0)
            producer.send_offsets_to_transaction({(m.topic, m.partition): m.offset + 1 for m in batch}, group)
        with Client(url, token=ADMIN) as admin:
            committed = {(o.topic, o.partition): o.offset for o in admin.committed_offsets(group)}
            output = [m.value for m in admin.fetch(sink, 0, 0).messages]
    assert committed == {(source, 0): 5}
    assert output == [0, 2, 4, 6, 8]


def test_a_new_token_works_on_another_broker_process_at_once(brokers: list[BrokerProcess]) -> None:
    a, b = brokers
    name, topic = unique("app"), unique("shared")
    with httpx.Client(base_url=a.url, headers={"Authorization": f"Bearer {ADMIN}"}) as on_a:
        assert on_a.post("/v1/topics", json={"name": topic}).status_code == 201
        assert on_a.post("/v1/principals", json={"name": name}).status_code == 201
        acl = {"principal": name, "resource_type": "topic", "pattern": topic, "operations": ["describe"]}
        assert on_a.post("/v1/acls", json=acl).status_code == 201
        issued = on_a.post(f"/v1/principals/{name}/tokens").json()
    with httpx.Client(base_url=b.url, headers={"Authorization": f"Bearer {issued['token']}"}) as on_b:
        first = on_b.get(f"/v1/topics/{topic}")  # the first use, no waiting: the grant applies too
        assert first.status_code == 200, first.text
        assert first.json()["name"] == topic
        # A token nobody issued is still refused (after the same one look at the database).
        forged = issued["token"][:-4] + ("AAAA" if not issued["token"].endswith("AAAA") else "BBBB")
        refused = on_b.get(f"/v1/topics/{topic}", headers={"Authorization": f"Bearer {forged}"})
        assert refused.status_code == 401
        assert refused.json()["error"]["code"] == "UNAUTHENTICATED"


@pytest.mark.parametrize(
    "callback_url",
    ["file:///etc/passwd", "gopher://127.0.0.1:70/_x", "ftp://127.0.0.1/check", "javascript:alert(1)", "http://[::1"],
)
def test_a_callback_url_of_another_scheme_is_not_allowed(brokers: list[BrokerProcess], callback_url: str) -> None:
    with httpx.Client(base_url=brokers[0].url, headers={"Authorization": f"Bearer {ADMIN}"}) as client:
        response = client.put(
            f"/v1/producer-groups/{unique('shop')}/listeners/pod-1", json={"callback_url": callback_url}
        )
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "CALLBACK_NOT_ALLOWED"
