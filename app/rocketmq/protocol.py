"""RocketMQ 5's gRPC protocol (``apache.rocketmq.v2``), built from the official Python client's definitions.

The official client on PyPI (``rocketmq-python-client``) ships the protocol as generated
modules (``rocketmq.grpc_protocol``). Importing them imports the whole client first: its
package ``__init__`` loads OpenTelemetry (some 130 modules, +11 MB, 150 ms), creates
``~/logs/rocketmq_python/`` and replaces the process's logging configuration with
``logging.config.dictConfig`` — none of which a broker may suffer. So the broker never
imports it: it reads the serialized file descriptors that those generated modules embed
(their ``AddSerializedFile`` literal, found with :mod:`ast`, never executed) from the
installed distribution, adds them to a descriptor pool of its own, and builds the message
classes from that pool. Same wire definitions, no client code run, nothing copied.
"""

from __future__ import annotations

import ast
import functools
from importlib import metadata
from pathlib import Path
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, duration_pb2, message_factory, timestamp_pb2
from google.protobuf.descriptor import FileDescriptor, ServiceDescriptor

DISTRIBUTION = "rocketmq-python-client"
PACKAGE = "apache.rocketmq.v2"
SERVICE_NAME = f"{PACKAGE}.MessagingService"
# The generated modules, in dependency order (service.proto imports definition.proto).
_MODULES = ("rocketmq/grpc_protocol/definition_pb2.py", "rocketmq/grpc_protocol/service_pb2.py")


class ProtocolUnavailable(RuntimeError):
    """The protocol's definitions could not be read from the installed client distribution."""


def _serialized_descriptor(source: str, origin: str) -> bytes:
    """The bytes of the one ``AddSerializedFile(b'...')`` call in a generated module."""
    for node in ast.walk(ast.parse(source, origin)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "AddSerializedFile"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, bytes)
        ):
            return node.args[0].value
    raise ProtocolUnavailable(f"{origin} holds no serialized file descriptor")


def _module_sources() -> list[tuple[str, str]]:
    try:
        files = {str(f): f for f in metadata.files(DISTRIBUTION) or ()}
    except metadata.PackageNotFoundError as error:
        raise ProtocolUnavailable(f"the RocketMQ protocol needs the {DISTRIBUTION} distribution installed") from error
    sources = []
    for name in _MODULES:
        found = files.get(name)
        if found is None:
            raise ProtocolUnavailable(f"{DISTRIBUTION} has no {name}")
        path = Path(str(found.locate()))
        sources.append((path.read_text(encoding="utf-8"), str(path)))
    return sources


@functools.cache
def _pool() -> tuple[descriptor_pool.DescriptorPool, FileDescriptor]:
    pool = descriptor_pool.DescriptorPool()
    for dependency in (duration_pb2.DESCRIPTOR, timestamp_pb2.DESCRIPTOR):
        proto = descriptor_pb2.FileDescriptorProto()
        dependency.CopyToProto(proto)
        pool.Add(proto)
    last: FileDescriptor | None = None
    for source, origin in _module_sources():
        proto = descriptor_pb2.FileDescriptorProto.FromString(_serialized_descriptor(source, origin))
        pool.Add(proto)
        last = pool.FindFileByName(proto.name)
    assert last is not None
    return pool, last


def service_descriptor() -> ServiceDescriptor:
    return _pool()[1].services_by_name["MessagingService"]


@functools.cache
def message_class(name: str) -> Any:
    """The message class ``apache.rocketmq.v2.<name>`` (or a nested one, ``Outer.Inner``)."""
    pool, _ = _pool()
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{PACKAGE}.{name}"))


@functools.cache
def enum_value(enum: str, name: str) -> int:
    """The number of ``apache.rocketmq.v2.<enum>.<name>``."""
    pool, _ = _pool()
    return int(pool.FindEnumTypeByName(f"{PACKAGE}.{enum}").values_by_name[name].number)


@functools.cache
def enum_name(enum: str, number: int) -> str:
    pool, _ = _pool()
    found = pool.FindEnumTypeByName(f"{PACKAGE}.{enum}").values_by_number.get(number)
    return found.name if found is not None else str(number)


def new(type_name: str, /, **fields: Any) -> Any:
    """A new ``apache.rocketmq.v2.<name>`` message."""
    return message_class(type_name)(**fields)
