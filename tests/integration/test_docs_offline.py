"""/docs and /redoc work without internet: every asset they load is served by the broker itself."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

LOADED = re.compile(r'(?:src|href)="([^"]+)"')
EXTERNAL = re.compile(r"(?:https?:)?//[A-Za-z0-9.-]+\.[A-Za-z]{2,}")


def test_the_docs_pages_load_only_the_brokers_own_assets(client: TestClient) -> None:
    for page in ("/docs", "/redoc"):
        html = client.get(page)
        assert html.status_code == 200 and html.headers["content-type"].startswith("text/html")
        assert not EXTERNAL.findall(html.text), f"{page} reaches outside the broker"
        assets = LOADED.findall(html.text)
        assert assets, page
        for asset in assets:
            answer = client.get(asset)
            assert answer.status_code == 200 and answer.content, asset
    assert "/docs/static/swagger-ui-bundle.js" in client.get("/docs").text
    assert client.get("/openapi.json").json()["paths"]  # what the pages render
    assert client.get("/docs/static/nothing.js").status_code == 404
    metrics = client.get("/metrics").text
    assert 'route="/docs/static/{path:path}",status="200"' in metrics  # assets are named, not "unmatched"
