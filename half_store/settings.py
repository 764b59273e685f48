"""Broker settings: ``HALFMQ_*`` environment variables, overridden by CLI flags."""

from __future__ import annotations

from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="HALFMQ_", extra="ignore")

    database_url: str = "sqlite:///./halfmq.db"
    # FULL: an acknowledged write survives power loss; NORMAL: only a process crash.
    sqlite_synchronous: Literal["FULL", "NORMAL"] = "FULL"
    migrate_on_start: bool = True
    # Database reads run on worker threads; None: 1 on SQLite, 4 on PostgreSQL (see half_store/storage/store.py).
    read_threads: int | None = Field(None, ge=1)
    # Names this cluster (the brokers on one database) to replicators: they stamp copied messages
    # with their origin cluster and never copy a message back to the cluster it came from.
    cluster_name: str = Field("local", pattern=r"^[A-Za-z0-9._-]{1,64}$")
    host: str = "127.0.0.1"
    port: int = Field(8080, ge=0, le=65535)

    # Mode 1 (RocketMQ names in brackets).
    transaction_timeout_seconds: float = Field(6.0, ge=0)  # transactionTimeOut
    check_interval_seconds: float = Field(30.0, gt=0)  # transactionCheckInterval
    check_max: int = Field(15, ge=1)  # transactionCheckMax
    check_timeout_seconds: float = Field(3.0, gt=0)
    check_concurrency: int = Field(64, ge=1)
    poll_check_lease_seconds: float = Field(30.0, gt=0)
    resolved_retention_seconds: float = Field(3600.0, ge=0)

    # Mode 2.
    max_transaction_timeout_ms: int = Field(900_000, ge=1)
    default_transaction_timeout_ms: int = Field(60_000, ge=1)
    transactional_id_expiration_ms: int = Field(7 * 24 * 3600 * 1000, ge=1)

    # Limits that protect the broker.
    max_message_bytes: int = Field(4 * 1024 * 1024, ge=1)
    max_request_bytes: int = Field(64 * 1024 * 1024, ge=1)
    max_batch_messages: int = Field(10_000, ge=1)
    max_fetch_messages: int = Field(10_000, ge=1)
    max_fetch_wait_ms: int = Field(30_000, ge=0)
    max_long_poll_waiters: int = Field(1_000, ge=1)
    max_header_count: int = Field(64, ge=0)
    max_header_bytes: int = Field(16 * 1024, ge=0)

    # Leadership of the background jobs across broker processes.
    # None: three check intervals, between 2 and 15 seconds.
    lease_seconds: float | None = Field(None, gt=0)
    run_checker: bool = True

    log_level: str = "info"
    # Run the services and the database writer in a process of their own behind the HTTP one
    # (see app/core); false keeps everything in one process.
    core_process: bool = True

    @property
    def checker_lease_seconds(self) -> float:
        """How long the checker lease lasts: how soon another process takes over when its holder dies."""
        if self.lease_seconds is not None:
            return self.lease_seconds
        return max(2.0, min(15.0, 3 * self.check_interval_seconds))
