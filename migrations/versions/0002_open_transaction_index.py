"""partial index over open transactions' partitions, for the last stable offset

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "ix_transaction_partitions_open",
        "transaction_partitions",
        ["topic_id", "partition", "first_offset"],
        unique=False,
        sqlite_where=sa.text("marker_offset IS NULL"),
        postgresql_where=sa.text("marker_offset IS NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_transaction_partitions_open", table_name="transaction_partitions")
