"""principals, tokens (hashed), ACLs and the access version counter

Revision ID: 0005_auth
Revises: 0002
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005_auth"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "principals",
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_principals")),
    )
    op.create_table(
        "auth_tokens",
        sa.Column("token_id", sa.String(length=16), nullable=False),
        sa.Column("principal", sa.String(length=128), nullable=False),
        sa.Column("secret_hash", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["principal"], ["principals.name"], name=op.f("fk_auth_tokens_principal_principals")),
        sa.PrimaryKeyConstraint("token_id", name=op.f("pk_auth_tokens")),
    )
    op.create_index("ix_auth_tokens_principal", "auth_tokens", ["principal"], unique=False)
    op.create_table(
        "acls",
        sa.Column("acl_id", sa.String(length=32), nullable=False),
        sa.Column("principal", sa.String(length=128), nullable=False),
        sa.Column("resource_type", sa.String(length=32), nullable=False),
        sa.Column("pattern", sa.String(length=255), nullable=False),
        sa.Column("pattern_type", sa.String(length=16), nullable=False),
        sa.Column("operations", sa.String(length=64), nullable=False),
        sa.Column("permission", sa.String(length=8), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("acl_id", name=op.f("pk_acls")),
        sa.UniqueConstraint(
            "principal", "resource_type", "pattern", "pattern_type", "operations", "permission", name="uq_acls_rule"
        ),
    )
    op.create_table(
        "auth_version",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_auth_version")),
    )
    op.execute("INSERT INTO auth_version (id, version) VALUES (1, 0)")


def downgrade() -> None:
    op.drop_table("auth_version")
    op.drop_table("acls")
    op.drop_index("ix_auth_tokens_principal", table_name="auth_tokens")
    op.drop_table("auth_tokens")
    op.drop_table("principals")
