"""Who is calling: the client id, namespace and principal of one RocketMQ call, and its rights."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from app.auth.authority import Authority
from app.rocketmq.status import RocketMQError
from half_store.domain.access import Need, Operation, ResourceType

ANONYMOUS = "ANONYMOUS"
CLIENT_ID_HEADER = "x-mq-client-id"
NAMESPACE_HEADER = "x-mq-namespace"
LANGUAGE_HEADER = "x-mq-language"
VERSION_HEADER = "x-mq-client-version"


@dataclass(frozen=True, slots=True)
class CallContext:
    client_id: str
    principal: str
    namespace: str
    language: str
    version: str
    authority: Authority

    @classmethod
    def of(cls, headers: Mapping[str, str], principal: str, authority: Authority) -> CallContext:
        client_id = headers.get(CLIENT_ID_HEADER, "")
        if not client_id:
            raise RocketMQError("CLIENT_ID_REQUIRED", f"every call carries the header {CLIENT_ID_HEADER}")
        return cls(
            client_id,
            principal,
            headers.get(NAMESPACE_HEADER, ""),
            headers.get(LANGUAGE_HEADER, ""),
            headers.get(VERSION_HEADER, ""),
            authority,
        )

    def require(self, resource_type: ResourceType, operation: Operation, name: str) -> None:
        """403 FORBIDDEN (RocketMQ: FORBIDDEN) unless the caller has the right; nothing is done before."""
        if not self.authority.enabled:
            return
        need = Need(resource_type, name, operation)
        if not self.authority.allows(self.principal, need):
            raise self.authority.refuse(self.principal, str(need), api="rocketmq", client_id=self.client_id)
