"""Message tags and tag filters (RocketMQ's TAG expressions: ``*``, ``TagA``, ``TagA || TagB``).

A message's tag is its header ``rocketmq.tag`` (set by REST produce's ``tag``, the SDK, or a
RocketMQ producer). A filter keeps the messages whose tag is one of its tags; ``*`` (or no
filter) keeps every message, tagged or not. Share-group receives, fetches, the SDK consumers
and the Spark source all filter through this one definition.
"""

from __future__ import annotations

from dataclasses import dataclass

import orjson

from half_store.domain.errors import InvalidTagExpression

TAG_HEADER = "rocketmq.tag"
MAX_EXPRESSION_CHARS = 4096


@dataclass(frozen=True, slots=True)
class TagFilter:
    tags: frozenset[str] | None  # None: every message

    @classmethod
    def parse(cls, expression: str | None) -> TagFilter:
        """``*``, empty or None: everything; otherwise tags separated by ``||``."""
        if expression is None or expression.strip() in ("", "*"):
            return EVERYTHING
        if len(expression) > MAX_EXPRESSION_CHARS:
            raise InvalidTagExpression(f"a tag expression has at most {MAX_EXPRESSION_CHARS} characters")
        parts = [part.strip() for part in expression.split("||")]
        if any(not part or "|" in part or part == "*" for part in parts):
            raise InvalidTagExpression(f"{expression!r} is not '*' or tags separated by '||'")
        return cls(frozenset(parts))

    @property
    def everything(self) -> bool:
        return self.tags is None

    @property
    def expression(self) -> str:
        return "*" if self.tags is None else " || ".join(sorted(self.tags))

    def matches_tag(self, tag: str | None) -> bool:
        return self.tags is None or (tag is not None and tag in self.tags)

    def matches(self, headers: str | None) -> bool:
        """Whether a stored message (its headers' JSON text) passes the filter."""
        if self.tags is None:
            return True
        return self.matches_tag(tag_of(headers))


EVERYTHING = TagFilter(None)


def tag_of(headers: str | None) -> str | None:
    """The tag in a stored message's headers (JSON object text), if it has one."""
    if not headers or TAG_HEADER not in headers:  # the cheap test first: most messages have no tag
        return None
    found = orjson.loads(headers).get(TAG_HEADER)
    return found if isinstance(found, str) else None
