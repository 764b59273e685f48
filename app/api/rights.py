"""What each route needs: declared next to the route, enforced by one dependency (``app/api/authorize.py``).

A route declares its rights with :func:`rights` under its route decorator::

    @router.post("/topics/{topic}/messages")
    @rights(require(TOPIC, WRITE, path("topic")))
    async def produce(...): ...

A rule names a resource type, an operation, and where the resource's name comes from:
a path parameter (:func:`path`), a body field (:func:`body`), every item of a list in
the body (:func:`body_list`) or a fixed name (:data:`CLUSTER_RESOURCE`). Rules whose
resource is not in the request look it up (:func:`half_message`, :func:`transaction`,
:func:`producer`). :func:`listing` lets any authenticated caller in and filters the
answer's items to what the caller may describe. :data:`PUBLIC` needs no token at all.

A route without a declaration is refused to everyone while authentication is on
(and the table-driven test over every route fails), so a forgotten rule never opens a route.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel

from half_store.domain.access import CLUSTER_NAME, Need, Operation, ResourceType
from half_store.domain.errors import ValidationFailed
from half_store.domain.share_receipts import peek_topic_id

TOPIC = ResourceType.TOPIC
GROUP = ResourceType.GROUP
PRODUCER_GROUP = ResourceType.PRODUCER_GROUP
TRANSACTIONAL_ID = ResourceType.TRANSACTIONAL_ID
CLUSTER = ResourceType.CLUSTER
READ = Operation.READ
WRITE = Operation.WRITE
DESCRIBE = Operation.DESCRIBE
ALTER = Operation.ALTER

RIGHTS_ATTRIBUTE = "__halfmq_rights__"
F = TypeVar("F", bound=Callable[..., Any])


class RequestFacts(Protocol):
    """What a rule may read of the request (built by the authorizing dependency)."""

    def path_param(self, name: str) -> str | None: ...

    async def body(self) -> BaseModel | None:
        """The body as the route's own model validated it (strictly typed), None if the route takes none."""
        ...

    async def half_message_owner(self, message_id: str) -> tuple[str, str] | None:
        """(producer group, real topic) of a half message; None if there is none."""
        ...

    async def transaction_owner(self, txn_id: str) -> tuple[bool, str | None]:
        """(whether the transaction exists, the transactional id of its producer: None for an anonymous one)."""
        ...

    async def topic_name_of(self, topic_id: int) -> str | None:
        """The name of the topic with ``topic_id`` (None: there is none)."""
        ...

    async def transactional_id_of_producer(self, producer_id: int) -> tuple[bool, str | None]:
        """(whether the producer exists, its transactional id if it has one)."""
        ...


def _field(model: object, name: str) -> Any:
    """A field of a validated body (or of one of its items); None where the route takes no body."""
    return getattr(model, name, None)


# -- where a resource name comes from --------------------------------------------------------------


class NameSource(Protocol):
    async def names(self, facts: RequestFacts) -> list[str]: ...


@dataclass(frozen=True)
class _Path:
    param: str

    async def names(self, facts: RequestFacts) -> list[str]:
        value = facts.path_param(self.param)
        if value is None:
            raise LookupError(f"the route has no path parameter {self.param!r}")
        return [value]


@dataclass(frozen=True)
class _Body:
    name: str
    optional: bool

    async def names(self, facts: RequestFacts) -> list[str]:
        value = _field(await facts.body(), self.name)
        if value is None and self.optional:
            return []
        if not isinstance(value, str):
            raise ValidationFailed(f"{self.name}: a string is required")
        return [value]


@dataclass(frozen=True)
class _BodyList:
    name: str
    item_field: str

    async def names(self, facts: RequestFacts) -> list[str]:
        items = _field(await facts.body(), self.name)
        if not isinstance(items, list):
            raise ValidationFailed(f"{self.name}: a list is required")
        found: dict[str, None] = {}
        for item in items:
            value = _field(item, self.item_field)
            if not isinstance(value, str):
                raise ValidationFailed(f"{self.name}.{self.item_field}: a string is required")
            found[value] = None
        return list(found)


@dataclass(frozen=True)
class _BodyNames:
    name: str
    optional: bool

    async def names(self, facts: RequestFacts) -> list[str]:
        items = _field(await facts.body(), self.name)
        if items is None and self.optional:
            return []
        if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
            raise ValidationFailed(f"{self.name}: a list of names is required")
        return list(dict.fromkeys(items))


@dataclass(frozen=True)
class _Fixed:
    name: str

    async def names(self, facts: RequestFacts) -> list[str]:
        return [self.name]


def path(param: str) -> NameSource:
    """The resource's name is the path parameter ``param``."""
    return _Path(param)


def body(name: str, *, optional: bool = False) -> NameSource:
    """The resource's name is the body's field ``name`` (absent or null: no right needed if ``optional``)."""
    return _Body(name, optional)


def body_list(name: str, item_field: str) -> NameSource:
    """Every distinct ``item_field`` of the body's list ``name`` (``offsets[].topic``) is a resource."""
    return _BodyList(name, item_field)


def body_names(name: str, *, optional: bool = False) -> NameSource:
    """Every name in the body's list of strings ``name`` (``topics``) is a resource (absent: none if ``optional``)."""
    return _BodyNames(name, optional)


CLUSTER_RESOURCE: NameSource = _Fixed(CLUSTER_NAME)


# -- rules ---------------------------------------------------------------------------------------------


class Rule(Protocol):
    async def needs(self, facts: RequestFacts) -> Iterable[Need]: ...


@dataclass(frozen=True)
class Require:
    resource_type: ResourceType
    operation: Operation
    source: NameSource

    async def needs(self, facts: RequestFacts) -> Iterable[Need]:
        return [Need(self.resource_type, name, self.operation) for name in await self.source.names(facts)]


def require(resource_type: ResourceType, operation: Operation, source: NameSource) -> Rule:
    """``operation`` on each resource of ``resource_type`` that ``source`` names."""
    return Require(resource_type, operation, source)


def cluster(operation: Operation) -> Rule:
    """``operation`` on the cluster (administration: principals, tokens, ACLs, metrics)."""
    return Require(CLUSTER, operation, CLUSTER_RESOURCE)


def refusal(rule: Rule, need: Need) -> str:
    """Why ``rule`` refuses a caller without ``need``, as the 403 and the audit line say it.

    Rules that looked their resource up say what kind of thing it is but not its name, so a
    403 tells nobody who owns an id they may not touch.
    """
    explain: Callable[[Need], str] | None = getattr(rule, "explain", None)
    return explain(need) if explain is not None else f"needs {need}"


def _unknown_id(operation: Operation) -> list[Need]:
    """An id nobody owns needs the cluster right: a caller without it is refused as for someone else's id
    (403 either way, so an answer never tells whether an id exists); one with it goes on to the 404."""
    return [Need(CLUSTER, CLUSTER_NAME, operation)]


@dataclass(frozen=True)
class _HalfMessage:
    param: str
    operation: Operation

    async def needs(self, facts: RequestFacts) -> Iterable[Need]:
        message_id = facts.path_param(self.param)
        if message_id is None:
            raise LookupError(f"the route has no path parameter {self.param!r}")
        owner = await facts.half_message_owner(message_id)
        if owner is None:
            return _unknown_id(self.operation)
        group, topic = owner
        return [Need(PRODUCER_GROUP, group, self.operation), Need(TOPIC, topic, self.operation)]

    def explain(self, need: Need) -> str:
        return f"needs {self.operation.value} on the half message's producer group and topic"


def half_message(param: str, operation: Operation) -> Rule:
    """``operation`` on the producer group and on the real topic of the half message ``param`` names."""
    return _HalfMessage(param, operation)


async def _transaction_needs(facts: RequestFacts, txn_id: str, operation: Operation) -> list[Need]:
    exists, transactional_id = await facts.transaction_owner(txn_id)
    if not exists:
        return _unknown_id(operation)
    if transactional_id is None:
        # Anonymous (Pulsar-style) transactions belong to no transactional id: cluster-level right.
        return [Need(CLUSTER, CLUSTER_NAME, operation)]
    return [Need(TRANSACTIONAL_ID, transactional_id, operation)]


@dataclass(frozen=True)
class _Transaction:
    source: NameSource
    operation: Operation

    async def needs(self, facts: RequestFacts) -> Iterable[Need]:
        found: list[Need] = []
        for txn_id in await self.source.names(facts):
            found.extend(await _transaction_needs(facts, txn_id, self.operation))
        return found


    def explain(self, need: Need) -> str:
        return f"needs {self.operation.value} on the transaction's transactional id (or the cluster)"


def transaction(source: NameSource, operation: Operation) -> Rule:
    """``operation`` on the transactional id of the transaction ``source`` names (cluster for anonymous ones)."""
    return _Transaction(source, operation)


@dataclass(frozen=True)
class _Producer:
    """A request that acts for a producer id: its transactional id's right, if it has one.

    ``transactional_flag``: only when that body flag is true (produce joins the producer's
    transaction); ``anonymous``: what a producer without a transactional id needs (None: nothing).
    """

    id_field: str
    operation: Operation
    transactional_flag: str | None = None
    anonymous: Need | None = None

    async def needs(self, facts: RequestFacts) -> Iterable[Need]:
        content = await facts.body()
        if self.transactional_flag is not None and _field(content, self.transactional_flag) is not True:
            return []
        producer_id = _field(content, self.id_field)
        if producer_id is None:
            return [] if self.anonymous is None else [self.anonymous]
        if not isinstance(producer_id, int) or isinstance(producer_id, bool):
            raise ValidationFailed(f"{self.id_field}: an integer is required")
        _known, transactional_id = await facts.transactional_id_of_producer(producer_id)
        if transactional_id is None:  # unknown producers are refused by the service after this
            return [] if self.anonymous is None else [self.anonymous]
        return [Need(TRANSACTIONAL_ID, transactional_id, self.operation)]


def producer(
    id_field: str, operation: Operation, *, when: str | None = None, anonymous: Need | None = None
) -> Rule:
    """``operation`` on the transactional id of the producer whose id is the body's ``id_field``."""
    return _Producer(id_field, operation, when, anonymous)


ANONYMOUS_TRANSACTION = Need(CLUSTER, CLUSTER_NAME, WRITE)


@dataclass(frozen=True)
class _ReceiptTopics:
    source: NameSource
    operation: Operation

    async def needs(self, facts: RequestFacts) -> Iterable[Need]:
        found: dict[str, None] = {}
        for receipt in await self.source.names(facts):
            topic_id = peek_topic_id(receipt)
            name = None if topic_id is None else await facts.topic_name_of(topic_id)
            if name is not None:  # no such topic: the service refuses the receipt itself
                found[name] = None
        return [Need(TOPIC, name, self.operation) for name in found]


def receipt_topics(source: NameSource, operation: Operation) -> Rule:
    """``operation`` on the topic of each share-group receipt ``source`` names (as Kafka's share groups need)."""
    return _ReceiptTopics(source, operation)


@dataclass(frozen=True)
class Listing:
    """Any authenticated caller; the answer's ``items`` keep only what the caller may see.

    ``names`` maps a resource type to the item field holding its name (:data:`ITEM_ITSELF`: the
    item is the name); an item stays if the caller has ``operation`` on every one of them. With
    ``within``, ``items`` is a list inside each entry of the answer's list ``within``.
    """

    items: str
    names: Mapping[ResourceType, str]
    operation: Operation = DESCRIBE
    within: str | None = None

    async def needs(self, facts: RequestFacts) -> Iterable[Need]:
        return ()


ITEM_ITSELF = ""
"""A :class:`Listing` name field for lists of plain names (a share group's topics)."""


def listing(
    items: str, names: Mapping[ResourceType, str], operation: Operation = DESCRIBE, *, within: str | None = None
) -> Rule:
    """Filter the answer's list ``items`` (of each entry of ``within``) to the entries the caller may ``operation``."""
    return Listing(items, dict(names), operation, within)


@dataclass(frozen=True)
class _Authenticated:
    async def needs(self, facts: RequestFacts) -> Iterable[Need]:
        return ()


AUTHENTICATED: Rule = _Authenticated()
"""Any known token, no ACL (InitProducerId without a transactional id)."""


@dataclass(frozen=True)
class Redaction:
    """Lets in whoever the route's other rules let in; the answer then loses ``fields`` where the caller
    lacks ``operation`` on the resource named by ``name_field`` (of each of its ``items``, or of the
    answer itself when ``items`` is None), and says so with ``"<hidden_flag>": true``.

    A half message's key, value and headers are its topic's data: describing the half message
    needs ``describe``, seeing its body needs ``read`` on the topic, as a fetch would.
    """

    items: str | None
    kind: ResourceType
    name_field: str
    operation: Operation
    fields: tuple[str, ...]
    hidden_flag: str

    async def needs(self, facts: RequestFacts) -> Iterable[Need]:
        return ()


def redacted(
    items: str | None, kind: ResourceType, name_field: str, operation: Operation, fields: tuple[str, ...], hidden_flag: str
) -> Rule:
    """Drop ``fields`` from the answer's items whose ``name_field`` resource the caller may not ``operation``."""
    return Redaction(items, kind, name_field, operation, fields, hidden_flag)


# -- the declaration -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RouteRights:
    rules: tuple[Rule, ...]
    public: bool = False
    listings: tuple[Listing, ...] = field(default=())
    redactions: tuple[Redaction, ...] = field(default=())


PUBLIC_RIGHTS = RouteRights((), public=True)


class _Public:
    """Marker: the route needs no token (health and readiness probes)."""


PUBLIC = _Public()


def rights(*rules: Rule | _Public) -> Callable[[F], F]:
    """Declare what the decorated route needs; every rule must pass (see the module's docstring)."""
    if any(isinstance(r, _Public) for r in rules):
        if len(rules) != 1:
            raise ValueError("PUBLIC stands alone")
        declared = PUBLIC_RIGHTS
    else:
        plain = tuple(r for r in rules if not isinstance(r, _Public))
        if not plain:
            raise ValueError("declare at least one rule (AUTHENTICATED for any known token)")
        declared = RouteRights(
            plain,
            listings=tuple(r for r in plain if isinstance(r, Listing)),
            redactions=tuple(r for r in plain if isinstance(r, Redaction)),
        )

    def declare(endpoint: F) -> F:
        setattr(endpoint, RIGHTS_ATTRIBUTE, declared)
        return endpoint

    return declare


def rights_of(endpoint: Callable[..., Any] | None) -> RouteRights | None:
    """The declared rights of a route's endpoint, or None if it declared none."""
    return getattr(endpoint, RIGHTS_ATTRIBUTE, None)

