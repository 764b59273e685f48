"""record batches: a produce request's records to one partition stored as one messages row

Revision ID: 0007_record_batches
Revises: 0004_share
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from half_store.domain.constants import VALUE_BATCH
from half_store.storage import record_batch

revision = "0007_record_batches"
down_revision = "0004_share"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Rows written before this revision are single records: a count of 1 describes them.
    with op.batch_alter_table("messages") as batch:
        batch.add_column(sa.Column("record_count", sa.Integer(), nullable=False, server_default="1"))


def downgrade() -> None:
    """Split every stored batch back into one row per record, which is all the older schema can read."""
    messages = sa.table(
        "messages",
        *(
            sa.column(name)
            for name in (
                "topic_id", "partition", "offset", "key", "value", "value_kind", "headers", "timestamp",
                "producer_id", "producer_epoch", "sequence", "txn_id", "control", "properties", "record_count",
            )
        ),
    )
    conn = op.get_bind()
    batches = conn.execute(sa.select(messages).where(messages.c.value_kind == VALUE_BATCH)).mappings().all()
    for batch_row in batches:
        rows = []
        for index, record in enumerate(record_batch.decode(batch_row["value"])):
            sequence = batch_row["sequence"]
            rows.append(
                {
                    **batch_row,
                    "offset": batch_row["offset"] + index,
                    "key": record.key,
                    "value": record.value,
                    "value_kind": record.value_kind,
                    "headers": record.headers,
                    "timestamp": record.timestamp,
                    "sequence": None if sequence is None else sequence + index,
                    "properties": record.properties,
                    "record_count": 1,
                }
            )
        conn.execute(
            messages.delete().where(
                messages.c.topic_id == batch_row["topic_id"],
                messages.c.partition == batch_row["partition"],
                messages.c.offset == batch_row["offset"],
            )
        )
        conn.execute(messages.insert(), rows)
    with op.batch_alter_table("messages") as batch:
        batch.drop_column("record_count")
