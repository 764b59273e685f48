"""One client connection's state: who it is (after SASL), and what its handlers reach."""

from __future__ import annotations

from dataclasses import dataclass, field

from app.auth.authority import Authority
from app.handle import BrokerHandle
from app.kafka.brokers import ClusterView
from half_store.domain.access import Need
from half_store.settings import Settings

ANONYMOUS = "ANONYMOUS"  # the principal of every connection while HALFMQ_AUTH=none


@dataclass
class Session:
    broker: BrokerHandle
    settings: Settings
    authority: Authority
    cluster: ClusterView
    client_id: str | None = None
    peer: str = ""
    principal: str | None = None  # set once authenticated; anonymous while auth is off
    sasl_mechanism: str | None = None
    # Per-version facts a handler learned about this client (e.g. the transaction protocol it speaks).
    notes: dict[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.authority.enabled:
            self.principal = ANONYMOUS

    @property
    def owner(self) -> str | None:
        """The principal the services bind producer ids to: None while authentication is off (nothing is bound)."""
        return self.principal if self.authority.enabled else None

    @property
    def authenticated(self) -> bool:
        return self.principal is not None

    def allows(self, need: Need) -> bool:
        if not self.authority.enabled:
            return True
        return self.principal is not None and self.authority.allows(self.principal, need)

    def require(self, need: Need) -> None:
        if not self.allows(need):
            raise self.authority.refuse(self.principal or "?", str(need), front="kafka")
