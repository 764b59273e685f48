"""docker-compose.yml wires the broker to PostgreSQL (checked without a Docker engine)."""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path
from typing import Any

import yaml
from sqlalchemy.engine import make_url

ROOT = Path(__file__).resolve().parents[2]


def load() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())  # type: ignore[no-any-return]


def test_services_and_wiring() -> None:
    compose = load()
    postgres, broker = compose["services"]["postgres"], compose["services"]["broker"]
    assert postgres["healthcheck"]["test"] and "pgdata" in compose["volumes"]
    assert any(v.startswith("pgdata:") for v in postgres["volumes"])
    assert broker["depends_on"]["postgres"]["condition"] == "service_healthy"
    url = make_url(broker["environment"]["HALFMQ_DATABASE_URL"])
    env = postgres["environment"]
    assert (url.drivername, url.host, url.port) == ("postgresql+psycopg", "postgres", 5432)
    assert (url.username, url.password, url.database) == (env["POSTGRES_USER"], env["POSTGRES_PASSWORD"], env["POSTGRES_DB"])
    assert broker["ports"][0] == f"{broker['environment']['HALFMQ_PORT']}:8080"
    assert "8081:8081" in broker["ports"]  # RocketMQ clients: the default HALFMQ_GRPC_PORT
    assert broker["build"] == "."


def test_the_dockerfile_installs_and_serves_the_broker() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    for package in ("app", "half_store", "checker", "migrations"):
        assert f"COPY {package} ./{package}" in dockerfile
    assert 'CMD ["halfmq", "serve"]' in dockerfile and "HALFMQ_HOST=0.0.0.0" in dockerfile


def test_the_image_holds_every_package_the_wheel_does() -> None:
    """`pip install .` in the image builds from what was copied: a package left out is missing there."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = pyproject["tool"]["setuptools"]["packages"]["find"]["include"]
    packages = sorted(
        d.name
        for d in ROOT.iterdir()
        if (d / "__init__.py").exists() and any(fnmatch.fnmatch(d.name, pattern) for pattern in patterns)
    )
    assert "bench" in packages and "app" in packages  # the patterns were read, not an empty match
    dockerfile = (ROOT / "Dockerfile").read_text()
    missing = [package for package in packages if f"COPY {package} ./{package}" not in dockerfile]
    assert missing == [], f"the Dockerfile does not copy {missing}"
