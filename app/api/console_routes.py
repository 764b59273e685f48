"""The web console at ``/console``: server-rendered pages whose script calls the broker's own HTTP API.

The pages hold no data and run no queries: each is a Jinja2 template (layout, navigation,
the page's empty tables and forms) and one script that fills them from the same ``/v1``
routes every client uses, from the browser, with the operator's bearer token when the
broker asks for one. So the pages and their static files need no token themselves, and
the console can never show or do more than its user's token allows.
"""

from __future__ import annotations

import hashlib
import mimetypes
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Header, Request
from fastapi import Path as PathParam
from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from starlette.responses import HTMLResponse, Response

from app.api.rights import PUBLIC, rights
from half_store.domain.errors import RouteNotFound

CONSOLE_DIR = Path(__file__).resolve().parent / "console"

# What the pages may load and where they may send requests: only this broker, no inline script.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


@dataclass(frozen=True)
class Page:
    name: str  # the template's name and the path under /console
    title: str

    @property
    def href(self) -> str:
        return "/console" if self.name == "overview" else f"/console/{self.name}"


PAGES = (
    Page("overview", "Overview"),
    Page("topics", "Topics"),
    Page("groups", "Consumer groups"),
    Page("share-groups", "Share groups"),
    Page("half-messages", "Half messages"),
    Page("transactions", "Transactions"),
)
PAGES_BY_NAME = {page.name: page for page in PAGES}


@dataclass(frozen=True)
class StaticFile:
    body: bytes
    media_type: str
    etag: str


def load_static(directory: Path) -> dict[str, StaticFile]:
    """The console's static files, read once: a few kilobytes, served from memory."""
    found = {}
    for path in sorted(directory.iterdir()):
        if path.is_file():
            body = path.read_bytes()
            media_type = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
            found[path.name] = StaticFile(body, media_type, f'"{hashlib.sha256(body).hexdigest()[:16]}"')
    return found


STATIC = load_static(CONSOLE_DIR / "static")
TEMPLATES = Environment(
    loader=FileSystemLoader(CONSOLE_DIR / "templates"),
    autoescape=select_autoescape(["html"]),
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)


def static_url(name: str) -> str:
    """A static file's URL, changing with its content so a browser never runs an old script with a new page."""
    return f"/console/static/{name}?v={STATIC[name].etag.strip(chr(34))}"


TEMPLATES.globals["static_url"] = static_url

router = APIRouter(prefix="/console", tags=["console"], include_in_schema=False)


def render(page: Page, request: Request) -> Response:
    html = TEMPLATES.get_template(f"{page.name}.html").render(
        page=page, pages=PAGES, version=request.app.version
    )
    return HTMLResponse(html, headers=SECURITY_HEADERS)


@router.get("")
@rights(PUBLIC)  # no data: every call the page makes carries the user's token
async def overview(request: Request) -> Response:
    return render(PAGES_BY_NAME["overview"], request)


@router.get("/static/{name}")
@rights(PUBLIC)  # no data: every call the page makes carries the user's token
async def static_file(
    name: Annotated[str, PathParam(max_length=100)],
    if_none_match: Annotated[str | None, Header()] = None,
) -> Response:
    found = STATIC.get(name)
    if found is None:
        raise RouteNotFound(f"the console has no file {name!r}")
    headers = {"ETag": found.etag, "Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"}
    if if_none_match == found.etag:
        return Response(status_code=304, headers=headers)
    return Response(found.body, media_type=found.media_type, headers=headers)


@router.get("/{name}")
@rights(PUBLIC)  # no data: every call the page makes carries the user's token
async def page(name: Annotated[str, PathParam(max_length=100)], request: Request) -> Response:
    found = PAGES_BY_NAME.get(name)
    if found is None or found.name == "overview":
        raise RouteNotFound(f"the console has no page {name!r}")
    return render(found, request)
