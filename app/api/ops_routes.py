"""Health, readiness and Prometheus metrics."""

from __future__ import annotations

from fastapi import APIRouter, Request
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sqlalchemy import text
from starlette.responses import Response

from app.api.encoding import JsonResponse
from app.api.log_routes import broker_of
from app.errors import StorageUnavailable
from app.metrics import LONG_POLL_WAITERS

router = APIRouter(tags=["operations"])


@router.get("/healthz")
async def healthz() -> Response:
    return JsonResponse({"status": "ok"})


@router.get("/readyz")
async def readyz(request: Request) -> Response:
    try:
        await broker_of(request).store.read(lambda conn: conn.execute(text("SELECT 1")).scalar())
    except StorageUnavailable:
        return JsonResponse({"status": "unavailable"}, status_code=503)
    return JsonResponse({"status": "ready"})


@router.get("/metrics")
async def metrics(request: Request) -> Response:
    LONG_POLL_WAITERS.set(broker_of(request).log.notifier.waiting)
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)
