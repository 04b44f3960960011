"""Listings bound the stored bytes one page shows, on SQLite and PostgreSQL, over real HTTP: a page of more than one
item past ``max_answer_bytes`` is refused with 400 naming the ``limit`` that fits, before its values are loaded
(the serving process's memory does not grow by the answer it would have been), a page of one item is always
answered, and listing answers count against the answers-in-flight budget that walks use."""

from __future__ import annotations

import re
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import msgspec
import pytest
import requests
import sqlalchemy
from fastapi.testclient import TestClient
from sqlalchemy import select
from support.consumer_helpers import PRODUCER
from support.served import serve_consumer
from support.uvicorn_thread import served
from support.waiting import wait_until

from airflow_lineage_provider.consumer import create_app
from airflow_lineage_provider.consumer.marquez import dataset_versions
from airflow_lineage_provider.consumer.marquez import datasets as marquez_datasets
from airflow_lineage_provider.consumer.marquez import jobs as marquez_jobs
from airflow_lineage_provider.consumer.security.access import Access, ApiKey, NamespaceScope
from airflow_lineage_provider.consumer.store import create_store_engine
from airflow_lineage_provider.consumer.store.graph import listing as graph_listing
from airflow_lineage_provider.consumer.store.schema import tables

pytest_plugins = ("support.consumer_fixtures",)

MiB = 1024 * 1024
#: The answer limit the tests' servers run with (normal pages hold kilobytes).
LIMIT = 4 * MiB
#: Bytes of each large facet: a run's, a job's, an output dataset's.
FACET = 1_500_000
#: Fields of each output's schema (about 1 MB of schema).
FIELDS = 20_000
JOBS, RUNS_PER_JOB = 3, 3


def facet(size: int) -> dict[str, Any]:
    return {"_producer": PRODUCER, "_schemaURL": "https://example.com/blob.json#/$defs/Blob", "blob": "x" * size}


def large_event(index: int) -> dict[str, Any]:
    """A COMPLETE event of job ``big<index % JOBS>`` writing ``out<index>``, with multi-MB run, job and dataset
    facets and a schema of :data:`FIELDS` fields."""
    schema = {
        "_producer": PRODUCER,
        "_schemaURL": "https://openlineage.io/spec/facets/1-1-1/SchemaDatasetFacet.json#/$defs/SchemaDatasetFacet",
        "fields": [{"name": f"column_{i:05d}_of_a_wide_table", "type": "VARCHAR"} for i in range(FIELDS)],
    }
    return {
        "eventType": "COMPLETE",
        "eventTime": f"2026-03-01T12:00:{index:02d}Z",
        "run": {"runId": str(uuid.uuid4()), "facets": {"blob": facet(FACET)}},
        "job": {"namespace": "pipelines", "name": f"big{index % JOBS}", "facets": {"blob": facet(FACET)}},
        "producer": PRODUCER,
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        "inputs": [],
        "outputs": [{"namespace": "wh", "name": f"out{index}", "facets": {"blob": facet(FACET), "schema": schema}}],
    }


def post(url: str, event: dict[str, Any]) -> None:
    """Ingest ``event``, waiting out 503s (a deferred-apply log that is full for a moment)."""
    deadline = time.monotonic() + 120
    while True:
        answer = requests.post(f"{url}/api/v1/lineage", json=event, timeout=120)
        if answer.status_code != 503 or time.monotonic() > deadline:
            assert answer.status_code == 201, answer.text[:300]
            return
        time.sleep(float(answer.headers.get("retry-after", "1")))  # a real pause: the client honours Retry-After


def memory(pid: int) -> tuple[int, int]:
    """``(VmRSS, VmHWM)`` of process ``pid``, in bytes."""
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(("VmRSS:", "VmHWM:")):
            name, value = line.split(":", 1)
            found[name] = int(value.split()[0]) * 1024
    return found["VmRSS"], found["VmHWM"]


def reset_peak(pid: int) -> None:
    """Start VmHWM again from the current RSS (``clear_refs`` 5, Linux 4.0 and later)."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


#: Each listing and the list its answer holds.
LISTINGS = [
    ("/api/v1/events", {}, "events"),
    ("/api/v1/events/lineage", {}, "events"),
    ("/api/v1/jobs", {"namespace": "pipelines"}, "jobs"),
    ("/api/v1/namespaces/pipelines/jobs", {}, "jobs"),
    ("/api/v1/runs", {"jobNamespace": "pipelines", "jobName": "big0"}, "runs"),
    ("/api/v1/namespaces/pipelines/jobs/big0/runs", {}, "runs"),
    ("/api/v1/datasets", {"namespace": "wh"}, "datasets"),
    ("/api/v1/namespaces/wh/datasets", {}, "datasets"),
    ("/api/v1/graph", {"namespace": "wh"}, "nodes"),
]


def refusal(answer: requests.Response) -> tuple[int, int]:
    """``(bytes the page would show, the limit that fits)`` of a page refused as too large."""
    assert answer.status_code == 400, answer.text[:300]
    body = answer.json()
    assert body["code"] == 400 and body["message"] == body["detail"]  # Marquez's shape and ours
    detail = body["detail"]
    assert f"max_answer_bytes = {LIMIT:,}" in detail, detail
    size = re.search(r"would show ([\d,]+) bytes", detail)
    fits = re.search(r"ask for limit=(\d+) or less", detail)
    assert size is not None and fits is not None, detail
    return int(size[1].replace(",", "")), int(fits[1])


def test_a_page_past_the_answer_limit_is_refused_before_it_is_loaded(store_url: str, tmp_path: Path) -> None:
    with serve_consumer(store_url, tmp_path, "--max-answer-bytes", str(LIMIT)) as server:
        events = JOBS * RUNS_PER_JOB
        for index in range(events):
            post(server.url, large_event(index))
        # Pages of a normal size are answered; the store is applied and warm.
        assert requests.get(f"{server.url}/api/v1/namespaces", timeout=60).status_code == 200
        assert requests.get(f"{server.url}/api/v1/search", params={"q": "big"}, timeout=60).status_code == 200
        before, _ = memory(server.pid)
        reset_peak(server.pid)
        refused: dict[str, tuple[int, int]] = {}
        for path, params, _ in LISTINGS:
            refused[path] = refusal(requests.get(server.url + path, params={**params, "limit": 1000}, timeout=120))
        _, peak = memory(server.pid)
        # Refused from the sizes alone: the process did not load the pages (tens of MB each).
        assert peak - before < refused["/api/v1/events"][0] / 2, (peak - before, refused)

        for path, params, key in LISTINGS:
            size, fits = refused[path]
            assert size > LIMIT and fits >= 1
            # The limit named is the most that fits: one more is refused, naming it again.
            one_more = requests.get(server.url + path, params={**params, "limit": fits + 1}, timeout=120)
            assert refusal(one_more)[1] == fits, path
            # Paging as the refusals say reaches every item.
            seen, offset, total = 0, 0, None
            while total is None or offset < total:
                page = requests.get(server.url + path, params={**params, "limit": fits, "offset": offset}, timeout=120)
                if page.status_code == 400:
                    fits = refusal(page)[1]
                    continue
                assert page.status_code == 200, (path, offset, page.text[:300])
                listed = page.json()
                total = listed["totalCount"]
                seen += len(listed[key])
                offset += len(listed[key])
            assert seen == total > 1, path
        # The sizes the store reported are what the pages hold.
        whole = sum(
            len(requests.get(f"{server.url}/api/v1/events", params={"limit": 1, "offset": i}, timeout=60).content)
            for i in range(events)
        )
        assert 0.9 * whole < refused["/api/v1/events"][0] <= whole
        # A page of one item is answered, however large.
        single = requests.get(f"{server.url}/api/v1/jobs", params={"namespace": "pipelines", "limit": 1}, timeout=60)
        assert single.status_code == 200 and len(single.content) > LIMIT


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def test_listing_answers_count_against_the_answers_in_flight(store_url: str) -> None:
    # The stalled reader's answer is abandoned after stall_seconds: long enough that the two requests below, on a
    # loaded machine, still find its answer held.
    app = create_app(store_url=store_url, anonymous=Access.ADMIN, walk_answer_bytes=MiB, stall_seconds=5.0)
    path = "/api/v1/events?limit=10"
    with served(app) as url:
        for index in range(2):
            post(url, large_event(index))
        whole = requests.get(url + path, timeout=60)
        assert whole.status_code == 200 and len(whole.content) > 2 * MiB
        assert app.state.walks.held_bytes == 0
        reader = socket.create_connection(("127.0.0.1", _port(url)))
        reader.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        reader.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())  # and reads nothing
        wait_until(lambda: app.state.walks.held_bytes, "the unread answer was never held")
        busy = requests.get(url + path, timeout=30)  # the unread answer holds the budget
        assert busy.status_code == 503, busy.text[:300]
        assert busy.headers["retry-after"] == "5" and "still being sent" in busy.json()["detail"]
        walk = requests.get(url + "/api/v1/lineage", params={"nodeId": "job:pipelines:big0", "depth": 1}, timeout=30)
        assert walk.status_code == 503  # the same budget as walks
        # The stalled connection is dropped, its answer freed.
        wait_until(lambda: app.state.walks.held_bytes == 0, "the stalled answer was never freed")
        assert requests.get(url + path, timeout=30).status_code == 200
        reader.close()
    app.state.store.dispose()


# --- What the sizes count: every value a page shows, not only the stored JSON; checked in-process -------------

#: The answer limit of the in-process apps below.
SMALL = 64 * 1024
WIDE_JOBS, WIDE_OUTPUTS = 8, 500
ALL_KEY = {"X-API-Key": "all-namespaces-secret"}
W_KEY = {"X-API-Key": "w-namespaces-secret"}
KEYS = (
    ApiKey("all", Access.ADMIN, ALL_KEY["X-API-Key"]),
    ApiKey("w", Access.READ, W_KEY["X-API-Key"], NamespaceScope(("w", "wh", "v"))),
)


def _run_event(
    namespace: str,
    job: str,
    second: int,
    outputs: list[str],
    run_facet: int = 0,
    job_facets: dict[str, Any] | None = None,
    run_id: str | None = None,
) -> dict[str, Any]:
    """A COMPLETE event of ``namespace``/``job`` writing the datasets ``outputs`` of namespace ``wh``."""
    return {
        "eventType": "COMPLETE",
        "eventTime": f"2026-03-01T12:{second // 60:02d}:{second % 60:02d}Z",
        "run": {"runId": run_id or str(uuid.uuid4()), "facets": {"blob": facet(run_facet)} if run_facet else {}},
        "job": {"namespace": namespace, "name": job, "facets": job_facets or {}},
        "producer": PRODUCER,
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        "inputs": [],
        "outputs": [{"namespace": "wh", "name": name} for name in outputs],
    }


def _documented(text: str) -> dict[str, Any]:
    schema = "https://openlineage.io/spec/facets/1-0-1/DocumentationJobFacet.json#/$defs/DocumentationJobFacet"
    return {"documentation": {"_producer": PRODUCER, "_schemaURL": schema, "description": text}}


def _sized(read: Callable[[Callable[[Sequence[int]], None]], Any]) -> tuple[list[int], Any]:
    """What ``read`` answers when handed an ``admit`` that records the sizes it is told, and those sizes."""
    told: list[int] = []
    found = read(told.extend)
    return told, found


def _assert_bounds(size: int, encoded: int, slack: float = 3.0) -> None:
    """The size a store reported for an item is at least its encoded answer, and not more than ``slack`` times it."""
    assert encoded <= size <= slack * encoded, (size, encoded)


@pytest.fixture
def wide(store_url: str) -> Iterator[TestClient]:
    """An app with :data:`SMALL` as its answer limit on a store of :data:`WIDE_JOBS` jobs of namespace ``w``, each
    writing :data:`WIDE_OUTPUTS` datasets (no facets: only names), and a job ``v.versioned`` with 30 runs, each a
    new version (its own job facets) with a 2 KB run facet, writing ``wh.versioned_out``."""
    app = create_app(store_url=store_url, keys=KEYS, max_answer_bytes=SMALL)
    events = [
        _run_event("w", f"wide{j}", j, [f"wide{j}_out_{k:04d}" for k in range(WIDE_OUTPUTS)]) for j in range(WIDE_JOBS)
    ]
    events += [
        _run_event("v", "versioned", 60 + k, ["versioned_out"], 2000, _documented(f"version {k}")) for k in range(30)
    ]
    try:
        with TestClient(app) as client:
            answer = client.post("/api/v1/lineage/batch", json=events, headers=ALL_KEY)
            assert answer.status_code == 200, answer.text[:300]
            yield client
    finally:
        app.state.store.dispose()


def _small_refusal(answer: Any) -> tuple[int, int]:
    """``(bytes, limit that fits)`` of a page refused under :data:`SMALL`."""
    assert answer.status_code == 400, answer.text[:300]
    detail = answer.json()["detail"]
    assert f"max_answer_bytes = {SMALL:,}" in detail, detail
    size, fits = re.search(r"would show ([\d,]+) bytes", detail), re.search(r"ask for limit=(\d+) or less", detail)
    assert size is not None and fits is not None, detail
    return int(size[1].replace(",", "")), int(fits[1])


def _pages(client: TestClient, path: str, key: str, fits: int, headers: dict[str, str], **params: Any) -> list[Any]:
    """Every item of a listing, paged ``fits`` at a time (every page answered)."""
    items: list[Any] = []
    while True:
        answer = client.get(path, params={**params, "limit": fits, "offset": len(items)}, headers=headers)
        assert answer.status_code == 200, answer.text[:300]
        page = answer.json()
        items += page[key]
        if not page[key] or len(items) >= page["totalCount"]:
            return items


def test_wide_jobs_are_sized_by_their_inputs_and_outputs(wide: TestClient) -> None:
    """A Job lists every dataset it read and wrote: those count, with a cold job cache and for a namespace-limited
    key (which never uses the cache) too, and the size is an upper bound of the encoded Job within a factor."""
    path = "/api/v1/namespaces/w/jobs"
    whole = WIDE_JOBS * WIDE_OUTPUTS * len('{"namespace":"wh","name":"wide0_out_0000"},')
    assert whole > 2 * SMALL
    limited = _small_refusal(wide.get(path, params={"limit": WIDE_JOBS}, headers=W_KEY))  # never cached
    cold = _small_refusal(wide.get(path, params={"limit": WIDE_JOBS}, headers=ALL_KEY))  # the cache is empty
    assert limited == cold and cold[0] > whole and cold[1] < WIDE_JOBS
    assert _small_refusal(wide.get("/api/v1/jobs", params={"namespace": "w", "limit": WIDE_JOBS}, headers=ALL_KEY))
    for headers in (W_KEY, ALL_KEY):
        jobs = _pages(wide, path, "jobs", cold[1], headers)
        assert [len(job["outputs"]) for job in jobs] == [WIDE_OUTPUTS] * WIDE_JOBS
    warm = _small_refusal(wide.get(path, params={"limit": WIDE_JOBS}, headers=ALL_KEY))  # the encoded Jobs now
    assert warm[0] <= cold[0] and warm[1] >= cold[1]

    store = wide.app.state.store  # type: ignore[attr-defined]
    with store.read() as conn:
        sizes, (found, total) = _sized(lambda admit: marquez_jobs.list_jobs(conn, 100, 0, namespace="w", admit=admit))
        assert total == len(found) == len(sizes) == WIDE_JOBS
        for size, job in zip(sizes, found, strict=True):
            _assert_bounds(size, len(msgspec.json.encode(job)))
        # A job of a few datasets, facets and runs too.
        sizes, (found, _) = _sized(lambda admit: marquez_jobs.list_jobs(conn, 100, 0, namespace="v", admit=admit))
        _assert_bounds(sizes[0], len(msgspec.json.encode(found[0])))


def test_a_graph_page_is_sized_by_the_edges_leaving_its_nodes(wide: TestClient) -> None:
    path, params = "/api/v1/graph", {"namespace": "w", "limit": str(WIDE_JOBS)}
    size, fits = _small_refusal(wide.get(path, params=params, headers=ALL_KEY))
    assert _small_refusal(wide.get(path, params=params, headers=W_KEY)) == (size, fits)
    assert size > WIDE_JOBS * WIDE_OUTPUTS * 100 and fits < WIDE_JOBS
    assert len(_pages(wide, path, "nodes", fits, ALL_KEY, namespace="w")) == WIDE_JOBS
    store = wide.app.state.store  # type: ignore[attr-defined]
    with store.read() as conn:
        # The wide jobs, v's job (runs, facets), a dataset (an edge in, none out).
        for namespace, offset in [*(("w", offset) for offset in range(WIDE_JOBS)), ("v", 0), ("wh", 0)]:
            told: list[int] = []
            page = graph_listing.graph_page(conn, 1, offset, namespace=namespace, admit=told.extend)
            assert len(told) == len(page.nodes) == 1
            _assert_bounds(told[0], len(msgspec.json.encode(page)))


@pytest.mark.parametrize(
    ("path", "key"),
    [
        ("/api/v1/namespaces/v/jobs/versioned/versions", "versions"),
        ("/api/v1/namespaces/wh/datasets/versioned_out/versions", "versions"),
    ],
)
def test_version_pages_are_sized_before_they_are_loaded(wide: TestClient, path: str, key: str) -> None:
    """Job and dataset versions are paged in SQL and sized before anything of them is loaded: a page past the
    limit is refused naming the limit that fits, and paging by it lists every version, as one page would."""
    size, fits = _small_refusal(wide.get(path, params={"limit": 30}, headers=ALL_KEY))
    assert size > 30 * 2000 and fits < 30
    assert _small_refusal(wide.get(path, params={"limit": fits + 1}, headers=W_KEY))[1] == fits
    paged = _pages(wide, path, key, fits, W_KEY)
    assert len({version["version"] for version in paged}) == len(paged) == 30
    assert [v["createdAt"] for v in paged] == sorted((v["createdAt"] for v in paged), reverse=True)
    for version in (paged[0], paged[fits], paged[-1]):
        assert wide.get(f"{path}/{version['version']}", headers=ALL_KEY).json() == version
    # A page of one is always answered, and is what the whole listing says.
    single = wide.get(path, params={"limit": 1, "offset": 29}, headers=ALL_KEY).json()
    assert single == {key: [paged[29]], "totalCount": 30}


def test_job_version_sizes_bound_their_answers(wide: TestClient) -> None:
    store = wide.app.state.store  # type: ignore[attr-defined]
    with store.read() as conn:
        job = marquez_jobs.find_job(conn, "v", "versioned")
        dataset = marquez_datasets.find_dataset(conn, "wh", "versioned_out")
        assert job is not None and dataset is not None
        sizes, (versions, total) = _sized(lambda admit: marquez_jobs.list_job_versions(conn, job, 30, 0, admit=admit))
        assert total == len(versions) == len(sizes) == 30
        assert versions == marquez_jobs.job_versions(conn, job)
        for size, version in zip(sizes, versions, strict=True):
            _assert_bounds(size, len(msgspec.json.encode(version)))
        sizes, (versions, total) = _sized(
            lambda admit: dataset_versions.list_versions(conn, dataset, "wh", "versioned_out", 30, 0, admit=admit)
        )
        assert total == len(versions) == len(sizes) == 30
        for size, version in zip(sizes, versions, strict=True):
            _assert_bounds(size, len(msgspec.json.encode(version)))


# --- Rows gone between a page's sizes and its values (a prune or reset committing in between) --------------


class DeleteBetween:
    """Deletes rows in another connection, committed, just before the statement of the store's engine that comes
    after one containing ``after`` (the statement that sized or chose the page), once per :meth:`arm`."""

    def __init__(self, store_url: str, engine: Any, after: str) -> None:
        self.other = create_store_engine(store_url)
        self.engine, self.after = engine, after
        self.delete: Any = None
        self.deleted = 0
        self.previous = threading.local()  # the statement each thread ran last (the applier's are its own)
        sqlalchemy.event.listen(engine, "before_cursor_execute", self._before)

    def arm(self, delete: Any) -> None:
        self.delete, self.deleted = delete, 0

    def _before(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if self.delete is not None and self.after in getattr(self.previous, "statement", ""):
            with self.other.begin() as other:
                self.deleted = other.execute(self.delete).rowcount
            self.delete = None
        self.previous.statement = statement

    def close(self) -> None:
        sqlalchemy.event.remove(self.engine, "before_cursor_execute", self._before)
        self.other.dispose()


@pytest.fixture
def racing(store_url: str) -> Iterator[tuple[TestClient, str]]:
    app = create_app(store_url=store_url, anonymous=Access.ADMIN)
    try:
        with TestClient(app) as client:
            yield client, store_url
    finally:
        app.state.store.dispose()


def test_events_deleted_between_sizes_and_payloads_are_left_out(racing: tuple[TestClient, str]) -> None:
    """Under READ COMMITTED (PostgreSQL) a statement sees what committed before it: events deleted after a page was
    sized and before its payloads were read are left out (and out of the count), not a 500. SQLite reads one
    snapshot: the page is whole."""
    client, store_url = racing
    e = tables.events.c
    between = DeleteBetween(store_url, client.app.state.store.engine, "AS size")  # type: ignore[attr-defined]
    try:
        for path in ("/api/v1/events", "/api/v1/events/pipelines", "/api/v1/events/lineage"):
            with between.other.begin() as other:
                other.execute(tables.events.delete())
            runs = [str(uuid.uuid4()) for _ in range(3)]
            events = [_run_event("pipelines", "racer", index, [], run_id=run) for index, run in enumerate(runs)]
            assert client.post("/api/v1/lineage/batch", json=events).status_code == 200
            between.arm(tables.events.delete().where(e.run_uuid.in_(runs[1:])))
            answer = client.get(path, params={"limit": 10})
            assert answer.status_code == 200, (path, answer.text[:300])
            assert between.deleted == 2, path
            listed = answer.json()
            shown = [event["run"]["runId"] for event in listed["events"]]
            assert shown == ([runs[0]] if store_url.startswith("postgresql") else runs[::-1]), path
            assert listed["totalCount"] == len(shown)
    finally:
        between.close()


def test_runs_deleted_between_a_versions_page_and_its_values_are_left_out(racing: tuple[TestClient, str]) -> None:
    client, store_url = racing
    runs = [str(uuid.uuid4()) for _ in range(3)]
    events = [
        _run_event("pipelines", "racer", index, ["raced"], job_facets=_documented(f"v{index}"), run_id=run)
        for index, run in enumerate(runs)
    ]
    assert client.post("/api/v1/lineage/batch", json=events).status_code == 200
    r = tables.runs.c
    engine = client.app.state.store.engine  # type: ignore[attr-defined]
    whole = 1 if store_url.startswith("postgresql") else 3
    for path, after in (
        ("/api/v1/namespaces/pipelines/jobs/racer/versions", "version_page"),
        ("/api/v1/namespaces/wh/datasets/raced/versions", "write_page"),
        ("/api/v1/namespaces/pipelines/jobs/racer/runs", "AS size"),
    ):
        between = DeleteBetween(store_url, engine, after)
        try:
            kept = client.get(path).json()
            key = next(name for name in kept if name != "totalCount")
            assert kept["totalCount"] == len(kept[key]) == 3
            with between.other.begin() as other:  # the runs, to put back after
                saved = [
                    dict(row._mapping) for row in other.execute(select(tables.runs).where(r.run_uuid.in_(runs[:2])))
                ]
            between.arm(tables.runs.delete().where(r.run_uuid.in_(runs[:2])))
            answer = client.get(path)
            assert answer.status_code == 200, (path, answer.text[:300])
            assert between.deleted == 2, path
            listed = answer.json()
            assert listed["totalCount"] == len(listed[key]) == whole, path
            with between.other.begin() as other:
                other.execute(tables.runs.insert(), saved)
        finally:
            between.close()
