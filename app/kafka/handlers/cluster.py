"""ApiVersions, Metadata and FindCoordinator: what the cluster is and who leads what."""

from __future__ import annotations

import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from app.kafka.errors import kafka_code
from app.kafka.protocol import NO_THROTTLE, api, build, response_module, table
from app.kafka.session import Session
from half_store.domain.access import Need, Operation, ResourceType
from half_store.domain.constants import TOPIC_NAME_RE, is_system_topic
from half_store.domain.errors import BrokerError, TopicExists
from half_store.domain.records import Topic

_TOPIC_NAMESPACE = uuid.UUID("6f1d2c52-5b1e-4a7c-9a0e-2f4c8d1e9b30")


def topic_uuid(topic: Topic) -> uuid.UUID:
    """A topic's Kafka id: stable for its life, new if a topic of the same name is created again."""
    return uuid.uuid5(_TOPIC_NAMESPACE, f"{topic.topic_id}:{topic.name}")


# KIP-584 feature levels: transaction.version 2 is transaction protocol v2 (KIP-890 part 2),
# which clients that know it (the Java client from 4.0) use only when the cluster finalized it.
# (A supported range starting at 0 is left out of ApiVersions v3 answers, hence 1.)
TRANSACTION_VERSION = "transaction.version"
TRANSACTION_VERSION_LEVEL = 2


@api(18, 0, 3, before_auth=True)
async def api_versions(session: Session, request: Any) -> Any:
    m = response_module(request)
    keys = tuple(
        m.ApiVersion(api_key=a.key, min_version=a.min_version, max_version=a.max_version) for a in table().values()
    )
    features: dict[str, Any] = {}
    if request.__version__ >= 3:
        features = {
            "supported_features": (
                m.SupportedFeatureKey(name=TRANSACTION_VERSION, min_version=1, max_version=TRANSACTION_VERSION_LEVEL),
            ),
            "finalized_features_epoch": 0,
            "finalized_features": (
                m.FinalizedFeatureKey(
                    name=TRANSACTION_VERSION, max_version_level=TRANSACTION_VERSION_LEVEL,
                    min_version_level=TRANSACTION_VERSION_LEVEL,
                ),
            ),
        }
    return build(m.ApiVersionsResponse, error_code=ErrorCode.none, api_keys=keys, throttle_time=NO_THROTTLE, **features)


@api(3, 0, 12)
async def metadata(session: Session, request: Any) -> Any:
    m = response_module(request)
    known = {t.name: t for t in await session.broker.log.list_topics(include_system=False)}
    by_id = {topic_uuid(t): t.name for t in known.values()}
    unknown_ids: list[uuid.UUID] = []
    if request.topics is None:
        wanted = [name for name in known if session.allows(Need(ResourceType.TOPIC, name, Operation.DESCRIBE))]
    else:
        # v10+: a topic may be asked for by id alone (KIP-848 consumers map their assignment's ids so)
        wanted = [t.name if t.name is not None else by_id[t.topic_id] for t in request.topics
                  if t.name is not None or getattr(t, "topic_id", None) in by_id]
        unknown_ids = [t.topic_id for t in request.topics if t.name is None and getattr(t, "topic_id", None) not in by_id]
    auto_create = session.settings.kafka_auto_create_topics and getattr(request, "allow_auto_topic_creation", True)
    topics = []
    for name in wanted:
        error = ErrorCode.none
        topic = known.get(name)
        if not session.allows(Need(ResourceType.TOPIC, name, Operation.DESCRIBE)):
            error = ErrorCode.topic_authorization_failed
        elif topic is None and auto_create and TOPIC_NAME_RE.match(name) and not is_system_topic(name):
            topic, error = await create_for_client(session, name)
        elif topic is None:
            error = ErrorCode.unknown_topic_or_partition if TOPIC_NAME_RE.match(name) else ErrorCode.invalid_topic_exception
        topics.append(_topic_metadata(session, m, name, topic if error is ErrorCode.none else None, error))
    for topic_id in unknown_ids:
        topics.append(build(m.MetadataResponseTopic, error_code=ErrorCode.unknown_topic_id, name=None, topic_id=topic_id,
                            is_internal=False, partitions=(), topic_authorized_operations=-2147483648))
    brokers = tuple(m.MetadataResponseBroker(node_id=n.node_id, host=n.host, port=n.port) for n in session.cluster.nodes)
    return build(
        m.MetadataResponse,
        throttle_time=NO_THROTTLE,
        brokers=brokers,
        cluster_id=session.cluster.cluster_id,
        controller_id=session.cluster.nodes[0].node_id,
        topics=tuple(topics),
    )


async def create_for_client(session: Session, name: str) -> tuple[Topic | None, ErrorCode]:
    """Kafka's auto.create.topics.enable: a topic a client names is created with the default partition count."""
    if not session.allows(Need(ResourceType.TOPIC, name, Operation.ALTER)):
        return None, ErrorCode.topic_authorization_failed
    try:
        return await session.broker.log.create_topic(name, session.settings.kafka_default_partitions), ErrorCode.none
    except TopicExists:
        found = {t.name: t for t in await session.broker.log.list_topics(include_system=False)}
        return found.get(name), ErrorCode.none if name in found else ErrorCode.leader_not_available
    except BrokerError as error:
        return None, kafka_code(error)


def _topic_metadata(session: Session, m: Any, name: str, topic: Topic | None, error: ErrorCode) -> Any:
    partitions = ()
    if topic is not None:
        partitions = tuple(
            build(
                m.MetadataResponsePartition,
                error_code=ErrorCode.none,
                partition_index=p,
                leader_id=(leader := session.cluster.leader_of(topic.name, p).node_id),
                leader_epoch=0,
                replica_nodes=(leader,),
                isr_nodes=(leader,),
                offline_replicas=(),
            )
            for p in range(topic.partitions)
        )
    return build(
        m.MetadataResponseTopic,
        error_code=error,
        name=name,
        topic_id=topic_uuid(topic) if topic is not None else uuid.UUID(int=0),
        is_internal=False,
        partitions=partitions,
        topic_authorized_operations=-2147483648,
    )


@api(10, 0, 4)
async def find_coordinator(session: Session, request: Any) -> Any:
    """The broker that coordinates a group (key type 0) or a transactional id (key type 1)."""
    m = response_module(request)
    keys = list(getattr(request, "coordinator_keys", ())) or [getattr(request, "key", "")]
    resource = ResourceType.GROUP if request.key_type == 0 else ResourceType.TRANSACTIONAL_ID
    answers = []
    for key in keys:
        node = session.cluster.coordinator_for(key)
        error = ErrorCode.none
        if request.key_type not in (0, 1):
            error = ErrorCode.invalid_request
        elif not session.allows(Need(resource, key, Operation.DESCRIBE)):
            error = (
                ErrorCode.group_authorization_failed
                if resource is ResourceType.GROUP
                else ErrorCode.transactional_id_authorization_failed
            )
        answers.append((key, node, error))
    if request.__version__ >= 4:
        coordinators = tuple(
            m.Coordinator(key=key, node_id=node.node_id, host=node.host, port=node.port, error_code=error, error_message=None)
            for key, node, error in answers
        )
        return m.FindCoordinatorResponse(throttle_time=NO_THROTTLE, coordinators=coordinators)
    _, node, error = answers[0]
    return build(
        m.FindCoordinatorResponse,
        throttle_time=NO_THROTTLE,
        error_code=error,
        error_message=None,
        node_id=node.node_id,
        host=node.host,
        port=node.port,
    )
