"""The ``halfmq`` source's options, parsed once into a frozen, picklable record.

===========================  ===========  =====================================================
option                       default      meaning
===========================  ===========  =====================================================
``url``                      (required)   broker base URL, e.g. ``http://broker:8080``
``topic``                    (required)   a topic or comma list (aliases ``topics``, ``subscribe``)
``startingOffsets``          earliest     ``earliest``, ``latest`` (= last stable offset) or
                                          JSON ``{"t": {"0": 42}}`` (-2 earliest, -1 latest)
``endingOffsets``            latest       batch only: ``latest`` or JSON; never past the last
                                          stable offset
``group``                    none         report read progress as this group's offsets (for
                                          lag monitoring; Spark's checkpoint stays the truth)
``maxRecordsPerTrigger``     none         streaming: at most this many offsets per micro-batch
                                          (``maxOffsetsPerTrigger`` is an alias)
``minPartitions``            none         split offset ranges until there are this many tasks
``fetchMaxMessages``         5000         messages per HTTP fetch (the broker allows 10000)
``requestTimeoutSeconds``    30           HTTP timeout per request
``requestRetries``           8            retries on transport errors, 429 and 5xx (the SDK's
                                          policy; backoff 0.2 s doubling to 5 s: about 20 s)
``failOnDataLoss``           true         fail when wanted offsets are below the log start
``token``                    none         bearer token of a principal with topic:read (and
                                          group:read with ``group``), for ``HALFMQ_AUTH=token``
``sslVerify``                true         ``false`` skips TLS certificate checks, or the path
                                          of a CA bundle to trust
``tag``                      none         a tag filter (``*``, ``TagA``, ``TagA || TagB``): only
                                          rows whose tag (header ``rocketmq.tag``) it keeps
===========================  ===========  =====================================================
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from spark_ingest.client import MAX_FETCH_MESSAGES, BrokerClient
from spark_ingest.offsets import OffsetSpec, OptionError, parse_offset_spec, parse_topics


@dataclass(frozen=True)
class SourceOptions:
    """Everything a reader needs, parsed and validated; safe to ship to executors."""

    url: str
    topics: tuple[str, ...]
    starting: OffsetSpec
    ending: OffsetSpec
    group: str | None = None
    max_records_per_trigger: int | None = None
    min_partitions: int | None = None
    fetch_max_messages: int = 5000
    request_timeout_seconds: float = 30.0
    request_retries: int = 8
    fail_on_data_loss: bool = True
    token: str | None = field(default=None, repr=False)  # a secret: kept out of logs and plans
    ssl_verify: bool | str = True
    tag: str | None = None

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SourceOptions:
        """Parse Spark's (case-insensitive) option map; raises :class:`OptionError`."""
        lowered = {str(k).lower(): str(v) for k, v in options.items()}
        url = lowered.get("url", "").strip()
        if not url:
            raise OptionError("option 'url' is required: the broker's base URL, e.g. http://127.0.0.1:8080")
        topics = parse_topics(lowered.get("topic") or lowered.get("topics") or lowered.get("subscribe"))
        return cls(
            url=url.rstrip("/"),
            topics=topics,
            starting=parse_offset_spec(
                lowered.get("startingoffsets"), option="startingOffsets", default="earliest", topics=topics
            ),
            ending=parse_offset_spec(
                lowered.get("endingoffsets"), option="endingOffsets", default="latest", topics=topics
            ),
            group=(lowered.get("group") or "").strip() or None,
            max_records_per_trigger=_positive(
                lowered.get("maxrecordspertrigger") or lowered.get("maxoffsetspertrigger"), "maxRecordsPerTrigger"
            ),
            min_partitions=_positive(lowered.get("minpartitions"), "minPartitions"),
            fetch_max_messages=min(
                _positive(lowered.get("fetchmaxmessages"), "fetchMaxMessages") or 5000, MAX_FETCH_MESSAGES
            ),
            request_timeout_seconds=float(lowered.get("requesttimeoutseconds", "30")),
            request_retries=int(lowered.get("requestretries", "8")),
            fail_on_data_loss=_boolean(lowered.get("failondataloss", "true"), "failOnDataLoss"),
            token=(lowered.get("token") or "").strip() or None,
            ssl_verify=_verify(lowered.get("sslverify")),
            tag=(lowered.get("tag") or "").strip() or None,
        )

    def client(self) -> BrokerClient:
        """A client for this source's broker, with its token and TLS settings."""
        return BrokerClient(
            self.url,
            timeout=self.request_timeout_seconds,
            retries=self.request_retries,
            token=self.token,
            verify=self.ssl_verify,
        )


def _positive(text: str | None, option: str) -> int | None:
    if text is None or text.strip() == "":
        return None
    try:
        value = int(text)
    except ValueError as exc:
        raise OptionError(f"option {option!r} must be a positive integer, got {text!r}") from exc
    if value <= 0:
        raise OptionError(f"option {option!r} must be a positive integer, got {text!r}")
    return value


def _verify(text: str | None) -> bool | str:
    """``sslVerify``: true (default), false, or the path of a CA bundle."""
    if text is None or text.strip().lower() in {"", "true", "1", "yes"}:
        return True
    if text.strip().lower() in {"false", "0", "no"}:
        return False
    return text.strip()


def _boolean(text: str, option: str) -> bool:
    lowered = text.strip().lower()
    if lowered in {"true", "1", "yes"}:
        return True
    if lowered in {"false", "0", "no"}:
        return False
    raise OptionError(f"option {option!r} must be true or false, got {text!r}")
