"""Routes for principals, tokens and ACLs (only the admin token or a principal with cluster:alter).

Every change is written to the audit log (one structured line) and counted, and this
process's access cache is refreshed at once, so a token works (or stops working) here
as soon as the answer is sent; other broker processes see it within their refresh.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request
from pydantic import BaseModel, Field
from starlette.responses import Response

from app.api.authorize import principal_of
from app.api.encoding import JsonResponse
from app.api.log_routes import ERRORS, broker_of
from app.api.models import Strict
from app.api.rights import ALTER, DESCRIBE, cluster, rights
from app.auth.authority import Authority, audit_event
from app.metrics import AUTH_CHANGES
from half_store.domain.access import (
    PRINCIPAL_NAME_PATTERN,
    Acl,
    Operation,
    PatternType,
    Permission,
    Principal,
    ResourceType,
    TokenInfo,
)
from half_store.domain.errors import ValidationFailed

router = APIRouter(prefix="/v1", tags=["access"], responses=ERRORS)
PrincipalName = Annotated[str, Field(pattern=PRINCIPAL_NAME_PATTERN, description=PRINCIPAL_NAME_PATTERN)]
PrincipalPath = Annotated[str, Path(pattern=PRINCIPAL_NAME_PATTERN)]
IdPath = Annotated[str, Path(min_length=1, max_length=32, pattern=r"^[0-9a-f]+$")]


class PrincipalIn(Strict):
    name: PrincipalName


class PrincipalOut(BaseModel):
    name: str
    created_at: int


class PrincipalList(BaseModel):
    principals: list[PrincipalOut]


class TokenCreated(BaseModel):
    token_id: str
    principal: str
    token: str = Field(description="The secret: shown once, stored only as a hash")
    rocketmq_secret_key: str = Field(
        description="RocketMQ clients sign with access key = token_id and this secret key (docs/rocketmq.md): "
        "hex HMAC-SHA256 keyed with the token of the bytes 'halfmq-rocketmq'"
    )


class TokenOut(BaseModel):
    token_id: str
    principal: str
    created_at: int


class TokenList(BaseModel):
    tokens: list[TokenOut]


class AclIn(Strict):
    principal: Annotated[
        str, Field(pattern=r"^(\*|[A-Za-z0-9._@:+=-]{1,128})$", description="a principal, or * for every one")
    ]
    resource_type: ResourceType = Field(strict=False)
    pattern: Annotated[str, Field(min_length=1, max_length=255, pattern=r"^[^\x00]*$")]
    pattern_type: PatternType = Field(PatternType.LITERAL, strict=False)
    operations: Annotated[list[Annotated[Operation, Field(strict=False)]], Field(min_length=1, max_length=4)]
    permission: Permission = Field(Permission.ALLOW, strict=False)


class AclOut(BaseModel):
    acl_id: str
    principal: str
    resource_type: ResourceType
    pattern: str
    pattern_type: PatternType
    operations: list[Operation]
    permission: Permission
    created_at: int


class AclList(BaseModel):
    acls: list[AclOut]


def _principal(found: Principal) -> dict[str, Any]:
    return {"name": found.name, "created_at": found.created_at}


def _token(found: TokenInfo) -> dict[str, Any]:
    return {"token_id": found.token_id, "principal": found.principal, "created_at": found.created_at}


def _acl(found: Acl) -> dict[str, Any]:
    return {
        "acl_id": found.acl_id,
        "principal": found.principal,
        "resource_type": found.resource_type.value,
        "pattern": found.pattern,
        "pattern_type": found.pattern_type.value,
        "operations": sorted(o.value for o in found.operations),
        "permission": found.permission.value,
        "created_at": found.created_at,
    }


async def _changed(request: Request, change: str, **fields: Any) -> None:
    """Audit, count, and refresh this process's cache so the change applies here at once."""
    AUTH_CHANGES.labels(change).inc()
    audit_event(change, by=principal_of(request), **fields)
    authority: Authority = request.app.state.authority
    if authority.enabled:
        await authority.cache.refresh()


@router.post("/principals", status_code=201, response_model=PrincipalOut)
@rights(cluster(ALTER))
async def create_principal(body: PrincipalIn, request: Request) -> Response:
    created = await broker_of(request).access.create_principal(body.name)
    await _changed(request, "principal_created", principal=created.name)
    return JsonResponse(_principal(created), status_code=201)


@router.get("/principals", response_model=PrincipalList)
@rights(cluster(DESCRIBE))
async def list_principals(request: Request) -> Response:
    found = await broker_of(request).access.list_principals()
    return JsonResponse({"principals": [_principal(p) for p in found]})


@router.post("/principals/{name}/tokens", status_code=201, response_model=TokenCreated)
@rights(cluster(ALTER))
async def create_token(name: PrincipalPath, request: Request) -> Response:
    issued = await broker_of(request).access.create_token(name)
    await _changed(request, "token_created", principal=name, token_id=issued.token_id)
    return JsonResponse(
        {
            "token_id": issued.token_id,
            "principal": name,
            "token": issued.token,
            "rocketmq_secret_key": issued.rocketmq_secret_key,
        },
        status_code=201,
    )


@router.get("/tokens", response_model=TokenList)
@rights(cluster(DESCRIBE))
async def list_tokens(
    request: Request, principal: Annotated[str | None, Query(pattern=PRINCIPAL_NAME_PATTERN)] = None
) -> Response:
    found = await broker_of(request).access.list_tokens(principal)
    return JsonResponse({"tokens": [_token(t) for t in found]})


@router.delete("/tokens/{token_id}", status_code=204)
@rights(cluster(ALTER))
async def revoke_token(token_id: IdPath, request: Request) -> Response:
    revoked = await broker_of(request).access.revoke_token(token_id)
    await _changed(request, "token_revoked", principal=revoked.principal, token_id=token_id)
    return Response(status_code=204)


@router.post("/acls", status_code=201, response_model=AclOut)
@rights(cluster(ALTER))
async def create_acl(body: AclIn, request: Request) -> Response:
    if body.pattern_type is PatternType.PREFIXED and body.pattern == "*":
        raise ValidationFailed("pattern: * is a literal wildcard; a prefixed pattern needs a real prefix")
    acl, created = await broker_of(request).access.create_acl(
        body.principal, body.resource_type, body.pattern, body.pattern_type, frozenset(body.operations), body.permission
    )
    if created:
        await _changed(request, "acl_created", **_acl(acl))
    return JsonResponse(_acl(acl), status_code=201)


@router.get("/acls", response_model=AclList)
@rights(cluster(DESCRIBE))
async def list_acls(
    request: Request,
    principal: Annotated[str | None, Query(max_length=128, pattern=r"^[^\x00]*$")] = None,
    resource_type: ResourceType | None = None,
) -> Response:
    found = await broker_of(request).access.list_acls(principal, resource_type)
    return JsonResponse({"acls": [_acl(a) for a in found]})


@router.delete("/acls/{acl_id}", status_code=204)
@rights(cluster(ALTER))
async def delete_acl(acl_id: IdPath, request: Request) -> Response:
    deleted = await broker_of(request).access.delete_acl(acl_id)
    await _changed(request, "acl_deleted", **_acl(deleted))
    return Response(status_code=204)
