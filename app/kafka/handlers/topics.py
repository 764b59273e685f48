"""CreateTopics, DeleteTopics, CreatePartitions and DescribeConfigs: the topic admin services, by Kafka's names."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from app.kafka.errors import kafka_code
from app.kafka.handlers.cluster import topic_uuid
from app.kafka.protocol import NO_THROTTLE, api, build, response_module
from app.kafka.session import Session
from half_store.domain.access import Need, Operation, ResourceType
from half_store.domain.admin_records import TopicAlteration
from half_store.domain.constants import TOPIC_NAME_RE
from half_store.domain.errors import BrokerError

# The topic configs halfmq keeps (Kafka names): retention, set with CreateTopics or REST PATCH.
_RETENTION_KEYS = {"retention.ms": "retention_ms", "retention.bytes": "retention_bytes"}
TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4


@api(19, 2, 7)
async def create_topics(session: Session, request: Any) -> Any:
    m = response_module(request)
    results = []
    for wanted in request.topics:
        error, message, partitions = ErrorCode.none, None, wanted.num_partitions
        if partitions == -1:
            partitions = session.settings.kafka_default_partitions
        if not session.allows(Need(ResourceType.TOPIC, wanted.name, Operation.ALTER)):
            error = ErrorCode.topic_authorization_failed
        elif not TOPIC_NAME_RE.match(wanted.name):
            error, message = ErrorCode.invalid_topic_exception, f"{wanted.name!r} is not a valid topic name"
        elif wanted.replication_factor not in (1, -1):
            error, message = ErrorCode.invalid_replication_factor, "halfmq keeps one copy (in its database): replication factor 1"
        elif partitions < 1 or wanted.assignments:
            error, message = ErrorCode.invalid_partitions, "give a partition count of at least 1 and no replica assignment"
        config = _retention_config(wanted.configs)
        if error is ErrorCode.none and isinstance(config, str):
            error, message = ErrorCode.invalid_config, config
        topic = None
        if error is ErrorCode.none and not request.validate_only:
            try:
                topic = await session.broker.log.create_topic(wanted.name, partitions)
                if config and not isinstance(config, str):
                    await session.broker.admin.alter_topic(wanted.name, TopicAlteration(config=tuple(config)))
            except BrokerError as failure:
                error, message = kafka_code(failure), str(failure)
        results.append(
            build(
                m.CreatableTopicResult,
                name=wanted.name,
                topic_id=topic_uuid(topic) if topic is not None else None,
                error_code=error,
                error_message=message,
                topic_config_error_code=0,
                num_partitions=partitions if error is ErrorCode.none else -1,
                replication_factor=1 if error is ErrorCode.none else -1,
                configs=(),
            )
        )
    return build(m.CreateTopicsResponse, throttle_time=NO_THROTTLE, topics=tuple(results))


def _retention_config(configs: Any) -> list[tuple[str, int | None]] | str:
    found: list[tuple[str, int | None]] = []
    for config in configs:
        key = _RETENTION_KEYS.get(config.name)
        if key is None:
            continue  # other Kafka topic configs have no meaning here (cleanup.policy=compact is not supported)
        try:
            value = None if config.value is None or int(config.value) < 0 else int(config.value)
        except ValueError:
            return f"{config.name} must be an integer"
        found.append((key, value))
    return found


@api(20, 1, 6)
async def delete_topics(session: Session, request: Any) -> Any:
    m = response_module(request)
    names = [t.name for t in request.topics] if hasattr(request, "topics") else list(request.topic_names)
    results = []
    for name in names:
        error, message = ErrorCode.none, None
        if name is None:
            error, message = ErrorCode.unsupported_version, "delete topics by name; topic ids are not supported"
        elif not session.allows(Need(ResourceType.TOPIC, name, Operation.ALTER)):
            error = ErrorCode.topic_authorization_failed
        else:
            try:
                await session.broker.admin.delete_topic(name)
            except BrokerError as failure:
                error, message = kafka_code(failure), str(failure)
        results.append(build(m.DeletableTopicResult, name=name, topic_id=None, error_code=error, error_message=message))
    return build(m.DeleteTopicsResponse, throttle_time=NO_THROTTLE, responses=tuple(results))


@api(37, 0, 3)
async def create_partitions(session: Session, request: Any) -> Any:
    m = response_module(request)
    results = []
    for wanted in request.topics:
        error, message = ErrorCode.none, None
        if not session.allows(Need(ResourceType.TOPIC, wanted.name, Operation.ALTER)):
            error = ErrorCode.topic_authorization_failed
        elif not request.validate_only:
            try:
                await session.broker.admin.alter_topic(wanted.name, TopicAlteration(partitions=wanted.count))
            except BrokerError as failure:
                error, message = kafka_code(failure), str(failure)
        results.append(build(m.CreatePartitionsTopicResult, name=wanted.name, error_code=error, error_message=message))
    return build(m.CreatePartitionsResponse, throttle_time=NO_THROTTLE, results=tuple(results))


# Kafka's ConfigType codes (DescribeConfigs v3+): BOOLEAN 1, STRING 2, INT 3, LONG 5, LIST 7.
_CONFIG_TYPES = {
    "retention.ms": 5, "retention.bytes": 5, "max.message.bytes": 3, "cleanup.policy": 7, "min.insync.replicas": 3,
    "advertised.listeners": 2, "auto.create.topics.enable": 1, "num.partitions": 3, "message.max.bytes": 3,
    "transaction.max.timeout.ms": 3, "group.min.session.timeout.ms": 3, "group.max.session.timeout.ms": 3,
}


@api(32, 1, 4)
async def describe_configs(session: Session, request: Any) -> Any:
    """What halfmq really applies: a topic's retention (set or inherited) and the broker's message limits."""
    m = response_module(request)
    results = []
    for resource in request.resources:
        error, message, configs = ErrorCode.none, None, []
        if resource.resource_type == TOPIC_RESOURCE:
            if not session.allows(Need(ResourceType.TOPIC, resource.resource_name, Operation.DESCRIBE)):
                error = ErrorCode.topic_authorization_failed
            else:
                try:
                    details = await session.broker.admin.describe_topic(resource.resource_name)
                    configs = [
                        ("retention.ms", details.effective.retention_ms, details.config.retention_ms is not None),
                        ("retention.bytes", details.effective.retention_bytes, details.config.retention_bytes is not None),
                        ("max.message.bytes", session.settings.max_message_bytes, False),
                        ("cleanup.policy", "delete", False),
                        ("min.insync.replicas", 1, False),
                    ]
                except BrokerError as failure:
                    error, message = kafka_code(failure), str(failure)
        elif resource.resource_type == BROKER_RESOURCE:
            me = session.cluster.me
            protocol = "SASL_PLAINTEXT" if session.authority.enabled else "PLAINTEXT"
            configs = [
                ("advertised.listeners", f"{protocol}://{me.host}:{me.port}", False),
                ("auto.create.topics.enable", str(session.settings.kafka_auto_create_topics).lower(), False),
                ("num.partitions", session.settings.kafka_default_partitions, False),
                ("message.max.bytes", session.settings.max_message_bytes, False),
                ("transaction.max.timeout.ms", session.settings.max_transaction_timeout_ms, False),
                ("group.min.session.timeout.ms", session.settings.group_min_session_timeout_ms, False),
                ("group.max.session.timeout.ms", session.settings.group_max_session_timeout_ms, False),
            ]
        else:
            error, message = ErrorCode.invalid_request, f"resource type {resource.resource_type} is not described here"
        keys = resource.configuration_keys
        entries = tuple(
            build(
                m.DescribeConfigsResourceResult,
                name=name,
                value="-1" if value is None else str(value),  # retention: -1 keeps forever, as in Kafka
                read_only=name not in _RETENTION_KEYS,
                # TOPIC_CONFIG; the listener, STATIC_BROKER_CONFIG (this process's settings, as Kafka 4 says); else DEFAULT_CONFIG
                config_source=1 if explicit else 4 if name == "advertised.listeners" else 5,
                is_default=not explicit,
                is_sensitive=False,
                synonyms=(),
                config_type=_CONFIG_TYPES.get(name, 0),
                documentation=None,
            )
            for name, value, explicit in configs
            if keys is None or name in keys
        )
        results.append(build(m.DescribeConfigsResult, error_code=error, error_message=message,
                             resource_type=resource.resource_type, resource_name=resource.resource_name, configs=entries))
    return build(m.DescribeConfigsResponse, throttle_time=NO_THROTTLE, results=tuple(results))
