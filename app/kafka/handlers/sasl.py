"""SaslHandshake and SaslAuthenticate: SASL/PLAIN with a halfmq token as the password.

With ``HALFMQ_AUTH=token`` a connection is served nothing but ApiVersions and these two
until it authenticates; the token names the principal whose ACLs every later request is
checked against, through the same authority REST uses. The user name is not checked
(the token alone identifies the principal), so clients may put anything there.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from kio.schema.errors import ErrorCode

from app.kafka.protocol import api, build, response_module
from app.kafka.session import Session
from half_store.domain.errors import BrokerError

PLAIN = "PLAIN"


@api(17, 1, 1, before_auth=True)
async def sasl_handshake(session: Session, request: Any) -> Any:
    m = response_module(request)
    if request.mechanism != PLAIN:
        return m.SaslHandshakeResponse(error_code=ErrorCode.unsupported_sasl_mechanism, mechanisms=(PLAIN,))
    session.sasl_mechanism = PLAIN
    return m.SaslHandshakeResponse(error_code=ErrorCode.none, mechanisms=(PLAIN,))


@api(36, 0, 2, before_auth=True)
async def sasl_authenticate(session: Session, request: Any) -> Any:
    m = response_module(request)
    error, message = ErrorCode.none, None
    parts = bytes(request.auth_bytes).split(b"\x00")
    if session.sasl_mechanism != PLAIN:
        error, message = ErrorCode.illegal_sasl_state, "send SaslHandshake (PLAIN) first"
    elif session.authority.enabled and session.principal is not None:
        error, message = ErrorCode.illegal_sasl_state, "this connection is authenticated already"
    elif len(parts) != 3:
        error, message = ErrorCode.sasl_authentication_failed, "PLAIN needs authzid NUL username NUL password"
    elif session.authority.enabled:
        try:
            session.principal = await session.authority.authenticate(parts[2].decode(errors="replace"))
        except BrokerError as failure:
            error, message = ErrorCode.sasl_authentication_failed, f"authentication failed: {failure}"
    return build(
        m.SaslAuthenticateResponse,
        error_code=error,
        error_message=message,
        auth_bytes=b"",
        session_lifetime=timedelta(0),
    )
