"""Who signed a RocketMQ call: ``authorization: MQv2-HMAC-SHA1 Credential=<ak>, SignedHeaders=x-mq-date-time, Signature=<hex>``.

With ``HALFMQ_AUTH=none`` every call is anonymous. With ``token``, the access key is a
token's id and the secret key is derived from the token (docs/rocketmq.md); the signature
is the HMAC-SHA1, keyed with the secret key, of the ``x-mq-date-time`` header.
"""

from __future__ import annotations

from collections.abc import Mapping

from app.auth.authority import Authority
from app.rocketmq.context import ANONYMOUS
from app.rocketmq.status import RocketMQError


class Signatures:
    def __init__(self, authority: Authority) -> None:
        self.authority = authority

    async def principal(self, headers: Mapping[str, str]) -> str:
        if not self.authority.enabled:
            return ANONYMOUS
        raise RocketMQError("UNAUTHORIZED", "RocketMQ signatures are not checked yet: the gRPC listener refuses every call")
