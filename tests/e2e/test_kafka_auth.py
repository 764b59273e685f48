"""SASL/PLAIN and ACLs over the Kafka protocol, with confluent-kafka against a broker with HALFMQ_AUTH=token.

A halfmq token is the SASL password; what the token's principal may do is what its ACLs
allow over REST (docs/kafka.md, docs/security.md). On both databases.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.support.broker_process import BrokerProcess, free_port

pytestmark = pytest.mark.e2e

ADMIN = "kafka-e2e-admin"
APP = "kafka-app"


@pytest.fixture(scope="module")
def broker(module_database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    path = tmp_path_factory.mktemp("kafka-auth")
    with BrokerProcess(
        module_database_url, log_path=path / "broker.log", kafka_port=free_port(), auth="token", admin_token=ADMIN,
        group_min_session_timeout_ms=1000,
    ) as process:
        yield process


@pytest.fixture(scope="module")
def token(broker: BrokerProcess) -> str:
    """The app's token: topics ``ok-*`` read and write, groups ``g-*``, transactional id ``tx-ok``; nothing else."""
    with httpx.Client(base_url=broker.url, headers={"Authorization": f"Bearer {ADMIN}"}, timeout=30) as admin:
        assert admin.post("/v1/principals", json={"name": APP}).status_code == 201
        for resource_type, pattern, pattern_type, operations in (
            ("topic", "ok-", "prefixed", ["read", "write"]),
            ("group", "g-", "prefixed", ["read"]),
            ("transactional_id", "tx-ok", "literal", ["write"]),
        ):
            acl = {"principal": APP, "resource_type": resource_type, "pattern": pattern, "pattern_type": pattern_type,
                   "operations": operations, "permission": "allow"}
            assert admin.post("/v1/acls", json=acl).status_code == 201, acl
        for name in ("ok-orders", "secret"):
            assert admin.post("/v1/topics", json={"name": name, "partitions": 1}).status_code == 201
        issued: str = admin.post(f"/v1/principals/{APP}/tokens").json()["token"]
    return issued


def sasl(broker: BrokerProcess, password: str, **conf: Any) -> dict[str, Any]:
    return {
        "bootstrap.servers": broker.kafka_bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN",
        "sasl.username": "any", "sasl.password": password, **conf,
    }


def delivered(producer: Producer, topic: str, value: bytes) -> KafkaError | None:
    """Produce one record; the delivery report's error (None: written)."""
    outcome: list[KafkaError | None] = []
    producer.produce(topic, value=value, on_delivery=lambda error, _: outcome.append(error))
    producer.flush(20)
    assert outcome, "no delivery report"
    return outcome[0]


def test_a_token_produces_and_consumes_what_its_acls_allow_and_is_refused_the_rest(
    broker: BrokerProcess, token: str
) -> None:
    producer = Producer(sasl(broker, token))
    assert delivered(producer, "ok-orders", b"allowed") is None
    refused = delivered(producer, "secret", b"refused")
    assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # Metadata lists only the topics the principal may describe.
    assert set(AdminClient(sasl(broker, token)).list_topics(timeout=10).topics) == {"ok-orders"}

    reader = Consumer(sasl(broker, token, **{"group.id": f"g-{uuid.uuid4().hex[:6]}", "auto.offset.reset": "earliest"}))
    reader.assign([TopicPartition("ok-orders", 0, 0)])
    message = reader.poll(20)
    assert message is not None and message.error() is None and message.value() == b"allowed"
    reader.commit(message, asynchronous=False)
    reader.close()

    outsider = Consumer(sasl(broker, token, **{"group.id": "other-group", "auto.offset.reset": "earliest"}))
    outsider.subscribe(["ok-orders"])
    errors = []
    deadline = time.monotonic() + 20
    while not errors and time.monotonic() < deadline:
        polled = outsider.poll(0.2)
        if polled is not None and polled.error() is not None:
            errors.append(polled.error().code())
        assert polled is None or polled.error() is not None, "a group outside the ACLs read a record"
    assert errors == [KafkaError.GROUP_AUTHORIZATION_FAILED]
    outsider.close()


def test_a_transactional_id_outside_the_acls_is_refused(broker: BrokerProcess, token: str) -> None:
    allowed = Producer(sasl(broker, token, **{"transactional.id": "tx-ok"}))
    allowed.init_transactions(20)
    allowed.begin_transaction()
    allowed.produce("ok-orders", value=b"in a transaction")
    allowed.commit_transaction(20)
    refused = Producer(sasl(broker, token, **{"transactional.id": "tx-other"}))
    with pytest.raises(KafkaException) as raised:
        refused.init_transactions(20)
    assert raised.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def test_a_wrong_password_fails_authentication(broker: BrokerProcess, token: str) -> None:
    errors: list[KafkaError] = []
    producer = Producer(sasl(broker, "hmq.not-a-token", error_cb=errors.append))
    producer.produce("ok-orders", value=b"never")
    deadline = time.monotonic() + 20
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION, errors
    assert len(producer) == 1  # nothing was delivered
    producer.purge()
