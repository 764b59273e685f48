"""Kafka's ACL decision, without a database: deny wins, no allow means no, prefixes, wildcards, implied describe."""

from __future__ import annotations

import pytest

from half_store.domain.access import (
    Acl,
    Need,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    format_token,
    hash_secret,
    is_allowed,
    parse_token,
    secret_matches,
)

TOPIC, GROUP = ResourceType.TOPIC, ResourceType.GROUP
READ, WRITE, DESCRIBE, ALTER = Operation.READ, Operation.WRITE, Operation.DESCRIBE, Operation.ALTER


def acl(
    principal: str,
    pattern: str,
    *operations: Operation,
    prefixed: bool = False,
    deny: bool = False,
    resource_type: ResourceType = TOPIC,
) -> Acl:
    return Acl(
        f"{principal}-{pattern}-{deny}",
        principal,
        resource_type,
        pattern,
        PatternType.PREFIXED if prefixed else PatternType.LITERAL,
        frozenset(operations),
        Permission.DENY if deny else Permission.ALLOW,
        0,
    )


RULES = [
    acl("app", "orders", READ, WRITE),
    acl("app", "audit.", READ, prefixed=True),
    acl("app", "audit.secret", READ, deny=True),
    acl("app", "payments", ALTER),
    acl("*", "public", READ),
    acl("ops", "*", DESCRIBE),
    acl("app", "orders", READ, resource_type=GROUP),
]


@pytest.mark.parametrize(
    ("principal", "resource_type", "name", "operation", "allowed"),
    [
        ("app", TOPIC, "orders", WRITE, True),
        ("app", TOPIC, "orders", ALTER, False),  # not granted
        ("app", TOPIC, "orders2", READ, False),  # a literal is exact
        ("app", TOPIC, "audit.events", READ, True),  # prefixed
        ("app", TOPIC, "audit.secret", READ, False),  # deny wins over the prefixed allow
        ("app", TOPIC, "audit", READ, False),  # the prefix is "audit.", not "audit"
        ("app", TOPIC, "orders", DESCRIBE, True),  # read and write imply describe
        ("app", TOPIC, "payments", DESCRIBE, True),  # so does alter
        ("app", TOPIC, "audit.secret", DESCRIBE, True),  # a deny of read does not deny describe (Kafka)
        ("someone", TOPIC, "public", READ, True),  # the * principal
        ("someone", TOPIC, "orders", READ, False),
        ("ops", TOPIC, "anything", DESCRIBE, True),  # the * name
        ("ops", TOPIC, "anything", READ, False),  # describe implies nothing
        ("app", GROUP, "orders", READ, True),  # resource types are separate
        ("app", GROUP, "orders", WRITE, False),
        ("nobody", TOPIC, "orders", DESCRIBE, False),  # no ACL at all: no
    ],
)
def test_decisions(principal: str, resource_type: ResourceType, name: str, operation: Operation, allowed: bool) -> None:
    assert is_allowed(RULES, principal, Need(resource_type, name, operation)) is allowed


def test_a_deny_of_describe_denies_describe_even_with_read() -> None:
    rules = [acl("app", "orders", READ), acl("app", "orders", DESCRIBE, deny=True)]
    assert is_allowed(rules, "app", Need(TOPIC, "orders", READ))
    assert not is_allowed(rules, "app", Need(TOPIC, "orders", DESCRIBE))


def test_a_wildcard_deny_applies_to_everyone() -> None:
    rules = [acl("app", "orders", WRITE), acl("*", "orders", WRITE, deny=True)]
    assert not is_allowed(rules, "app", Need(TOPIC, "orders", WRITE))


def test_tokens_parse_and_compare_by_their_hash() -> None:
    token = format_token("0123456789abcdef", "s" * 43)
    assert parse_token(token) == ("0123456789abcdef", "s" * 43)
    assert secret_matches("s" * 43, hash_secret("s" * 43))
    assert not secret_matches("t" * 43, hash_secret("s" * 43))
    for malformed in ("", "Bearer x", "hmq.0123.short", token + "x", token.replace("hmq.", "abc.")):
        assert parse_token(malformed) is None
