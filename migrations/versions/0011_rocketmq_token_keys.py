"""RocketMQ secret keys of tokens (HMAC-SHA256 of the token, derived when it is created)

Revision ID: 0011_rocketmq_token_keys
Revises: 0010_producer_principal
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011_rocketmq_token_keys"
down_revision = "0010_producer_principal"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Tokens made before have none: they cannot sign RocketMQ calls (the token itself is not stored).
    with op.batch_alter_table("auth_tokens") as batch:
        batch.add_column(sa.Column("rocketmq_secret", sa.String(64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("auth_tokens") as batch:
        batch.drop_column("rocketmq_secret")
