"""Broker settings: ``HALFMQ_*`` environment variables, overridden by CLI flags."""

from __future__ import annotations

import ipaddress
from typing import Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_CALLBACK_NETWORKS = "127.0.0.0/8,::1/128,10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,fc00::/7"


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
    # RocketMQ 5's gRPC protocol (app/rocketmq, docs/rocketmq.md) on host:grpc_port; 0 turns it off.
    grpc_port: int = Field(8081, ge=0, le=65535)
    # The host:port QueryRoute answers (default 127.0.0.1:<grpc_port>): clients send everything after the route there.
    grpc_advertised_address: str | None = Field(None, pattern=r"^[^:\s]+:[0-9]{1,5}$")
    # How long a RocketMQ client session (Telemetry stream, heartbeats) lives without a heartbeat.
    grpc_session_timeout_seconds: float = Field(30.0, gt=0)
    # How often the gRPC listener asks the checker for due back-checks of its connected producers' topics.
    grpc_check_poll_seconds: float = Field(1.0, gt=0)

    # Mode 1 (RocketMQ names in brackets).
    transaction_timeout_seconds: float = Field(6.0, ge=0)  # transactionTimeOut
    check_interval_seconds: float = Field(30.0, gt=0)  # transactionCheckInterval
    check_max: int = Field(15, ge=1)  # transactionCheckMax
    check_timeout_seconds: float = Field(3.0, gt=0)
    check_concurrency: int = Field(64, ge=1)
    poll_check_lease_seconds: float = Field(30.0, gt=0)
    resolved_retention_seconds: float = Field(3600.0, ge=0)

    # Delay messages (docs/api.md, "Delay messages"): the longest delay a message may ask for
    # (RocketMQ's timerMaxDelaySec: 3 days), and how often the lease holder moves due ones.
    max_delay_seconds: float = Field(3 * 24 * 3600.0, gt=0)
    delay_interval_seconds: float = Field(0.25, gt=0)

    # Mode 2.
    max_transaction_timeout_ms: int = Field(900_000, ge=1)
    default_transaction_timeout_ms: int = Field(60_000, ge=1)
    transactional_id_expiration_ms: int = Field(7 * 24 * 3600 * 1000, ge=1)

    # Retention of user topics: a topic's own retention_ms / retention_bytes, else these
    # (None: keep forever). Applied every retention_interval_seconds by the lease holder.
    retention_ms: int | None = Field(None, ge=0)
    retention_bytes: int | None = Field(None, ge=0)
    retention_interval_seconds: float = Field(10.0, gt=0)
    # Consumer groups with members (KIP-848). A join's session timeout must lie in this range
    # (Kafka's group.min/max.session.timeout.ms); members heartbeat at most this far apart.
    group_min_session_timeout_ms: int = Field(6_000, ge=1)
    group_max_session_timeout_ms: int = Field(300_000, ge=1)
    group_default_session_timeout_ms: int = Field(30_000, ge=1)
    group_heartbeat_interval_ms: int = Field(3_000, ge=1)
    # How often the checker removes members whose session expired (they are also removed
    # when anyone of their group joins, heartbeats or leaves).
    group_expiry_interval_seconds: float = Field(1.0, gt=0)
    # Share groups (queue consumption, see docs/share-groups.md).
    share_max_deliveries: int = Field(5, ge=1)  # deliveries without ACCEPT before the dead-letter topic
    # Signs receipts. Unset: one is generated and kept in the database, shared by every broker process on it.
    share_receipt_secret: str | None = Field(None, min_length=16)
    share_min_lock_ms: int = Field(100, ge=1)
    share_max_lock_ms: int = Field(12 * 3600 * 1000, ge=1)  # also the longest RELEASE delay
    share_max_messages: int = Field(1_000, ge=1)  # per receive
    # Records in flight (locked, released, or held back by order) per share partition before a
    # receive stops reading further into the log (KIP-932's record-lock limit).
    share_max_in_flight: int = Field(5_000, ge=1)

    # Limits that protect the broker.
    max_message_bytes: int = Field(4 * 1024 * 1024, ge=1)
    max_request_bytes: int = Field(64 * 1024 * 1024, ge=1)
    max_batch_messages: int = Field(10_000, ge=1)
    max_fetch_messages: int = Field(10_000, ge=1)
    max_fetch_wait_ms: int = Field(30_000, ge=0)
    max_long_poll_waiters: int = Field(1_000, ge=1)
    # Of those, how many one principal may hold in a front process (None: a quarter of them).
    max_long_poll_waiters_per_principal: int | None = Field(None, ge=1)
    max_header_count: int = Field(64, ge=0)
    max_header_bytes: int = Field(16 * 1024, ge=0)
    # A request body must have arrived whole this long after its first byte was asked for
    # (slow-body attacks hold a connection and its buffer otherwise); else 408.
    body_timeout_seconds: float = Field(30.0, gt=0)
    # Answers at least this long are gzipped for a client that sends Accept-Encoding: gzip
    # (a 1,000-message fetch: 115 KB of JSON); shorter ones, such as a produce's, go as they
    # are, so the hot path pays nothing. 0 turns compression off.
    gzip_min_bytes: int = Field(1024, ge=0)
    # Proxies whose X-Forwarded-For / X-Forwarded-Proto the access log and client addresses
    # trust (comma-separated addresses or CIDRs, "*" for all). Empty: none, the peer is the client.
    forwarded_allow_ips: str = ""

    # Leadership of the background jobs across broker processes.
    # None: three check intervals, between 2 and 15 seconds.
    lease_seconds: float | None = Field(None, gt=0)
    run_checker: bool = True

    # Authentication (docs/security.md). none: every request is anonymous and allowed.
    auth: Literal["none", "token"] = "none"
    # The bootstrap superuser's bearer token; required with auth=token.
    admin_token: SecretStr | None = None
    # How often the HTTP front asks whether tokens or ACLs changed (a revocation is refused
    # everywhere within this plus a round trip), and how long it may go on serving a
    # snapshot it could not refresh before it refuses every request instead.
    auth_refresh_seconds: float = Field(1.0, gt=0, le=2.0)
    auth_max_staleness_seconds: float = Field(4.0, gt=0, le=4.5)
    # Where back-check callbacks may go: every address a callback host resolves to must lie
    # in one of these networks (comma-separated CIDRs). Link-local, unspecified, multicast
    # and reserved addresses are refused whatever this says.
    callback_allowed_networks: str = DEFAULT_CALLBACK_NETWORKS
    # TLS for the HTTP listener (both, or neither).
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None

    # The Kafka listener (docs/kafka.md): 0 turns it off. The advertised address is the
    # host:port that Metadata and FindCoordinator hand to clients (default 127.0.0.1:<port>).
    kafka_port: int = Field(9092, ge=0, le=65535)
    kafka_advertised_address: str | None = Field(None, pattern=r"^\[?[A-Za-z0-9.:_-]+\]?:[0-9]{1,5}$")
    # Kafka's auto.create.topics.enable and num.partitions.
    kafka_auto_create_topics: bool = False
    kafka_default_partitions: int = Field(1, ge=1)
    # Every broker process on the database heartbeats its row in the broker registry this often;
    # a row not renewed for broker_expiry_seconds is a dead process, left out of Kafka's Metadata
    # and FindCoordinator and RocketMQ's QueryRoute (its clients then move to the live ones).
    broker_heartbeat_seconds: float = Field(3.0, gt=0)
    broker_expiry_seconds: float = Field(10.0, gt=0)

    log_level: str = "info"
    # One JSON line per HTTP request on stdout (method, path, route, status, duration, client).
    access_log: bool = False
    # Run the services and the database writer in a process of their own behind the HTTP one
    # (see app/core); false keeps everything in one process.
    core_process: bool = True
    # HTTP front processes sharing the one core process and the port (app/fronts.py): the
    # front is where a request's CPU goes, the core's state is one. Only with core_process.
    workers: int = Field(1, ge=1, le=64)
    # Serve plain routes without FastAPI's per-request routing and dependency solving
    # (app/api/direct_routes.py): the same answers, about half the front's work per request.
    direct_routes: bool = True
    # Every this many seconds each broker process hands freed memory back to the system
    # (malloc_trim, app/memory.py), so its RSS follows its load instead of its peak; between
    # trims, large freed buffers are reused instead of faulted in again; 0: never (glibc's defaults).
    memory_trim_seconds: float = Field(5.0, ge=0)

    @property
    def checker_lease_seconds(self) -> float:
        """How long the checker lease lasts: how soon another process takes over when its holder dies."""
        if self.lease_seconds is not None:
            return self.lease_seconds
        return max(2.0, min(15.0, 3 * self.check_interval_seconds))

    @field_validator("callback_allowed_networks")
    @classmethod
    def _networks_parse(cls, value: str) -> str:
        for part in value.split(","):
            if part.strip():
                ipaddress.ip_network(part.strip(), strict=False)  # ValueError names the bad one
        return value

    @property
    def callback_networks(self) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
        parts = [part.strip() for part in self.callback_allowed_networks.split(",")]
        return tuple(ipaddress.ip_network(part, strict=False) for part in parts if part)

    def startup_problem(self) -> str | None:
        """Why a broker with these settings must not start, if it must not."""
        if self.auth == "token" and (self.admin_token is None or not self.admin_token.get_secret_value()):
            return "HALFMQ_AUTH=token needs HALFMQ_ADMIN_TOKEN (the bootstrap superuser's token)"
        if (self.ssl_certfile is None) != (self.ssl_keyfile is None):
            return "TLS needs both HALFMQ_SSL_CERTFILE and HALFMQ_SSL_KEYFILE"
        if self.broker_expiry_seconds <= self.broker_heartbeat_seconds:
            return "HALFMQ_BROKER_EXPIRY_SECONDS must exceed HALFMQ_BROKER_HEARTBEAT_SECONDS (a live process would expire)"
        return None
