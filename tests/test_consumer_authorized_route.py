"""AuthorizedRoute (the ingest endpoints' route class): the one auth check without FastAPI's per-request
dependency resolution, and only for routes that declare nothing but that check."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.testclient import TestClient

from airflow_lineage_provider.consumer.access import Access, ApiKey, KeyRing, Principal
from airflow_lineage_provider.consumer.auth import Writer, requires
from airflow_lineage_provider.consumer.authorized_route import AuthorizedRoute
from airflow_lineage_provider.consumer.guards import KeyGuard

WRITE_KEY, READ_KEY = "w" * 32, "r" * 32


def _app(router: APIRouter) -> FastAPI:
    app = FastAPI()
    keys = KeyRing((ApiKey("producer", Access.WRITE, WRITE_KEY), ApiKey("reader", Access.READ, READ_KEY)))
    app.state.guard = KeyGuard(keys)
    app.include_router(router)
    return app


def test_the_endpoint_gets_the_principal_of_the_declared_level_and_others_are_refused() -> None:
    router = APIRouter(dependencies=[Depends(requires(Access.WRITE))], route_class=AuthorizedRoute)

    @router.post("/things")
    async def post_thing(request: Request, principal: Writer) -> Any:
        return {"who": principal.who, "path": request.url.path}

    client = TestClient(_app(router))
    assert client.post("/things").status_code == 401
    assert client.post("/things", headers={"X-API-Key": READ_KEY}).status_code == 403
    answer = client.post("/things", headers={"X-API-Key": WRITE_KEY})
    assert answer.status_code == 200 and answer.json() == {"who": Principal("producer", "key").who, "path": "/things"}


def test_a_route_without_the_auth_dependency_is_refused_when_built() -> None:
    router = APIRouter(route_class=AuthorizedRoute)
    with pytest.raises(TypeError, match="exactly one dependency, the auth dependency"):

        @router.post("/open")
        async def post_open(request: Request) -> Any:
            return {}


def test_a_route_with_another_dependency_is_refused_when_built() -> None:
    def other() -> int:
        return 1

    router = APIRouter(dependencies=[Depends(requires(Access.WRITE)), Depends(other)], route_class=AuthorizedRoute)
    with pytest.raises(TypeError, match="found"):

        @router.post("/mixed")
        async def post_mixed(request: Request, principal: Writer) -> Any:
            return {}
