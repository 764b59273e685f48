"""Who signed a RocketMQ call: RocketMQ 5's ``MQv2-HMAC-SHA1`` signature, over halfmq's tokens.

``authorization: MQv2-HMAC-SHA1 Credential=<access key>, SignedHeaders=x-mq-date-time, Signature=<hex>``:
the hex HMAC-SHA1, keyed with the secret key, of the ``x-mq-date-time`` header
(``yyyyMMdd'T'HHmmss'Z'``). The access key is a token's id and the secret key is derived from
the token (:func:`half_store.domain.access.rocketmq_secret_key`, answered when the token is
made), so a principal's tokens, revocations and ACLs hold over RocketMQ as over REST. The
admin token signs as access key ``admin``.

With ``HALFMQ_AUTH=none`` every call is anonymous and nothing is checked. With ``token`` an
unsigned call, an unknown access key, a wrong signature or a date more than
:data:`MAX_CLOCK_SKEW` away is refused with UNAUTHORIZED before its payload is looked at.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

from app.auth.authority import Authority
from app.metrics import AUTH_REFUSALS
from app.rocketmq.context import ANONYMOUS
from app.rocketmq.status import RocketMQError

DATE_HEADER = "x-mq-date-time"
MAX_CLOCK_SKEW = timedelta(minutes=15)
_AUTHORIZATION = re.compile(
    r"^MQv2-HMAC-SHA1\s+Credential=(?P<credential>[^,\s]+),\s*SignedHeaders=(?P<signed>[^,\s]+),\s*Signature=(?P<signature>[0-9A-Fa-f]+)$"
)


class Signatures:
    def __init__(self, authority: Authority) -> None:
        self.authority = authority

    async def principal(self, headers: Mapping[str, str]) -> str:
        if not self.authority.enabled:
            return ANONYMOUS
        found = _AUTHORIZATION.match(headers.get("authorization", "").strip())
        if found is None:
            raise _refused("this call is not signed (MQv2-HMAC-SHA1 with a token's access and secret keys)")
        credential = found["credential"].split("/")[0]  # some clients append a scope after the key
        if DATE_HEADER not in found["signed"].split(";"):
            raise _refused(f"the signature must cover {DATE_HEADER}")
        date_time = headers.get(DATE_HEADER, "")
        if not _fresh(date_time):
            raise _refused(f"{DATE_HEADER} {date_time!r} is missing or more than {MAX_CLOCK_SKEW} away")
        signer = await self.authority.rocketmq_signer(credential)
        if signer is None:
            raise _refused("unknown access key (a token id whose token was made with RocketMQ keys)")
        principal, secret_key = signer
        expected = hmac.new(secret_key.encode(), date_time.encode(), hashlib.sha1).hexdigest()
        if not hmac.compare_digest(expected, found["signature"].lower()):
            raise _refused("the signature does not match the access key's secret key")
        return principal


def _refused(reason: str) -> RocketMQError:
    AUTH_REFUSALS.labels("UNAUTHENTICATED").inc()
    return RocketMQError("UNAUTHORIZED", reason)


def _fresh(date_time: str) -> bool:
    """Within the skew of now: UTC, or this machine's local time (the Python client 5.1.2 stamps
    local time with a ``Z``)."""
    try:
        stamped = datetime.strptime(date_time, "%Y%m%dT%H%M%SZ")
    except ValueError:
        return False
    now_utc = datetime.now(UTC).replace(tzinfo=None)
    return any(abs(stamped - now) <= MAX_CLOCK_SKEW for now in (now_utc, datetime.now()))
