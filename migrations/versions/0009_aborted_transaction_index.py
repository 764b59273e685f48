"""partial index over aborted transactions' partitions, for read_committed fetches

Revision ID: 0009_aborted_transaction_index
Revises: 0008_value_compression
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009_aborted_transaction_index"
down_revision = "0008_value_compression"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "ix_transaction_partitions_aborted",
        "transaction_partitions",
        ["topic_id", "partition", "marker_offset"],
        unique=False,
        # As SQLAlchemy renders the fetch's condition on each database, so each planner matches it.
        sqlite_where=sa.text("aborted IS 1"),
        postgresql_where=sa.text("aborted IS true"),
    )


def downgrade() -> None:
    op.drop_index("ix_transaction_partitions_aborted", table_name="transaction_partitions")
