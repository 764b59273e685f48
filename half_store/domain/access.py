"""Who may do what: principals, tokens and Kafka-style ACLs, and the one decision over them.

An ACL says: principal × resource type × pattern (literal or prefixed) × operation →
allow or deny. A request is allowed when some allow matches and no deny does (deny
wins; nothing matching means no). As in Kafka, a literal pattern ``*`` matches every
name of its type, the principal ``*`` matches every authenticated principal, and an
allowed read, write or alter implies describe.

Everything here is pure: the HTTP front evaluates ACLs from an in-memory snapshot
(:class:`AccessSnapshot`) without a database, and the unit tests do the same.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from half_store.domain.records import pickled_as_arguments

ANY_PRINCIPAL = "*"
ANY_NAME = "*"
# The bootstrap superuser (HALFMQ_ADMIN_TOKEN) is no principal of the database; this is
# how it appears in the audit log. A principal name cannot contain parentheses.
ADMIN_PRINCIPAL = "(admin token)"
CLUSTER_NAME = "cluster"  # the one resource of type cluster

PRINCIPAL_NAME_PATTERN = r"^[A-Za-z0-9._@:+=-]{1,128}$"
TOKEN_PREFIX = "hmq"
_TOKEN_RE = re.compile(r"^hmq\.([0-9a-f]{16})\.([A-Za-z0-9_-]{43})$")


class ResourceType(StrEnum):
    TOPIC = "topic"
    GROUP = "group"
    PRODUCER_GROUP = "producer_group"
    TRANSACTIONAL_ID = "transactional_id"
    CLUSTER = "cluster"


class Operation(StrEnum):
    READ = "read"
    WRITE = "write"
    DESCRIBE = "describe"
    ALTER = "alter"


class PatternType(StrEnum):
    LITERAL = "literal"
    PREFIXED = "prefixed"


class Permission(StrEnum):
    ALLOW = "allow"
    DENY = "deny"


# Kafka: DESCRIBE is implicitly allowed by READ, WRITE and ALTER (a deny is never implied).
_IMPLYING: dict[Operation, frozenset[Operation]] = {
    Operation.DESCRIBE: frozenset({Operation.DESCRIBE, Operation.READ, Operation.WRITE, Operation.ALTER}),
    Operation.READ: frozenset({Operation.READ}),
    Operation.WRITE: frozenset({Operation.WRITE}),
    Operation.ALTER: frozenset({Operation.ALTER}),
}


@dataclass(frozen=True, slots=True)
class Need:
    """One right a request needs: ``operation`` on the resource ``resource_type``:``name``."""

    resource_type: ResourceType
    name: str
    operation: Operation

    def __str__(self) -> str:
        return f"{self.resource_type.value}:{self.operation.value} on {shown_name(self.name)}"


SHOWN_NAME_CHARS = 64


def shown_name(name: str) -> str:
    """A name as errors and log lines echo it: quoted, and cut short past 64 characters."""
    if len(name) <= SHOWN_NAME_CHARS:
        return repr(name)
    return f"{name[:SHOWN_NAME_CHARS]!r}… ({len(name)} characters)"


@pickled_as_arguments
@dataclass(frozen=True, slots=True)
class Acl:
    acl_id: str
    principal: str
    resource_type: ResourceType
    pattern: str
    pattern_type: PatternType
    operations: frozenset[Operation]
    permission: Permission
    created_at: int

    def matches(self, principal: str, need: Need, operations: frozenset[Operation]) -> bool:
        if self.principal not in (principal, ANY_PRINCIPAL) or self.resource_type is not need.resource_type:
            return False
        if self.operations.isdisjoint(operations):
            return False
        if self.pattern_type is PatternType.PREFIXED:
            return need.name.startswith(self.pattern)
        return self.pattern in (need.name, ANY_NAME)


@pickled_as_arguments
@dataclass(frozen=True, slots=True)
class Principal:
    name: str
    created_at: int


@pickled_as_arguments
@dataclass(frozen=True, slots=True)
class TokenInfo:
    """A token as listed: never its secret, which is stored only as a SHA-256 hash."""

    token_id: str
    principal: str
    created_at: int


@pickled_as_arguments
@dataclass(frozen=True, slots=True)
class StoredToken:
    token_id: str
    principal: str
    secret_hash: bytes
    rocketmq_secret: str | None = None  # None: made before RocketMQ signatures, it cannot sign them


@dataclass(frozen=True, slots=True)
class IssuedToken:
    """A token just created: the only time its secret is seen."""

    token_id: str
    principal: str
    token: str
    rocketmq_secret_key: str  # with the token id as access key, signs RocketMQ calls (MQv2-HMAC-SHA1)


@dataclass(frozen=True, slots=True)
class AccessSnapshot:
    """Every live token and ACL at one version of the access tables."""

    version: int
    tokens: tuple[StoredToken, ...]
    acls: tuple[Acl, ...]


def hash_secret(secret: str) -> bytes:
    """SHA-256: tokens carry 256 random bits, so a slow password hash adds nothing."""
    return hashlib.sha256(secret.encode()).digest()


ROCKETMQ_KEY_CONTEXT = b"halfmq-rocketmq"


def rocketmq_secret_key(token: str) -> str:
    """A token's RocketMQ secret key: hex HMAC-SHA256 keyed with the token (public: whoever holds the token
    computes it; the broker stores it at the token's creation, since it keeps only the token's hash)."""
    return hmac.new(token.encode(), ROCKETMQ_KEY_CONTEXT, hashlib.sha256).hexdigest()


def format_token(token_id: str, secret: str) -> str:
    return f"{TOKEN_PREFIX}.{token_id}.{secret}"


def parse_token(token: str) -> tuple[str, str] | None:
    """(token id, secret) of a well-formed token, else None."""
    found = _TOKEN_RE.match(token)
    return (found.group(1), found.group(2)) if found else None


def secret_matches(secret: str, stored_hash: bytes) -> bool:
    return hmac.compare_digest(hash_secret(secret), stored_hash)


def is_allowed(acls: Iterable[Acl], principal: str, need: Need) -> bool:
    """Kafka's decision: a matching deny refuses, else a matching allow (or implying one) permits."""
    allowed = False
    allowing = _IMPLYING[need.operation]
    denying = frozenset({need.operation})
    for acl in acls:
        if acl.permission is Permission.DENY:
            if acl.matches(principal, need, denying):
                return False
        elif not allowed and acl.matches(principal, need, allowing):
            allowed = True
    return allowed


def acls_by_principal(acls: Iterable[Acl]) -> dict[str, tuple[Acl, ...]]:
    """The ACLs each principal's decisions read: its own and the wildcard principal's."""
    own: dict[str, list[Acl]] = {}
    for acl in acls:
        own.setdefault(acl.principal, []).append(acl)
    wildcard = own.get(ANY_PRINCIPAL, [])
    return {name: tuple(found + (wildcard if name != ANY_PRINCIPAL else [])) for name, found in own.items()}
