"""The migrations and the table definitions the code queries must describe the same schema."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from half_store.storage.database import open_database
from half_store.storage.migrate import upgrade
from half_store.storage.schema import metadata


def test_migrated_schema_matches_the_models(database_url: str) -> None:
    database = open_database(database_url)
    try:
        upgrade(database.writer)  # already at head: a no-op that must not fail
        with database.writer.connect() as conn:
            context = MigrationContext.configure(conn, opts={"compare_type": True})
            differences = compare_metadata(context, metadata)
    finally:
        database.dispose()
    assert differences == []
