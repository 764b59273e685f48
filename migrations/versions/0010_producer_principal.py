"""producers remember the principal that obtained them (a producer id is usable only by it and the admin)

Revision ID: 0010_producer_principal
Revises: 0009_aborted_transaction_index
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010_producer_principal"
down_revision = "0009_aborted_transaction_index"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("producers") as batch:
        batch.add_column(sa.Column("principal", sa.String(128), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("producers") as batch:
        batch.drop_column("principal")
