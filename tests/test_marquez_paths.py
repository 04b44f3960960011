"""Percent-encoded namespaces and names in Marquez's paths reach the routes whole, ``/`` and ``%`` included."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from fastapi import APIRouter, FastAPI
from fastapi.testclient import TestClient

from airflow_lineage_provider.consumer.marquez.paths import Dataset, Namespace, SegmentPaths, segment


def _app(mount: str | None = None) -> FastAPI:
    router = APIRouter()

    @router.get("/api/v1/namespaces/{namespace}/datasets/{dataset}")
    async def echo(namespace: Namespace, dataset: Dataset) -> dict[str, str]:
        return {"namespace": namespace, "dataset": dataset}

    app = FastAPI()
    app.add_middleware(SegmentPaths)
    app.include_router(router)
    if mount is None:
        return app
    outer = FastAPI()
    outer.mount(mount, app)
    return outer


@pytest.mark.parametrize("mount", [None, "/lineage"])
@pytest.mark.parametrize(
    ("namespace", "dataset"),
    [
        ("postgres://db:5432", "analytics.public.orders"),
        ("s3://bucket", "warehouse/orders/2026/12"),
        ("odd%2Fns", "100% done?#x"),
        ("plain", "ünïcode name"),
    ],
)
def test_encoded_names_reach_the_route_whole(mount: str | None, namespace: str, dataset: str) -> None:
    client = TestClient(_app(mount))
    prefix = mount or ""
    answer = client.get(f"{prefix}/api/v1/namespaces/{quote(namespace, safe='')}/datasets/{quote(dataset, safe='')}")
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"namespace": namespace, "dataset": dataset}


def test_segment_undoes_only_the_escapes_of_slash_and_percent() -> None:
    assert segment("postgres:%2F%2Fdb:5432") == "postgres://db:5432"
    assert segment("100%25 done") == "100% done"


def test_a_path_sent_as_raw_utf8_bytes_is_read_as_utf8() -> None:
    from airflow_lineage_provider.consumer.marquez.paths import _segment_path

    assert _segment_path("/api/v1/namespaces/ünï%2Fx/datasets/a%25b".encode()) == (
        "/api/v1/namespaces/ünï%2Fx/datasets/a%25b"
    )
