"""What the routes need from a broker, whether its services run in this process or in the core."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from half_store.services.access import AccessService
    from half_store.services.admin import AdminService
    from half_store.services.check_polling import CheckPolling
    from half_store.services.coordinator import Coordinator
    from half_store.services.group_coordinator import GroupCoordinator
    from half_store.services.half_messages import HalfMessageService
    from half_store.services.log_service import LogService
    from half_store.services.share_groups import ShareGroupService
    from half_store.settings import Settings


class BrokerHandle(Protocol):
    """Implemented by :class:`app.broker.Broker` and :class:`app.core.link.RemoteBroker`."""

    settings: Settings
    log: LogService
    coordinator: Coordinator
    halves: HalfMessageService
    polling: CheckPolling
    access: AccessService
    admin: AdminService
    groups: GroupCoordinator
    shares: ShareGroupService

    async def ready(self) -> bool: ...

    async def metrics(self) -> bytes: ...
