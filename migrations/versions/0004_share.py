"""share groups: share partitions, in-flight records, and the broker's shared secrets

Revision ID: 0004_share
Revises: 0002
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004_share"
down_revision = "0003_groups"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "share_partitions",
        sa.Column("group_id", sa.String(length=255), nullable=False),
        sa.Column("topic_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("partition", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("end_offset", sa.BigInteger(), nullable=False),
        sa.Column("accepted", sa.BigInteger(), nullable=False),
        sa.Column("dead_lettered", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("group_id", "topic_id", "partition", name=op.f("pk_share_partitions")),
    )
    op.create_table(
        "share_records",
        sa.Column("group_id", sa.String(length=255), nullable=False),
        sa.Column("topic_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("partition", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("offset", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("delivery_count", sa.Integer(), nullable=False),
        sa.Column("generation", sa.BigInteger(), nullable=False),
        sa.Column("visible_at", sa.BigInteger(), nullable=False),
        sa.Column("key", sa.Text(), nullable=True),
        sa.Column("txn_id", sa.String(length=64), nullable=True),
        sa.PrimaryKeyConstraint("group_id", "topic_id", "partition", "offset", name=op.f("pk_share_records")),
    )
    op.create_index(
        "ix_share_records_txn_id",
        "share_records",
        ["txn_id"],
        unique=False,
        sqlite_where=sa.text("txn_id IS NOT NULL"),
        postgresql_where=sa.text("txn_id IS NOT NULL"),
    )
    op.create_index(
        "ix_share_records_delivery_count_visible_at", "share_records", ["delivery_count", "visible_at"], unique=False
    )
    op.create_table(
        "broker_secrets",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_broker_secrets")),
    )


def downgrade() -> None:
    op.drop_table("broker_secrets")
    op.drop_index("ix_share_records_delivery_count_visible_at", table_name="share_records")
    op.drop_index("ix_share_records_txn_id", table_name="share_records")
    op.drop_table("share_records")
    op.drop_table("share_partitions")
