"""Listings bound the stored bytes one page shows, on SQLite and PostgreSQL, over real HTTP: a page of more than one
item past ``max_answer_bytes`` is refused with 400 naming the ``limit`` that fits, before its values are loaded
(the serving process's memory does not grow by the answer it would have been), a page of one item is always
answered, and listing answers count against the answers-in-flight budget that walks use."""

from __future__ import annotations

import re
import socket
import time
import uuid
from pathlib import Path
from typing import Any

import requests
from support.consumer_helpers import PRODUCER
from support.served import serve_consumer
from support.uvicorn_thread import served

from airflow_lineage_provider.consumer import create_app
from airflow_lineage_provider.consumer.access import Access

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
        time.sleep(float(answer.headers.get("retry-after", "1")))


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
    app = create_app(store_url=store_url, anonymous=Access.ADMIN, walk_answer_bytes=MiB)
    path = "/api/v1/events?limit=10"
    # The stalled reader is dropped after stall_seconds: long enough that the two requests below, on a loaded
    # machine, still find its answer held.
    with served(app, stall_seconds=5.0) as url:
        for index in range(2):
            post(url, large_event(index))
        whole = requests.get(url + path, timeout=60)
        assert whole.status_code == 200 and len(whole.content) > 2 * MiB
        assert app.state.walks.held_bytes == 0
        reader = socket.create_connection(("127.0.0.1", _port(url)))
        reader.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        reader.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())  # and reads nothing
        deadline = time.monotonic() + 30
        while app.state.walks.held_bytes == 0:
            assert time.monotonic() < deadline, "the unread answer was never held"
            time.sleep(0.02)
        busy = requests.get(url + path, timeout=30)  # the unread answer holds the budget
        assert busy.status_code == 503, busy.text[:300]
        assert busy.headers["retry-after"] == "5" and "still being sent" in busy.json()["detail"]
        walk = requests.get(url + "/api/v1/lineage", params={"nodeId": "job:pipelines:big0", "depth": 1}, timeout=30)
        assert walk.status_code == 503  # the same budget as walks
        while app.state.walks.held_bytes:  # the stalled connection is dropped, its answer freed
            assert time.monotonic() < deadline, "the stalled answer was never freed"
            time.sleep(0.05)
        assert requests.get(url + path, timeout=30).status_code == 200
        reader.close()
    app.state.store.dispose()
