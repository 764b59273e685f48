"""operations and administration: topic configs, deleted topics, retention cursors,
half-message check history, job rounds

Revision ID: 0006_admin
Revises: 0002
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006_admin"
down_revision = "0005_auth"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "topic_configs",
        sa.Column("topic_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("retention_ms", sa.BigInteger(), nullable=True),
        sa.Column("retention_bytes", sa.BigInteger(), nullable=True),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("topic_id", name=op.f("pk_topic_configs")),
    )
    op.create_table(
        "deleted_topics",
        sa.Column("topic_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("name", sa.String(length=249), nullable=False),
        sa.Column("deleted_at", sa.BigInteger(), nullable=False),
        sa.Column("purged", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("topic_id", name=op.f("pk_deleted_topics")),
    )
    op.create_table(
        "retention_cursors",
        sa.Column("topic_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("partition", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("counted_to", sa.BigInteger(), nullable=False),
        sa.Column("counted_bytes", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("topic_id", "partition", name=op.f("pk_retention_cursors")),
    )
    op.create_table(
        "half_checks",
        sa.Column("message_id", sa.String(length=64), nullable=False),
        sa.Column("slot", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("at_ms", sa.BigInteger(), nullable=False),
        sa.Column("instance_id", sa.String(length=255), nullable=True),
        sa.Column("answer", sa.String(length=16), nullable=True),
        sa.Column("latency_ms", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint("message_id", "slot", name=op.f("pk_half_checks")),
    )
    op.create_table(
        "job_rounds",
        sa.Column("job", sa.String(length=64), nullable=False),
        sa.Column("holder", sa.String(length=128), nullable=False),
        sa.Column("finished_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("job", name=op.f("pk_job_rounds")),
    )


def downgrade() -> None:
    op.drop_table("job_rounds")
    op.drop_table("half_checks")
    op.drop_table("retention_cursors")
    op.drop_table("deleted_topics")
    op.drop_table("topic_configs")
