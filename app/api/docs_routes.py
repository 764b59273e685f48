"""``/docs`` and ``/redoc`` served from the broker itself: no CDN, so they work without internet.

FastAPI's own pages load Swagger UI and ReDoc from a CDN, which is a blank page on a
machine that cannot reach it. The assets come from the ``fastapi-offline`` package
(Swagger UI's bundle and stylesheet, ReDoc's standalone script), served under
``/docs/static``. Like FastAPI's pages these are plain routes: no token, no schema entry.
"""

from __future__ import annotations

from pathlib import Path

import fastapi_offline
from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.staticfiles import StaticFiles

ASSETS = Path(fastapi_offline.__file__).resolve().parent / "static"
STATIC = "/docs/static"


def install_docs(app: FastAPI) -> None:
    """Serve the API's documentation pages and their assets from this app."""

    async def swagger_ui(_request: Request) -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=str(app.openapi_url),
            title=f"{app.title} API",
            swagger_js_url=f"{STATIC}/swagger-ui-bundle.js",
            swagger_css_url=f"{STATIC}/swagger-ui.css",
            swagger_favicon_url=f"{STATIC}/favicon.png",
        )

    async def redoc(_request: Request) -> HTMLResponse:
        return get_redoc_html(
            openapi_url=str(app.openapi_url),
            title=f"{app.title} API",
            redoc_js_url=f"{STATIC}/redoc.standalone.js",
            redoc_favicon_url=f"{STATIC}/favicon.png",
            with_google_fonts=False,
        )

    app.add_route("/docs", swagger_ui, include_in_schema=False)
    app.add_route("/redoc", redoc, include_in_schema=False)
    app.mount(STATIC, StaticFiles(directory=ASSETS), name="docs-static")
