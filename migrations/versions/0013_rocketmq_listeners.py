"""the RocketMQ listeners of the broker processes, with their client sessions

Revision ID: 0013_rocketmq_listeners
Revises: 0012_scheduled_messages
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013_rocketmq_listeners"
down_revision = "0012_scheduled_messages"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "rocketmq_listeners",
        sa.Column("instance_id", sa.String(128), nullable=False),
        sa.Column("advertised_address", sa.String(255), nullable=False),
        sa.Column("sessions", sa.Text, nullable=False),
        sa.Column("started_at", sa.BigInteger, nullable=False),
        sa.Column("heartbeat_at", sa.BigInteger, nullable=False),
        sa.Column("expires_at", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("instance_id", name=op.f("pk_rocketmq_listeners")),
    )


def downgrade() -> None:
    op.drop_table("rocketmq_listeners")
