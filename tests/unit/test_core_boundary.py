"""The typed front ↔ core boundary: one Protocol per service, satisfied by the service and by the proxy."""

from __future__ import annotations

import asyncio
import dataclasses
import typing
from typing import Any

import pytest

from app.broker import Broker
from app.core.link import RemoteBroker
from app.handle import CORE_CALLS, SERVICES, BrokerHandle, calls_of
from half_store.settings import Settings


class RecordingLink:
    """A stand-in for the socket to the core: it records what would cross."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, tuple[Any, ...], dict[str, Any]]] = []

    async def call(self, service: str, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        self.calls.append((service, method, args, kwargs))
        return f"{service}.{method}"


def remote() -> tuple[RemoteBroker, RecordingLink]:
    link = RecordingLink()
    return RemoteBroker(Settings(), link), link  # type: ignore[arg-type]


def test_the_services_are_named_once_and_the_real_broker_has_each() -> None:
    names = [f.name for f in dataclasses.fields(BrokerHandle) if f.name != "settings"]
    assert list(SERVICES) == names
    hints = typing.get_type_hints(Broker)
    for name, protocol in SERVICES.items():
        implementation = hints[name]
        assert calls_of(protocol) <= {m for m in dir(implementation) if not m.startswith("_")}, name


@pytest.mark.parametrize("name", sorted(SERVICES))
def test_a_proxy_satisfies_its_services_protocol_and_nothing_more(name: str) -> None:
    broker, link = remote()
    proxy = getattr(broker, name)
    assert isinstance(proxy, SERVICES[name])
    method = sorted(CORE_CALLS[name])[0]
    assert asyncio.run(getattr(proxy, method)("x", flag=True)) == f"{name}.{method}"
    assert link.calls == [(name, method, ("x",), {"flag": True})]
    with pytest.raises(AttributeError, match="not a core call"):
        proxy.store  # noqa: B018 - the service's internals do not cross
    with pytest.raises(AttributeError, match="not a core call"):
        proxy.discard  # noqa: B018 - a real method outside the Protocol is not callable from the front


def test_the_core_answers_each_protocols_methods_and_the_brokers_health() -> None:
    assert CORE_CALLS["broker"] == {"ready", "metrics"}
    assert set(CORE_CALLS) == {*SERVICES, "broker"}
    assert CORE_CALLS["halves"] == calls_of(SERVICES["halves"])
    assert "discard" not in CORE_CALLS["halves"]
