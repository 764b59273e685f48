"""consumer groups with members: groups, members, partition ownership; who staged transactional offsets

Revision ID: 0003_groups
Revises: 0002
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003_groups"
down_revision = "0006_admin"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "consumer_groups",
        sa.Column("group_id", sa.String(length=255), nullable=False),
        sa.Column("group_epoch", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("group_id", name=op.f("pk_consumer_groups")),
    )
    op.create_table(
        "group_members",
        sa.Column("group_id", sa.String(length=255), nullable=False),
        sa.Column("member_id", sa.String(length=64), nullable=False),
        sa.Column("member_epoch", sa.Integer(), nullable=False),
        sa.Column("topics", sa.Text(), nullable=False),
        sa.Column("session_timeout_ms", sa.Integer(), nullable=False),
        sa.Column("joined_at", sa.BigInteger(), nullable=False),
        sa.Column("last_heartbeat_at", sa.BigInteger(), nullable=False),
        sa.Column("expires_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("group_id", "member_id", name=op.f("pk_group_members")),
    )
    op.create_index("ix_group_members_expires_at", "group_members", ["expires_at"], unique=False)
    op.create_table(
        "group_partitions",
        sa.Column("group_id", sa.String(length=255), nullable=False),
        sa.Column("topic_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("partition", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("owner_member_id", sa.String(length=64), nullable=True),
        sa.Column("granted_epoch", sa.Integer(), nullable=True),
        sa.Column("target_member_id", sa.String(length=64), nullable=True),
        sa.PrimaryKeyConstraint("group_id", "topic_id", "partition", name=op.f("pk_group_partitions")),
    )
    with op.batch_alter_table("transaction_offsets") as batch_op:
        batch_op.add_column(sa.Column("member_id", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("member_epoch", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("transaction_offsets") as batch_op:
        batch_op.drop_column("member_epoch")
        batch_op.drop_column("member_id")
    op.drop_table("group_partitions")
    op.drop_index("ix_group_members_expires_at", table_name="group_members")
    op.drop_table("group_members")
    op.drop_table("consumer_groups")
