"""one registry of broker processes for every front (kafka and grpc addresses), replacing rocketmq_listeners

Revision ID: 0014_brokers
Revises: 0013_rocketmq_listeners
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014_brokers"
down_revision = "0013_rocketmq_listeners"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "brokers",
        sa.Column("instance_id", sa.String(128), nullable=False),
        sa.Column("kafka_node_id", sa.Integer, nullable=True),
        sa.Column("kafka_address", sa.String(255), nullable=True),
        sa.Column("grpc_address", sa.String(255), nullable=True),
        sa.Column("rocketmq_sessions", sa.Text, nullable=False),
        sa.Column("started_at", sa.BigInteger, nullable=False),
        sa.Column("heartbeat_at", sa.BigInteger, nullable=False),
        sa.Column("expires_at", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("instance_id", name=op.f("pk_brokers")),
    )
    # Rows of live processes only, each rewritten every few seconds: nothing worth carrying over.
    op.drop_table("rocketmq_listeners")


def downgrade() -> None:
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
    op.drop_table("brokers")
