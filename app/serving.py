"""Running the broker: one HTTP front, which starts its core process, or several sharing one.

``halfmq serve`` and a bare ``python -m app`` both come here. The bare form does not
import the CLI (typer, rich, the operator verbs' HTTP client): the front is 8 MB
smaller without them, and a broker process has no use for them.
"""

from __future__ import annotations

import sys
from typing import Any

from half_store.settings import Settings


def uvicorn_options(settings: Settings) -> dict[str, Any]:
    return {
        "host": settings.host,
        "port": settings.port,
        "log_level": settings.log_level,
        "loop": "auto",
        "http": "auto",
        "access_log": False,  # the broker's own access log (HALFMQ_ACCESS_LOG) replaces uvicorn's
        "timeout_graceful_shutdown": 10,
        "ssl_certfile": settings.ssl_certfile,
        "ssl_keyfile": settings.ssl_keyfile,
        # X-Forwarded-For is believed only from the proxies the setting names (uvicorn's default
        # believes any local peer, so anything on the broker's host could forge a client address).
        "proxy_headers": bool(settings.forwarded_allow_ips),
        "forwarded_allow_ips": settings.forwarded_allow_ips or None,
    }


def serve(settings: Settings) -> int:
    """Serve until stopped (SIGTERM, SIGINT); the exit code."""
    if settings.workers > 1 and settings.core_process:
        from app.fronts import serve_fronts

        return serve_fronts(settings, uvicorn_options(settings))
    import uvicorn

    from app.main import create_app

    uvicorn.run(create_app(settings), **uvicorn_options(settings))
    return 0


def serve_from_environment() -> int:
    """``python -m app``: the broker with the settings of the environment; the exit code."""
    settings = Settings()
    problem = settings.startup_problem()
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    return serve(settings)
