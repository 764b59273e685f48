"""OpenTelemetry spans for the broker's HTTP requests: only when asked for, and only if installed.

Off by default and free when off: nothing of OpenTelemetry is imported unless the
environment asks for traces the way every OpenTelemetry SDK reads it
(``OTEL_TRACES_EXPORTER`` other than ``none``, or an ``OTEL_EXPORTER_OTLP_ENDPOINT`` /
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``). Then each request gets a server span from
``opentelemetry-instrumentation-asgi``, a child of the caller's ``traceparent``. A
process started by ``opentelemetry-instrument`` already has its tracer provider; else
one is set up here with the exporter asked for (``otlp``, the default, or ``console``).
Without the packages the broker says so once and serves on without spans.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI

log = logging.getLogger(__name__)
ENDPOINTS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


def traces_wanted(environ: Mapping[str, str]) -> bool:
    exporter = environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter == "none" or environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return bool(exporter) or any(environ.get(name) for name in ENDPOINTS)


def install_otel(app: FastAPI, environ: Mapping[str, str], tracer_provider: Any = None) -> bool:
    """Wrap ``app`` in OpenTelemetry's ASGI middleware when traces are wanted and the packages are there.

    ``tracer_provider``: where the spans go (default: the process's, set up here if it has none).
    """
    if not traces_wanted(environ):
        return False
    try:
        from opentelemetry.instrumentation.asgi import OpenTelemetryMiddleware
    except ImportError:
        log.warning("OTEL_* asks for traces, but opentelemetry-instrumentation-asgi is not installed: no spans")
        return False
    if tracer_provider is None:
        _ensure_provider(environ)
    # /metrics and the probes are scraped every few seconds: spans of them would drown the rest.
    app.add_middleware(OpenTelemetryMiddleware, excluded_urls="/metrics,/healthz,/readyz", tracer_provider=tracer_provider)
    return True


def _ensure_provider(environ: Mapping[str, str]) -> None:
    """A tracer provider exporting as asked, unless the process has one (opentelemetry-instrument sets it)."""
    from opentelemetry import trace

    if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        return
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        log.warning("OTEL_* asks for traces, but opentelemetry-sdk is not installed: spans go nowhere")
        return
    exporter = _exporter(environ.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() or "otlp")
    if exporter is None:
        return
    provider = TracerProvider(resource=Resource.create({"service.name": environ.get("OTEL_SERVICE_NAME", "halfmq")}))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)


def _exporter(name: str) -> Any:
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    except ImportError:
        log.warning("OTEL_TRACES_EXPORTER=%s needs opentelemetry-exporter-otlp-proto-http: no spans exported", name)
        return None
    return OTLPSpanExporter()
