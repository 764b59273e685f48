"""docs/api.md names every route the broker serves and every error code it answers with."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from app.main import create_app
from half_store.domain import errors
from half_store.settings import Settings

REFERENCE = Path(__file__).resolve().parents[2] / "docs" / "api.md"


def test_every_route_has_its_section() -> None:
    schema = create_app(Settings(database_url="sqlite://")).openapi()  # no database is opened without a lifespan
    served = {(method.upper(), path) for path, operations in schema["paths"].items() for method in operations}
    documented = set(re.findall(r"^### `([A-Z]+) (/\S*)`", REFERENCE.read_text(), flags=re.MULTILINE))
    assert len(served) > 20  # the schema was read, not an empty match
    assert served - documented == set(), "routes the broker serves and docs/api.md does not describe"
    assert documented - served - {("GET", "/openapi.json"), ("GET", "/docs"), ("GET", "/redoc")} == set()


def test_every_error_code_is_in_the_table() -> None:
    table = set(re.findall(r"^\| `([A-Z_]+)` \| (\d{3}) \|", REFERENCE.read_text(), flags=re.MULTILINE))
    known = {
        (cls.code, str(cls.status))
        for _, cls in inspect.getmembers(errors, inspect.isclass)
        if issubclass(cls, errors.BrokerError) and cls is not errors.BrokerError
    }
    assert len(known) > 20
    assert known - table == set(), "error codes missing from docs/api.md (or with another status there)"
