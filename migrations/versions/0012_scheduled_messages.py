"""delay messages: the index over RMQ_SYS_SCHEDULE_TOPIC

Revision ID: 0012_scheduled_messages
Revises: 0011_rocketmq_token_keys
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012_scheduled_messages"
down_revision = "0011_rocketmq_token_keys"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "scheduled_messages",
        sa.Column("message_id", sa.String(64), nullable=False),
        sa.Column("schedule_offset", sa.BigInteger, nullable=False),
        sa.Column("topic_id", sa.Integer, nullable=False),
        sa.Column("partition", sa.Integer, nullable=False),
        sa.Column("deliver_at", sa.BigInteger, nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("delivered_at", sa.BigInteger, nullable=True),
        sa.Column("delivered_offset", sa.BigInteger, nullable=True),
        sa.PrimaryKeyConstraint("message_id", name=op.f("pk_scheduled_messages")),
        sa.UniqueConstraint("schedule_offset", name=op.f("uq_scheduled_messages_schedule_offset")),
    )
    op.create_index("ix_scheduled_messages_waiting", "scheduled_messages", ["deliver_at", "delivered_at"])


def downgrade() -> None:
    op.drop_index("ix_scheduled_messages_waiting", table_name="scheduled_messages")
    op.drop_table("scheduled_messages")
