"""Every file of ../shared/corpus against the consumer: strictly valid events are accepted (lenient and
strict mode), nothing gets a 5xx, and re-sending everything changes nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from support.environment import require_shared, unavailable
from support.olschema import SHARED, SPEC

from airflow_lineage_provider.consumer import create_app
from airflow_lineage_provider.consumer.security.access import Access

CORPUS = SHARED / "corpus"


def manifest() -> list[tuple[str, str]]:
    """``(status, path)`` of every corpus file, e.g. ``("RunEvent:valid", "marquez/.../x.json")``."""
    path = CORPUS / "MANIFEST.tsv"
    if not path.is_file():
        return []
    rows = [line.split("\t") for line in path.read_text().splitlines() if line and not line.startswith("#")]
    return [(row[0], row[1]) for row in rows]


CASES = manifest()


def test_the_corpus_manifest_lists_the_corpus() -> None:
    """Without ../shared/corpus the cases below are not generated at all: say so (a failure under CI=true)."""
    require_shared()
    if not CASES:
        unavailable(f"no {CORPUS / 'MANIFEST.tsv'} (clone the project with ../shared beside it)")
    assert all((CORPUS / path).is_file() for _status, path in CASES)


@pytest.fixture(params=[False, True], ids=["lenient", "strict"])
def corpus_client(request: pytest.FixtureRequest, tmp_path: Path):
    require_shared()
    options = {"strict": True, "spec_dir": str(SPEC / "openlineage")} if request.param else {}
    app = create_app(store_url=f"sqlite:///{tmp_path / 'lineage.db'}", anonymous=Access.ADMIN, **options)
    with TestClient(app) as client:
        client.strict = request.param
        yield client


def test_the_corpus_is_there_to_test() -> None:
    require_shared()
    assert len(CASES) > 100
    assert sum(status.endswith(":valid") and not status.startswith("facet") for status, _ in CASES) >= 15


def test_every_corpus_file_is_answered_without_a_5xx_and_valid_events_are_accepted(corpus_client: TestClient) -> None:
    outcomes = {}
    for status, relative in CASES:
        body = (CORPUS / relative).read_bytes()
        response = corpus_client.post("/api/v1/lineage", content=body, headers={"content-type": "application/json"})
        assert response.status_code < 500, f"{relative}: {response.status_code} {response.text}"
        outcomes[relative] = response.status_code
        if status.endswith(":valid") and not status.startswith("facet"):
            assert response.status_code in (200, 201), (
                f"{relative} is valid but got {response.status_code}: {response.text}"
            )
        if corpus_client.strict and status.endswith(":invalid"):
            assert response.status_code == 400, f"{relative} is invalid but strict mode accepted it"
    assert set(outcomes.values()) <= {200, 201, 400}


def test_lenient_mode_accepts_the_real_producer_quirks_in_the_corpus(tmp_path: Path) -> None:
    require_shared()
    with TestClient(create_app(store_url=f"sqlite:///{tmp_path / 'lineage.db'}", anonymous=Access.ADMIN)) as client:
        for relative in (
            "marquez/open_lineage/event_without_schema_url.json",
            "marquez/open_lineage/event_required_no_timezone.json",
            "marquez/apples/1_pick_apples.json",
            "openlineage/client-python/serde_example_run_event.json",
            "openlineage/proxy-fluentd/events/event_invalid_job_facet.json",
        ):
            response = client.post("/api/v1/lineage", content=(CORPUS / relative).read_bytes())
            assert response.status_code == 201, f"{relative}: {response.text}"
        missing_run_id = client.post(
            "/api/v1/lineage", content=(CORPUS / "openlineage/proxy-fluentd/events/event_no_run_id.json").read_bytes()
        )
        assert missing_run_id.status_code == 400
        assert "run.runId" in missing_run_id.json()["detail"]


def test_the_whole_corpus_as_one_batch_twice_is_stored_once(tmp_path: Path) -> None:
    require_shared()
    events = []
    for status, relative in CASES:
        if not status.startswith("facet"):
            try:
                events.append(json.loads((CORPUS / relative).read_text()))
            except ValueError:
                continue
    with TestClient(create_app(store_url=f"sqlite:///{tmp_path / 'lineage.db'}", anonymous=Access.ADMIN)) as client:
        first = client.post("/api/v1/lineage/batch", json=events)
        assert first.status_code == 207
        stored = first.json()["successful"] - first.json()["duplicates"]
        snapshot = client.get("/api/v1/events", params={"limit": 1000}).json()
        jobs = client.get("/api/v1/jobs", params={"limit": 1000}).json()
        second = client.post("/api/v1/lineage/batch", json=events)
        assert second.json()["duplicates"] == first.json()["successful"]
        assert client.get("/api/v1/events", params={"limit": 1000}).json() == snapshot
        assert client.get("/api/v1/jobs", params={"limit": 1000}).json() == jobs
        assert snapshot["totalCount"] == stored
