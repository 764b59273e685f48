"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-21 09:03:21.122093
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('group_offsets',
    sa.Column('group_id', sa.String(length=255), nullable=False),
    sa.Column('topic_id', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('partition', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('offset', sa.BigInteger(), nullable=False),
    sa.Column('metadata', sa.Text(), nullable=True),
    sa.Column('updated_at', sa.BigInteger(), nullable=False),
    sa.PrimaryKeyConstraint('group_id', 'topic_id', 'partition', name=op.f('pk_group_offsets'))
    )
    op.create_table('half_messages',
    sa.Column('message_id', sa.String(length=64), nullable=False),
    sa.Column('half_offset', sa.BigInteger(), nullable=False),
    sa.Column('producer_group', sa.String(length=255), nullable=False),
    sa.Column('transaction_id', sa.String(length=255), nullable=False),
    sa.Column('topic_id', sa.Integer(), nullable=False),
    sa.Column('partition', sa.Integer(), nullable=False),
    sa.Column('born_timestamp', sa.BigInteger(), nullable=False),
    sa.Column('check_immunity_ms', sa.BigInteger(), nullable=False),
    sa.Column('check_times', sa.Integer(), nullable=False),
    sa.Column('next_check_at', sa.BigInteger(), nullable=True),
    sa.PrimaryKeyConstraint('message_id', name=op.f('pk_half_messages')),
    sa.UniqueConstraint('half_offset', name=op.f('uq_half_messages_half_offset')),
    sa.UniqueConstraint('producer_group', 'transaction_id', name=op.f('uq_half_messages_producer_group_transaction_id'))
    )
    with op.batch_alter_table('half_messages', schema=None) as batch_op:
        batch_op.create_index('ix_half_messages_next_check_at', ['next_check_at'], unique=False)

    op.create_table('half_resolutions',
    sa.Column('message_id', sa.String(length=64), nullable=False),
    sa.Column('outcome', sa.String(length=16), nullable=False),
    sa.Column('topic_id', sa.Integer(), nullable=True),
    sa.Column('partition', sa.Integer(), nullable=True),
    sa.Column('offset', sa.BigInteger(), nullable=True),
    sa.Column('op_offset', sa.BigInteger(), nullable=False),
    sa.Column('resolved_by', sa.String(length=16), nullable=False),
    sa.Column('resolved_at', sa.BigInteger(), nullable=False),
    sa.PrimaryKeyConstraint('message_id', name=op.f('pk_half_resolutions'))
    )
    with op.batch_alter_table('half_resolutions', schema=None) as batch_op:
        batch_op.create_index('ix_half_resolutions_resolved_at', ['resolved_at'], unique=False)

    op.create_table('leases',
    sa.Column('name', sa.String(length=64), nullable=False),
    sa.Column('holder', sa.String(length=128), nullable=False),
    sa.Column('expires_at', sa.BigInteger(), nullable=False),
    sa.PrimaryKeyConstraint('name', name=op.f('pk_leases'))
    )
    op.create_table('messages',
    sa.Column('topic_id', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('partition', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('offset', sa.BigInteger(), autoincrement=False, nullable=False),
    sa.Column('key', sa.Text(), nullable=True),
    sa.Column('value', sa.LargeBinary(), nullable=False),
    sa.Column('value_kind', sa.SmallInteger(), nullable=False),
    sa.Column('headers', sa.Text(), nullable=True),
    sa.Column('timestamp', sa.BigInteger(), nullable=False),
    sa.Column('producer_id', sa.BigInteger(), nullable=True),
    sa.Column('producer_epoch', sa.Integer(), nullable=True),
    sa.Column('sequence', sa.Integer(), nullable=True),
    sa.Column('txn_id', sa.String(length=64), nullable=True),
    sa.Column('control', sa.SmallInteger(), nullable=False),
    sa.Column('properties', sa.Text(), nullable=True),
    sa.PrimaryKeyConstraint('topic_id', 'partition', 'offset', name=op.f('pk_messages'))
    )
    with op.batch_alter_table('messages', schema=None) as batch_op:
        batch_op.create_index('ix_messages_producer_sequence', ['topic_id', 'partition', 'producer_id', 'sequence'], unique=False, sqlite_where=sa.text('producer_id IS NOT NULL'), postgresql_where=sa.text('producer_id IS NOT NULL'))

    op.create_table('producer_listeners',
    sa.Column('producer_group', sa.String(length=255), nullable=False),
    sa.Column('instance_id', sa.String(length=255), nullable=False),
    sa.Column('callback_url', sa.Text(), nullable=True),
    sa.Column('secret', sa.Text(), nullable=True),
    sa.Column('ttl_seconds', sa.Integer(), nullable=False),
    sa.Column('heartbeat_at', sa.BigInteger(), nullable=False),
    sa.PrimaryKeyConstraint('producer_group', 'instance_id', name=op.f('pk_producer_listeners'))
    )
    op.create_table('producer_sequences',
    sa.Column('producer_id', sa.BigInteger(), autoincrement=False, nullable=False),
    sa.Column('topic_id', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('partition', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('epoch', sa.Integer(), nullable=False),
    sa.Column('last_sequence', sa.Integer(), nullable=False),
    sa.PrimaryKeyConstraint('producer_id', 'topic_id', 'partition', name=op.f('pk_producer_sequences'))
    )
    op.create_table('producers',
    sa.Column('producer_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('transactional_id', sa.String(length=255), nullable=True),
    sa.Column('epoch', sa.Integer(), nullable=False),
    sa.Column('transaction_timeout_ms', sa.Integer(), nullable=True),
    sa.Column('created_at', sa.BigInteger(), nullable=False),
    sa.Column('last_used_at', sa.BigInteger(), nullable=False),
    sa.PrimaryKeyConstraint('producer_id', name=op.f('pk_producers')),
    sa.UniqueConstraint('transactional_id', name=op.f('uq_producers_transactional_id'))
    )
    op.create_table('topics',
    sa.Column('topic_id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('name', sa.String(length=249), nullable=False),
    sa.Column('partitions', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.BigInteger(), nullable=False),
    sa.PrimaryKeyConstraint('topic_id', name=op.f('pk_topics')),
    sa.UniqueConstraint('name', name=op.f('uq_topics_name'))
    )
    op.create_table('transaction_offsets',
    sa.Column('txn_id', sa.String(length=64), nullable=False),
    sa.Column('group_id', sa.String(length=255), nullable=False),
    sa.Column('topic_id', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('partition', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('offset', sa.BigInteger(), nullable=False),
    sa.Column('metadata', sa.Text(), nullable=True),
    sa.PrimaryKeyConstraint('txn_id', 'group_id', 'topic_id', 'partition', name=op.f('pk_transaction_offsets'))
    )
    op.create_table('transaction_partitions',
    sa.Column('txn_id', sa.String(length=64), nullable=False),
    sa.Column('topic_id', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('partition', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('first_offset', sa.BigInteger(), nullable=False),
    sa.Column('marker_offset', sa.BigInteger(), nullable=True),
    sa.Column('aborted', sa.Boolean(), nullable=False),
    sa.PrimaryKeyConstraint('txn_id', 'topic_id', 'partition', name=op.f('pk_transaction_partitions'))
    )
    with op.batch_alter_table('transaction_partitions', schema=None) as batch_op:
        batch_op.create_index('ix_transaction_partitions_topic_id_partition_first_offset', ['topic_id', 'partition', 'first_offset'], unique=False)

    op.create_table('transactions',
    sa.Column('txn_id', sa.String(length=64), nullable=False),
    sa.Column('producer_id', sa.BigInteger(), nullable=True),
    sa.Column('producer_epoch', sa.Integer(), nullable=True),
    sa.Column('state', sa.String(length=16), nullable=False),
    sa.Column('timeout_ms', sa.Integer(), nullable=False),
    sa.Column('timed_out', sa.Boolean(), nullable=False),
    sa.Column('started_at', sa.BigInteger(), nullable=False),
    sa.Column('expires_at', sa.BigInteger(), nullable=False),
    sa.Column('updated_at', sa.BigInteger(), nullable=False),
    sa.PrimaryKeyConstraint('txn_id', name=op.f('pk_transactions'))
    )
    with op.batch_alter_table('transactions', schema=None) as batch_op:
        batch_op.create_index('ix_transactions_producer_id', ['producer_id'], unique=False)
        batch_op.create_index('ix_transactions_state_expires_at', ['state', 'expires_at'], unique=False)

    op.create_table('partitions',
    sa.Column('topic_id', sa.Integer(), nullable=False),
    sa.Column('partition', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('next_offset', sa.BigInteger(), nullable=False),
    sa.Column('log_start_offset', sa.BigInteger(), nullable=False),
    sa.ForeignKeyConstraint(['topic_id'], ['topics.topic_id'], name=op.f('fk_partitions_topic_id_topics')),
    sa.PrimaryKeyConstraint('topic_id', 'partition', name=op.f('pk_partitions'))
    )


def downgrade() -> None:
    op.drop_table('partitions')
    with op.batch_alter_table('transactions', schema=None) as batch_op:
        batch_op.drop_index('ix_transactions_state_expires_at')
        batch_op.drop_index('ix_transactions_producer_id')

    op.drop_table('transactions')
    with op.batch_alter_table('transaction_partitions', schema=None) as batch_op:
        batch_op.drop_index('ix_transaction_partitions_topic_id_partition_first_offset')

    op.drop_table('transaction_partitions')
    op.drop_table('transaction_offsets')
    op.drop_table('topics')
    op.drop_table('producers')
    op.drop_table('producer_sequences')
    op.drop_table('producer_listeners')
    with op.batch_alter_table('messages', schema=None) as batch_op:
        batch_op.drop_index('ix_messages_producer_sequence', sqlite_where=sa.text('producer_id IS NOT NULL'), postgresql_where=sa.text('producer_id IS NOT NULL'))

    op.drop_table('messages')
    op.drop_table('leases')
    with op.batch_alter_table('half_resolutions', schema=None) as batch_op:
        batch_op.drop_index('ix_half_resolutions_resolved_at')

    op.drop_table('half_resolutions')
    with op.batch_alter_table('half_messages', schema=None) as batch_op:
        batch_op.drop_index('ix_half_messages_next_check_at')

    op.drop_table('half_messages')
    op.drop_table('group_offsets')
