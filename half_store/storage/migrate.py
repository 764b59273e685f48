"""The Alembic migrations, run programmatically (``halfmq db upgrade|downgrade|current`` and ``serve``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import text
from sqlalchemy.engine import Engine

# Any constant will do: it only has to be the same in every broker process.
_MIGRATION_LOCK_ID = 0x48414C46  # "HALF"

MIGRATIONS_DIR = Path(__file__).resolve().parents[2] / "migrations"


def alembic_config(database_url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    # ConfigParser interpolation would choke on a '%' in a URL-encoded password.
    config.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    return config


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Bring the database behind ``engine`` to ``revision``."""
    config = alembic_config(engine.url.render_as_string(hide_password=False))
    with engine.begin() as connection:
        if connection.dialect.name == "postgresql":
            # Several brokers starting at once against one database: one migrates, the others wait.
            connection.execute(text("SELECT pg_advisory_xact_lock(:id)"), {"id": _MIGRATION_LOCK_ID})
        config.attributes["connection"] = connection
        command.upgrade(config, revision)


def downgrade(engine: Engine, revision: str) -> None:
    """Take the database behind ``engine`` back to ``revision`` (``base``: no tables at all)."""
    config = alembic_config(engine.url.render_as_string(hide_password=False))
    with engine.begin() as connection:
        if connection.dialect.name == "postgresql":
            connection.execute(text("SELECT pg_advisory_xact_lock(:id)"), {"id": _MIGRATION_LOCK_ID})
        config.attributes["connection"] = connection
        command.downgrade(config, revision)


@dataclass(frozen=True)
class Revisions:
    """Where a database stands: its revision (None before any migration) and the newest one known."""

    current: str | None
    head: str
    history: tuple[str, ...]  # every known revision, oldest first

    @property
    def at_head(self) -> bool:
        return self.current == self.head


def revisions(engine: Engine) -> Revisions:
    script = ScriptDirectory.from_config(alembic_config(engine.url.render_as_string(hide_password=False)))
    with engine.connect() as connection:
        current = MigrationContext.configure(connection).get_current_revision()
    history = tuple(reversed([r.revision for r in script.walk_revisions()]))
    head = script.get_current_head()
    assert head is not None, "the migrations have one head"
    return Revisions(current, head, history)
