"""The console's pages and static files as the broker serves them.

What the pages show is tested in a real browser (tests/e2e/test_console_browser.py);
here: every page answers, carries its security headers and is left out of the API's
schema, static files are cached by ETag, and a wheel built from pyproject carries them.
The pages hold no data and run no query, so one broker on SQLite serves every test.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from fnmatch import fnmatch
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.api.console_routes import CONSOLE_DIR, PAGES, Page
from app.main import create_app
from tests.integration.conftest import make_settings
from tests.support.databases import SqliteDatabases

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def client(sqlite_databases: SqliteDatabases) -> Iterator[TestClient]:
    with TestClient(create_app(make_settings(sqlite_databases.new()))) as running:
        yield running


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_page_is_served_with_its_navigation(client: TestClient, page: Page) -> None:
    href, name = page.href, page.name
    answer = client.get(href)
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/html")
    assert "script-src 'self'" in answer.headers["content-security-policy"]  # no inline script can run
    assert "frame-ancestors 'none'" in answer.headers["content-security-policy"]
    assert f'data-page="{name}"' in answer.text
    assert f'href="{href}" class="active" aria-current="page"' in answer.text
    for other in PAGES:
        assert f'href="{other.href}"' in answer.text


def test_static_files_are_served_and_revalidated_by_etag(client: TestClient) -> None:
    page = client.get("/console").text
    for name, media_type in (("console.js", "javascript"), ("console.css", "text/css")):
        assert f"/console/static/{name}?v=" in page  # the URL changes with the content
        answer = client.get(f"/console/static/{name}")
        assert answer.status_code == 200 and media_type in answer.headers["content-type"]
        assert answer.content == (CONSOLE_DIR / "static" / name).read_bytes()
        again = client.get(f"/console/static/{name}", headers={"If-None-Match": answer.headers["etag"]})
        assert again.status_code == 304 and again.content == b""


def test_unknown_pages_and_files_are_404_in_the_contract_shape(client: TestClient) -> None:
    for path in ("/console/nope", "/console/static/nope.js", "/console/static/..%2Fconsole_routes.py", "/console/overview"):
        answer = client.get(path)
        assert answer.status_code == 404, path
        assert answer.json()["error"]["code"] == "NOT_FOUND"


def test_the_console_is_not_part_of_the_api_schema(client: TestClient) -> None:
    assert not [path for path in client.get("/openapi.json").json()["paths"] if path.startswith("/console")]


def test_a_wheel_carries_every_console_file() -> None:
    package_data = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["app.api"]
    api_dir = REPO / "app" / "api"
    files = [p.relative_to(api_dir).as_posix() for p in CONSOLE_DIR.rglob("*") if p.is_file()]
    assert len(files) >= 8  # the templates and the two static files
    assert [f for f in files if not any(fnmatch(f, pattern) for pattern in package_data)] == []
