"""The Kafka protocol with the official Python clients against a real broker process, on both databases.

One promise per test (CONTRACT v1.3): what Kafka clients write and read, how transactions,
fencing and groups behave, and that REST, half messages and Kafka see one log.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.end_txn.v5.request import EndTxnRequest
from kio.schema.errors import ErrorCode
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.offset_fetch.v7.request import OffsetFetchRequest, OffsetFetchRequestTopic
from kio.schema.produce.v12.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.static.primitive import i16, i32, i32Timedelta

from app.kafka.record_batches import KafkaRecord, OutgoingBatch, write_batch
from tests.support.broker_process import BrokerProcess, free_port
from tests.support.kafka_wire import KafkaWire

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def broker(module_database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    path = tmp_path_factory.mktemp("kafka-broker")
    process = BrokerProcess(
        module_database_url, log_path=path / "broker.log", kafka_port=free_port(), group_min_session_timeout_ms=1000,
        group_heartbeat_interval_ms=500,
    )
    process.start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture()
def rest(broker: BrokerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=broker.url, timeout=30) as client:
        yield client


@pytest.fixture()
def new_topic(rest: httpx.Client) -> Callable[..., str]:
    def create(partitions: int = 1) -> str:
        name = f"k-{uuid.uuid4().hex[:10]}"
        assert rest.post("/v1/topics", json={"name": name, "partitions": partitions}).status_code == 201
        return name

    return create


def consumer(broker: BrokerProcess, **conf: Any) -> Consumer:
    settings = {
        "bootstrap.servers": broker.kafka_bootstrap,
        "group.id": f"g-{uuid.uuid4().hex[:8]}",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }
    settings.update(conf)
    return Consumer(settings)


def drain(source: Consumer, want: int, timeout: float = 20.0, settle: float = 0.0) -> list[Any]:
    """Poll until ``want`` records came (then ``settle`` seconds more, to catch extras) or time is up."""
    got: list[Any] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        message = source.poll(0.2)
        if message is not None:
            assert message.error() is None, message.error()
            got.append(message)
        if len(got) >= want:
            if settle <= 0:
                break
            deadline = min(deadline, time.monotonic() + settle)
            settle = 0
    return got


def read_all(source: Consumer, topic: str, partitions: int, want: int, settle: float = 1.0, timeout: float = 20.0) -> list[Any]:
    """What ``source`` reads from the topic's start; with ``want`` 0, what comes within ``timeout``."""
    source.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    try:
        return drain(source, max(want, 1), timeout=timeout, settle=settle)
    finally:
        source.close()


# -- produce and consume with each client ------------------------------------------------------------


def _confluent_round_trip(broker: BrokerProcess, topic: str) -> list[tuple[bytes | None, bytes | None, list[Any]]]:
    producer = Producer({"bootstrap.servers": broker.kafka_bootstrap, "linger.ms": 5, "compression.type": "lz4"})
    for i in range(20):
        producer.produce(topic, key=f"k{i}", value=f"v{i}", headers=[("h", b"x")])
    assert producer.flush(20) == 0
    return [(m.key(), m.value(), m.headers() or []) for m in read_all(consumer(broker), topic, 2, 20)]


def _kafka_python_round_trip(broker: BrokerProcess, topic: str) -> list[tuple[bytes | None, bytes | None, list[Any]]]:
    from kafka import KafkaConsumer, KafkaProducer

    producer = KafkaProducer(bootstrap_servers=broker.kafka_bootstrap, compression_type="gzip")
    for i in range(20):
        producer.send(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), headers=[("h", b"x")])
    producer.flush(20)
    producer.close()
    reader = KafkaConsumer(topic, bootstrap_servers=broker.kafka_bootstrap, group_id=f"g-{uuid.uuid4().hex[:8]}",
                           auto_offset_reset="earliest", consumer_timeout_ms=4000)
    try:
        return [(m.key, m.value, list(m.headers)) for m in reader]
    finally:
        reader.close()


def _aiokafka_round_trip(broker: BrokerProcess, topic: str) -> list[tuple[bytes | None, bytes | None, list[Any]]]:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    async def run() -> list[tuple[bytes | None, bytes | None, list[Any]]]:
        producer = AIOKafkaProducer(bootstrap_servers=broker.kafka_bootstrap, compression_type="gzip")
        await producer.start()
        try:
            for i in range(20):
                await producer.send(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), headers=[("h", b"x")])
            await producer.flush()
        finally:
            await producer.stop()
        reader = AIOKafkaConsumer(topic, bootstrap_servers=broker.kafka_bootstrap, group_id=f"g-{uuid.uuid4().hex[:8]}",
                                  auto_offset_reset="earliest")
        await reader.start()
        got: list[tuple[bytes | None, bytes | None, list[Any]]] = []
        try:
            deadline = time.monotonic() + 20
            while len(got) < 20 and time.monotonic() < deadline:
                for records in (await reader.getmany(timeout_ms=300)).values():
                    got += [(m.key, m.value, list(m.headers)) for m in records]
        finally:
            await reader.stop()
        return got

    return asyncio.run(run())


@pytest.mark.parametrize(
    "round_trip",
    [_confluent_round_trip, _kafka_python_round_trip, _aiokafka_round_trip],
    ids=["confluent", "kafka-python", "aiokafka"],
)
def test_each_client_reads_back_what_it_produced_and_rest_reads_it_as_text(
    broker: BrokerProcess, new_topic: Callable[..., str], rest: httpx.Client, round_trip: Any
) -> None:
    topic = new_topic(2)
    got = round_trip(broker, topic)
    assert sorted(value for _, value, _ in got) == sorted(f"v{i}".encode() for i in range(20))
    assert all(headers == [("h", b"x")] for _, _, headers in got)
    by_rest = []
    for partition in (0, 1):
        by_rest += rest.get(f"/v1/topics/{topic}/partitions/{partition}/messages", params={"offset": 0}).json()["messages"]
    assert sorted((m["key"], m["value"], m["headers"]["h"]) for m in by_rest) == sorted(
        (f"k{i}", f"v{i}", "x") for i in range(20)
    )


# -- idempotence, transactions, fencing ---------------------------------------------------------------


def test_an_idempotent_producer_writes_each_record_once_in_order(broker: BrokerProcess, new_topic: Callable[..., str]) -> None:
    topic = new_topic(1)
    producer = Producer({"bootstrap.servers": broker.kafka_bootstrap, "enable.idempotence": True, "linger.ms": 2})
    for i in range(200):
        producer.produce(topic, value=str(i))
    assert producer.flush(20) == 0
    values = [int(m.value()) for m in read_all(consumer(broker), topic, 1, 200)]
    assert values == list(range(200))


def _transactional(broker: BrokerProcess, transactional_id: str) -> Producer:
    producer = Producer({"bootstrap.servers": broker.kafka_bootstrap, "transactional.id": transactional_id})
    producer.init_transactions(20)
    return producer


def test_read_committed_sees_committed_transactions_only_and_read_uncommitted_sees_all(
    broker: BrokerProcess, new_topic: Callable[..., str], rest: httpx.Client
) -> None:
    topic, transactional_id = new_topic(2), f"tx-{uuid.uuid4().hex[:8]}"
    producer = _transactional(broker, transactional_id)
    for outcome in ("commit", "abort", "commit"):
        producer.begin_transaction()
        for partition in (0, 1):
            producer.produce(topic, value=f"{outcome}-{partition}", partition=partition)
        producer.flush(20)  # librdkafka drops what it has not sent yet when it aborts
        (producer.commit_transaction if outcome == "commit" else producer.abort_transaction)(20)
    committed = read_all(consumer(broker, **{"isolation.level": "read_committed"}), topic, 2, 4)
    assert sorted(m.value() for m in committed) == [b"commit-0", b"commit-0", b"commit-1", b"commit-1"]
    everything = read_all(consumer(broker, **{"isolation.level": "read_uncommitted"}), topic, 2, 6)
    assert sorted(m.value() for m in everything).count(b"abort-0") == 1 and len(everything) == 6
    listed = rest.get("/v1/transactions", params={"transactional_id": transactional_id}).json()["transactions"]
    assert sorted(t["state"] for t in listed) == ["ABORTED", "COMMITTED", "COMMITTED"]


def test_an_open_kafka_transaction_holds_rest_read_committed_back(
    broker: BrokerProcess, new_topic: Callable[..., str], rest: httpx.Client
) -> None:
    topic = new_topic(1)
    transactional_id = f"tx-{uuid.uuid4().hex[:8]}"
    producer = _transactional(broker, transactional_id)
    producer.begin_transaction()
    producer.produce(topic, value=b"pending")
    producer.flush(10)
    page = rest.get(f"/v1/topics/{topic}/partitions/0/messages", params={"offset": 0}).json()
    assert page["messages"] == [] and page["high_watermark"] == 1 and page["last_stable_offset"] == 0
    open_ones = rest.get("/v1/transactions", params={"transactional_id": transactional_id, "state": "OPEN"}).json()
    assert [t["partitions"] for t in open_ones["transactions"]] == [[{"topic": topic, "partition": 0}]]
    producer.commit_transaction(20)
    page = rest.get(f"/v1/topics/{topic}/partitions/0/messages", params={"offset": 0}).json()
    assert [m["value"] for m in page["messages"]] == ["pending"]


def test_consume_transform_produce_commits_the_offsets_with_the_output(
    broker: BrokerProcess, new_topic: Callable[..., str], rest: httpx.Client
) -> None:
    source, sink, group = new_topic(2), new_topic(1), f"g-{uuid.uuid4().hex[:8]}"
    seed = Producer({"bootstrap.servers": broker.kafka_bootstrap})
    for i in range(10):
        seed.produce(source, value=str(i), partition=i % 2)
    seed.flush(10)
    producer = _transactional(broker, f"tx-{uuid.uuid4().hex[:8]}")
    reader = consumer(broker, **{"group.id": group, "isolation.level": "read_committed"})
    reader.subscribe([source])
    try:
        records = drain(reader, 10)
        producer.begin_transaction()
        for record in records:
            producer.produce(sink, value=str(int(record.value()) * 10))
        producer.send_offsets_to_transaction(reader.position(reader.assignment()), reader.consumer_group_metadata(), 20)
        producer.commit_transaction(20)
    finally:
        reader.close()
    offsets = {(o["topic"], o["partition"]): o["offset"] for o in rest.get(f"/v1/groups/{group}/offsets").json()["offsets"]}
    assert offsets == {(source, 0): 5, (source, 1): 5}
    out = read_all(consumer(broker, **{"isolation.level": "read_committed"}), sink, 1, 10)
    assert sorted(int(m.value()) for m in out) == [i * 10 for i in range(10)]


def test_a_new_instance_fences_the_old_one(broker: BrokerProcess, new_topic: Callable[..., str]) -> None:
    topic, transactional_id = new_topic(1), f"tx-{uuid.uuid4().hex[:8]}"
    zombie = _transactional(broker, transactional_id)
    zombie.begin_transaction()
    zombie.produce(topic, value=b"zombie")
    zombie.flush(10)
    _transactional(broker, transactional_id)  # InitProducerId: next epoch, aborts the zombie's transaction
    with pytest.raises(KafkaException) as raised:
        zombie.commit_transaction(20)
    error: KafkaError = raised.value.args[0]
    assert error.fatal() or error.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH)
    assert read_all(consumer(broker, **{"isolation.level": "read_committed"}), topic, 1, 0, timeout=2.0) == []


def test_describe_configs_tells_the_retention_applied_and_the_advertised_listener(
    broker: BrokerProcess, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(1)
    admin = AdminClient({"bootstrap.servers": broker.kafka_bootstrap})
    node = next(iter(admin.list_topics(timeout=10).brokers))
    wanted = [ConfigResource(ConfigResource.Type.TOPIC, topic), ConfigResource(ConfigResource.Type.BROKER, str(node))]
    topic_configs, broker_configs = (future.result(20) for future in admin.describe_configs(wanted).values())
    assert (topic_configs["retention.ms"].value, topic_configs["retention.ms"].is_read_only) == ("-1", False)
    assert broker_configs["advertised.listeners"].value == f"PLAINTEXT://{broker.kafka_bootstrap}"


# -- consumer groups ----------------------------------------------------------------------------------


def test_a_classic_group_shares_partitions_and_rebalances_when_a_member_leaves(
    broker: BrokerProcess, new_topic: Callable[..., str]
) -> None:
    topic, group = new_topic(4), f"g-{uuid.uuid4().hex[:8]}"
    members = [
        consumer(broker, **{"group.id": group, "session.timeout.ms": 6000, "partition.assignment.strategy": strategy})
        for strategy in ("range", "range")
    ]
    for member in members:
        member.subscribe([topic])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for member in members:
            member.poll(0.1)
        owned = [{tp.partition for tp in member.assignment()} for member in members]
        if all(len(o) == 2 for o in owned):
            break
    assert owned[0] | owned[1] == {0, 1, 2, 3} and not owned[0] & owned[1]
    members[1].close()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(members[0].assignment()) != 4:
        members[0].poll(0.1)
    assert {tp.partition for tp in members[0].assignment()} == {0, 1, 2, 3}
    members[0].close()


def test_a_kip_848_group_shares_partitions_commits_and_rebalances_when_a_member_leaves(
    broker: BrokerProcess, new_topic: Callable[..., str], rest: httpx.Client
) -> None:
    """group.protocol=consumer: halfmq's own groups, with the broker's assignor, seen over REST too."""
    topic, group = new_topic(4), f"g-{uuid.uuid4().hex[:8]}"
    seed = Producer({"bootstrap.servers": broker.kafka_bootstrap})
    for i in range(8):
        seed.produce(topic, value=str(i), partition=i % 4)
    assert seed.flush(10) == 0
    members = [
        Consumer({"bootstrap.servers": broker.kafka_bootstrap, "group.id": group, "group.protocol": "consumer",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
        for _ in range(2)
    ]
    for member in members:
        member.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for member in members:
            message = member.poll(0.1)
            if message is not None and message.error() is None:
                got.append(message.value())
        owned = [{tp.partition for tp in member.assignment()} for member in members]
        if all(len(o) == 2 for o in owned) and len(set(got)) == 8:
            break
    assert owned[0] | owned[1] == {0, 1, 2, 3} and not owned[0] & owned[1]
    # Nothing is committed yet, so a partition handed over in the rebalance is read again from the start.
    assert set(got) == {str(i).encode() for i in range(8)}
    view = rest.get(f"/v1/groups/{group}").json()
    assert sorted(len(m["assignment"]) for m in view["members"]) == [2, 2]
    members[1].close()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(members[0].assignment()) != 4:
        members[0].poll(0.1)
    assert {tp.partition for tp in members[0].assignment()} == {0, 1, 2, 3}
    members[0].commit(offsets=[TopicPartition(topic, p, 2) for p in range(4)], asynchronous=False)
    members[0].close()
    offsets = {o["partition"]: o["offset"] for o in rest.get(f"/v1/groups/{group}/offsets").json()["offsets"]}
    assert offsets == {0: 2, 1: 2, 2: 2, 3: 2}


def test_offset_fetch_require_stable_waits_for_offsets_a_transaction_holds(
    broker: BrokerProcess, new_topic: Callable[..., str]
) -> None:
    """KIP-447: a read_committed consumer asks with require_stable and gets UNSTABLE_OFFSET_COMMIT until the end."""
    topic, group = new_topic(1), f"g-{uuid.uuid4().hex[:8]}"
    seed = Producer({"bootstrap.servers": broker.kafka_bootstrap})
    for i in range(3):
        seed.produce(topic, value=str(i))
    assert seed.flush(10) == 0
    reader = consumer(broker, **{"group.id": group})
    producer = _transactional(broker, f"tx-{uuid.uuid4().hex[:8]}")
    producer.begin_transaction()
    producer.send_offsets_to_transaction([TopicPartition(topic, 0, 2)], reader.consumer_group_metadata(), 20)

    def fetch(stable: bool) -> Any:
        with KafkaWire(broker.kafka_bootstrap) as wire:
            asked = (OffsetFetchRequestTopic(name=topic, partition_indexes=(i32(0),)),)
            (answer,) = wire.call(OffsetFetchRequest(group_id=group, topics=asked, require_stable=stable)).topics
        return answer.partitions[0]

    assert fetch(True).error_code is ErrorCode.unstable_offset_commit
    assert (fetch(False).error_code, fetch(False).committed_offset) == (ErrorCode.none, -1)
    producer.commit_transaction(20)
    assert (fetch(True).error_code, fetch(True).committed_offset) == (ErrorCode.none, 2)
    reader.close()


def test_a_kafka_group_starts_at_offsets_committed_over_rest(
    broker: BrokerProcess, new_topic: Callable[..., str], rest: httpx.Client
) -> None:
    topic, group = new_topic(1), f"g-{uuid.uuid4().hex[:8]}"
    assert rest.post(f"/v1/topics/{topic}/messages", json={"messages": [{"value": i} for i in range(5)]}).status_code == 200
    committed = {"offsets": [{"topic": topic, "partition": 0, "offset": 3}]}
    assert rest.post(f"/v1/groups/{group}/offsets", json=committed).status_code == 200
    reader = consumer(broker, **{"group.id": group})
    reader.subscribe([topic])
    try:
        assert [m.offset() for m in drain(reader, 2, settle=0.5)] == [3, 4]
    finally:
        reader.close()


# -- one log, three ways in ---------------------------------------------------------------------------


def test_rest_messages_reach_kafka_consumers_as_the_contract_maps_them(
    broker: BrokerProcess, new_topic: Callable[..., str], rest: httpx.Client
) -> None:
    topic = new_topic(1)
    sent = [
        {"key": "a", "value": "text", "headers": {"h": "v"}},
        {"value": {"n": 1}},
        {"value_base64": base64.b64encode(b"\xff\x00").decode()},
    ]
    assert rest.post(f"/v1/topics/{topic}/messages", json={"messages": sent}).status_code == 200
    got = read_all(consumer(broker), topic, 1, 3)
    assert [(m.key(), m.value(), m.headers()) for m in got] == [
        (b"a", b"text", [("h", b"v")]),
        (None, b'{"n":1}', None),
        (None, b"\xff\x00", None),
    ]


def test_a_half_message_reaches_kafka_read_committed_only_once_committed(
    broker: BrokerProcess, new_topic: Callable[..., str], rest: httpx.Client
) -> None:
    topic = new_topic(1)
    half = rest.post("/v1/half-messages", json={"topic": topic, "producer_group": "pg", "value": "half"}).json()
    assert read_all(consumer(broker, **{"isolation.level": "read_committed"}), topic, 1, 0, timeout=2.0) == []
    committed = rest.post(f"/v1/half-messages/{half['message_id']}/commit").json()
    got = read_all(consumer(broker, **{"isolation.level": "read_committed"}), topic, 1, 1)
    assert [(m.offset(), m.value()) for m in got] == [(committed["offset"], b"half")]


def test_binary_keys_null_values_and_repeated_headers_round_trip_exactly(
    broker: BrokerProcess, new_topic: Callable[..., str], rest: httpx.Client
) -> None:
    topic = new_topic(1)
    producer = Producer({"bootstrap.servers": broker.kafka_bootstrap})
    producer.produce(topic, key=b"\xfe\x01", value=None, headers=[("h", b"1"), ("h", b"\xff"), ("n", None)])
    assert producer.flush(10) == 0
    (record,) = read_all(consumer(broker), topic, 1, 1)
    assert (record.key(), record.value(), record.headers()) == (b"\xfe\x01", None, [("h", b"1"), ("h", b"\xff"), ("n", None)])
    (shown,) = rest.get(f"/v1/topics/{topic}/partitions/0/messages", params={"offset": 0}).json()["messages"]
    assert shown["key"] is None and shown["value"] is None


# -- transaction protocol v2 (KIP-890), raw: no installed client speaks it ----------------------------------


def _txn_produce(
    wire: KafkaWire, transactional_id: str, topic: str, identity: tuple[int, int], sequence: int, value: bytes
) -> Any:
    """Produce v12 of one transactional record; the partition's answer."""
    producer_id, epoch = identity
    record = KafkaRecord(0, int(time.time() * 1000), None, value, ())
    batch = write_batch(OutgoingBatch(0, [record], producer_id, epoch, sequence, transactional=True))
    answer = wire.call(
        ProduceRequest(
            transactional_id=transactional_id, acks=i16(-1), timeout=i32Timedelta.parse(datetime.timedelta(seconds=10)),
            topic_data=(TopicProduceData(name=topic, partition_data=(PartitionProduceData(index=i32(0), records=batch),)),),
        )
    )
    return answer.responses[0].partition_responses[0]


def test_transaction_protocol_v2_moves_the_epoch_on_at_every_end_and_fences_late_writes(
    broker: BrokerProcess, new_topic: Callable[..., str], rest: httpx.Client
) -> None:
    topic, transactional_id = new_topic(1), f"tx-{uuid.uuid4().hex[:8]}"
    with KafkaWire(broker.kafka_bootstrap) as wire:
        versions = wire.call(ApiVersionsRequest(client_software_name="t", client_software_version="1"))
        assert next(k.max_version for k in versions.api_keys if k.api_key == 26) >= 5  # EndTxn v5
        assert [(f.name, f.max_version_level) for f in versions.finalized_features] == [("transaction.version", 2)]
        init = wire.call(InitProducerIdRequest(transactional_id=transactional_id,
                                               transaction_timeout=i32Timedelta.parse(datetime.timedelta(seconds=30))))
        first = (init.producer_id, init.producer_epoch)

        assert _txn_produce(wire, transactional_id, topic, first, 0, b"committed").error_code is ErrorCode.none
        end = wire.call(EndTxnRequest(transactional_id=transactional_id, producer_id=first[0], producer_epoch=first[1],
                                      committed=True))
        assert end.error_code is ErrorCode.none and (end.producer_id, end.producer_epoch) == (first[0], first[1] + 1)
        # A late write of the ended transaction's epoch may not begin the next transaction.
        late = _txn_produce(wire, transactional_id, topic, first, 1, b"late")
        assert late.error_code in (ErrorCode.invalid_producer_epoch, ErrorCode.producer_fenced)

        second = (end.producer_id, end.producer_epoch)
        assert _txn_produce(wire, transactional_id, topic, second, 0, b"aborted").error_code is ErrorCode.none
        end = wire.call(EndTxnRequest(transactional_id=transactional_id, producer_id=second[0], producer_epoch=second[1],
                                      committed=False))
        assert end.error_code is ErrorCode.none and end.producer_epoch == second[1] + 1
        # The ended epoch cannot end anything again: it is fenced like any older epoch.
        again = wire.call(EndTxnRequest(transactional_id=transactional_id, producer_id=second[0], producer_epoch=second[1],
                                        committed=False))
        assert again.error_code is ErrorCode.producer_fenced

    got = read_all(consumer(broker, **{"isolation.level": "read_committed"}), topic, 1, 1)
    assert [m.value() for m in got] == [b"committed"]
    listed = rest.get("/v1/transactions", params={"transactional_id": transactional_id}).json()["transactions"]
    assert sorted((t["producer_epoch"], t["state"]) for t in listed) == [(first[1], "COMMITTED"), (second[1], "ABORTED")]
