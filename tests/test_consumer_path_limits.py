"""Every route of the consumer, called with NUL, over-long and malformed path segments over real HTTP, answers
without a 5xx on SQLite and PostgreSQL. The routes are read from the app, so a new route is covered by itself."""

from __future__ import annotations

import http.client
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.routing import Mount, Route
from support.consumer_helpers import LiveServer, dataset, run_event

from airflow_lineage_provider.consumer import create_app
from airflow_lineage_provider.consumer.limits.path_limits import MAX_PATH_BYTES, path_problem
from airflow_lineage_provider.consumer.security.access import Access
from airflow_lineage_provider.consumer.validation import MAX_NAME_LENGTH

pytest_plugins = ("support.consumer_fixtures",)

#: Path parameters as a hostile client writes them (percent-encoded, as sent on the wire).
HOSTILE = {
    "nul": "%00",
    "nul inside": "fin-db%00",
    "nul at the end of a name": "orders%00",
    "over-long": "a" * (MAX_NAME_LENGTH + 1),
    "over-long encoded": "%2F" * (MAX_NAME_LENGTH + 1),
    "invalid utf-8": "%FF%FE%C3",
    "overlong nul encoding": "%C0%80",
    "encoded slashes and dots": "%2F%2F..%2F..%2F",
    "percent": "%25",
    "lone surrogate encoded": "%ED%A0%80",
    "control characters": "%01%1F%7F",
}
_PARAMETER = re.compile(r"\{[^}/]+\}")


def _templates(app: Any) -> list[tuple[str, str]]:
    """(method, path template) of every route of ``app``, mounts included."""
    found: list[tuple[str, str]] = []
    for route in app.routes:
        if isinstance(route, Mount):
            found.append(("GET", route.path + "/{file}"))
        elif isinstance(route, Route):
            found.extend((method, route.path) for method in sorted(route.methods or {"GET"}) if method != "HEAD")
    return found


@pytest.fixture
def served(store_url: str) -> Iterator[tuple[Any, int]]:
    app = create_app(store_url=store_url, anonymous=Access.ADMIN)
    with LiveServer(app) as server:
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        event = run_event("COMPLETE", "load", namespace="fin-db", outputs=[dataset("orders", namespace="fin-db")])
        connection.request("POST", "/api/v1/lineage", json.dumps(event), {"Content-Type": "application/json"})
        assert connection.getresponse().status == 201
        connection.close()
        yield app, server.port
    app.state.store.dispose()


def _call(port: int, method: str, path: str) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        body = b"{}" if method in ("POST", "PUT", "PATCH") else None
        headers = {"Content-Type": "application/json"} if body is not None else {}
        connection.request(method, path, body, headers)
        answer = connection.getresponse()
        return answer.status, answer.read()
    finally:
        connection.close()


def test_every_route_answers_hostile_path_segments_without_a_5xx(served: tuple[Any, int]) -> None:
    app, port = served
    templates = _templates(app)
    assert len(templates) > 40, templates  # the app's routes were read, not an empty list
    failures: list[str] = []
    for method, template in templates:
        if not _PARAMETER.search(template):
            continue
        for label, value in HOSTILE.items():
            path = _PARAMETER.sub(value, template)
            status, body = _call(port, method, path)
            if status >= 500:
                failures.append(f"{method} {template} with {label}: {status} {body[:200]!r}")
            elif "nul" in label and label != "overlong nul encoding" and status != 400:
                failures.append(f"{method} {template} with {label}: {status}, expected 400")
    assert not failures, "\n".join(failures)


def test_nul_and_over_long_in_any_query_parameter_or_path_answer_400(served: tuple[Any, int]) -> None:
    _app, port = served
    for path in (
        "/api/v1/namespaces/%00",
        "/api/v1/namespaces/fin-db%00",
        "/api/v1/namespaces/%00/jobs",
        "/api/v1/namespaces/%00/jobs/x",
        "/api/v1/namespaces/%00/datasets",
        "/api/v1/jobs/runs/%00",
        "/api/v1/jobs/runs/%00/facets?type=run",
        "/api/v1/namespaces?limit=10&x=%00",
        "/api/v1/search?q=orders%00",
    ):
        status, body = _call(port, "GET", path)
        assert status == 400, (path, status, body)
        assert b"NUL" in body, body
    status, body = _call(port, "PUT", "/api/v1/namespaces/%00/datasets/orders/tags/pii")
    assert status == 400 and b"NUL" in body
    status, body = _call(port, "GET", "/api/v1/namespaces/" + "n" * (MAX_NAME_LENGTH + 1))
    assert status == 400
    assert json.loads(body)["detail"] == (
        f"path segment 4 is {MAX_NAME_LENGTH + 1} characters long: names and namespaces hold at most {MAX_NAME_LENGTH}"
    )
    status, _body = _call(port, "GET", "/api/v1/namespaces/fin-db")  # a plain name still answers
    assert status == 200


def test_path_problem_reads_only_what_it_needs() -> None:
    assert path_problem(b"/api/v1/lineage", b"") is None
    assert path_problem(b"/api/v1/namespaces/postgres%3A%2F%2Fdb%3A5432/datasets/public.orders", b"limit=5") is None
    assert path_problem(b"/x/" + b"a" * MAX_PATH_BYTES, b"") == (
        f"the path is {MAX_PATH_BYTES + 3} bytes long; at most {MAX_PATH_BYTES} are read"
    )
    assert "NUL" in (path_problem(b"/api/v1/namespaces/a%00b", b"") or "")
    assert "NUL" in (path_problem(b"/api/v1/namespaces", b"q=%00") or "")
