"""Why a replicator stops, or retries.

A refusal from either cluster arrives as the SDK's :class:`~sdk.errors.HalfmqError`;
:class:`ClusterError` adds which side refused, which request it was and what right it
needs, so an operator reading the log knows what to fix. :func:`is_transient` is the
one place that decides "retry later" versus "start over now".
"""

from __future__ import annotations

from sdk.errors import BrokerUnavailableError, HalfmqError


class ReplicationError(Exception):
    """The replicator cannot go on; the message says why and what to do."""


class ClusterError(ReplicationError):
    """A request to one side failed; ``cause`` is the SDK's typed error."""

    def __init__(self, side: str, url: str, action: str, needs: str, cause: HalfmqError) -> None:
        self.side = side
        self.url = url
        self.action = action
        self.needs = needs
        self.cause = cause
        super().__init__(explain(side, url, action, needs, cause))

    @property
    def code(self) -> str:
        return self.cause.code

    @property
    def status(self) -> int | None:
        return self.cause.status


class TopicMissing(ReplicationError):
    """A topic to replicate does not exist on the source."""


class TopicMismatch(ReplicationError):
    """A topic has another partition count on the target than on the source."""


class SameCluster(ReplicationError):
    """Source and target answer with one cluster name: loop prevention could not tell them apart."""


class ProducerFenced(ReplicationError):
    """Another replicator with the same transactional id took over (or this one stalled past its timeout)."""


def explain(side: str, url: str, action: str, needs: str, cause: HalfmqError) -> str:
    """One line for the log: which side, what was being done, what the broker said, and what to fix."""
    what = f"the {side} ({url}) refused to {action}: {cause.code} ({cause.status}): {cause.message}"
    if cause.status == 401:
        return f"{what}. The --{side}-token is missing or unknown to the {side} cluster."
    if cause.status == 403:
        return f"{what}. The --{side}-token's principal needs {needs}."
    if isinstance(cause, BrokerUnavailableError):
        return f"the {side} ({url}) is unreachable while trying to {action}: {cause.message}"
    return what


def is_transient(error: ClusterError) -> bool:
    """Worth retrying after a pause: no answer, an overloaded broker, or a server-side failure."""
    cause = error.cause
    return isinstance(cause, BrokerUnavailableError) or cause.status == 429 or (cause.status or 0) >= 500


def is_refused_access(error: ClusterError) -> bool:
    return error.status in (401, 403)
