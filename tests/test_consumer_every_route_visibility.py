"""Every GET route of the consumer, called with a namespace-limited key, names nothing the key cannot see.

The routes are read from the app (a new route is covered without anyone remembering it): each is called with its
path parameters filled from a store holding lineage in a visible namespace (``open``) and a hidden one
(``hiddenns``), crossing between them — a visible job reading a hidden dataset, column lineage and a symlink from
hidden names, a parent run in the hidden namespace, a declared hidden output, a tagged hidden dataset. Every
answer, whatever its status, must hold neither the hidden namespace nor any hidden name (all start with
``secret_``), except that an error answer may repeat the value it was asked about. On SQLite and PostgreSQL.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from openlineage.client.facet_v2 import parent_run, symlinks_dataset
from support.consumer_helpers import dataset, dataset_event, job_event, run_event

from airflow_lineage_provider.consumer import create_app
from airflow_lineage_provider.consumer.security.access import Access, ApiKey, NamespaceScope

pytest_plugins = ("support.consumer_fixtures",)

OPEN, HIDDEN = "open", "hiddenns"
ADMIN = {"X-API-Key": "admin-secret-key"}
LIMITED = {"X-API-Key": "limited-reader-key"}
KEYS = (
    ApiKey("operator", Access.ADMIN, ADMIN["X-API-Key"]),
    ApiKey("limited", Access.READ, LIMITED["X-API-Key"], NamespaceScope((OPEN,))),
)
#: What no answer to the limited key may hold: the hidden namespace, and every hidden name (they all start so).
HIDDEN_MARKS = re.compile(r"hiddenns|secret_")
LOAD_RUN, HIDDEN_RUN, PARENT_RUN = (str(uuid.UUID(int=n, version=4)) for n in (1, 2, 3))


def _with_parent(event: dict[str, Any]) -> dict[str, Any]:
    facet = parent_run.ParentRunFacet(
        run=parent_run.Run(runId=PARENT_RUN), job=parent_run.Job(namespace=HIDDEN, name="secret_parent")
    )
    from openlineage.client.serde import Serde

    event["run"]["facets"] = {"parent": __import__("json").loads(Serde.to_json(facet))}
    return event


def _with_symlink(event: dict[str, Any], index: int) -> dict[str, Any]:
    from openlineage.client.serde import Serde

    facet = symlinks_dataset.SymlinksDatasetFacet(
        identifiers=[symlinks_dataset.Identifier(namespace=HIDDEN, name="secret_alias", type="TABLE")]
    )
    event["outputs"][index].setdefault("facets", {})["symlinks"] = __import__("json").loads(Serde.to_json(facet))
    return event


def _events() -> list[dict[str, Any]]:
    orders = dataset(
        "orders", namespace=OPEN, fields=["id", "total"], columns={"total": [(HIDDEN, "secret_src", "secret_col")]}
    )
    return [
        run_event("START", "load", LOAD_RUN, time=0, namespace=OPEN),
        _with_symlink(
            _with_parent(
                run_event(
                    "COMPLETE",
                    "load",
                    LOAD_RUN,
                    time=10,
                    namespace=OPEN,
                    inputs=[dataset("secret_src", namespace=HIDDEN, fields=["secret_col"]), dataset("raw", OPEN)],
                    outputs=[orders],
                )
            ),
            0,
        ),
        run_event(
            "COMPLETE",
            "secret_job",
            HIDDEN_RUN,
            time=20,
            namespace=HIDDEN,
            inputs=[dataset("orders", OPEN)],
            outputs=[dataset("secret_out", HIDDEN)],
        ),
        run_event("COMPLETE", "report", time=30, namespace=OPEN, inputs=[dataset("orders", OPEN)]),
        job_event("load", [dataset("raw", OPEN)], [dataset("orders", OPEN), dataset("secret_planned", HIDDEN)]),
        dataset_event(dataset("secret_declared", HIDDEN, fields=["secret_field"]), time=40),
    ]


@pytest.fixture
def consumer(store_url: str) -> Iterator[TestClient]:
    app = create_app(store_url=store_url, keys=KEYS)
    with TestClient(app) as client:
        answer = client.post("/api/v1/lineage/batch", json=_events(), headers=ADMIN)
        assert answer.status_code in (200, 201), answer.text
        tagged = client.post(f"/api/v1/namespaces/{HIDDEN}/datasets/secret_out/tags/secret_tag", headers=ADMIN)
        assert tagged.status_code in (200, 201), tagged.text
        yield client
    app.state.store.dispose()


def _first_version(client: TestClient, path: str) -> str:
    versions = client.get(path, headers=ADMIN).json()["versions"]
    assert versions, f"no versions at {path}"
    return str(versions[0]["version"])


def _path_values(client: TestClient) -> dict[str, list[str]]:
    """Values for each path parameter: visible ones (answered) and hidden ones (answered as missing)."""
    job_version = _first_version(client, f"/api/v1/namespaces/{OPEN}/jobs/load/versions")
    dataset_version = _first_version(client, f"/api/v1/namespaces/{OPEN}/datasets/orders/versions")
    return {
        "namespace": [OPEN, HIDDEN],
        "job": ["load", "secret_job"],
        "dataset": ["orders", "secret_out"],
        "id": [LOAD_RUN, HIDDEN_RUN],
        "run_id": [LOAD_RUN, HIDDEN_RUN],
        "source": [OPEN, HIDDEN],
        "name": ["app.js"],
        "node_type": ["job", "dataset"],
        "node_name": ["load", "orders", "secret_job", "secret_out"],
        "version": [job_version, dataset_version],
    }


#: Required query parameters, and values that would reach hidden data if anything leaked.
QUERY_VALUES: dict[str, list[str]] = {
    "nodeId": [f"dataset:{OPEN}:orders", f"job:{OPEN}:load", f"dataset:{HIDDEN}:secret_out"],
    "type": ["run", "job"],
    "jobNamespace": [OPEN, HIDDEN],
    "jobName": ["load", "secret_job"],
    "q": ["secret", "orders", "o"],
}


def _required_query(app: Any) -> dict[str, list[str]]:
    """Each GET path's required query parameters, from the app's OpenAPI description."""
    found: dict[str, list[str]] = {}
    for path, operations in app.openapi()["paths"].items():
        get = operations.get("get")
        if get:
            found[path] = [p["name"] for p in get.get("parameters", []) if p["in"] == "query" and p.get("required")]
    return found


def _calls(client: TestClient) -> list[str]:
    """Every GET route of the app, each with every combination of the values of its parameters."""
    values = _path_values(client)
    required = _required_query(client.app)
    calls = []
    for route in client.app.routes:  # type: ignore[attr-defined]
        if not isinstance(route, APIRoute) or "GET" not in route.methods:
            continue
        names = re.findall(r"{(\w+)(?::\w+)?}", route.path)
        unknown = [name for name in names if name not in values]
        assert not unknown, f"{route.path}: add values for its path parameters {unknown} to this test"
        paths = [route.path]
        for name in names:
            pattern = re.compile(r"{" + name + r"(?::\w+)?}")
            paths = [pattern.sub(value, path, count=1) for path in paths for value in values[name]]
        queries = required.get(re.sub(r":\w+}", "}", route.path), [])
        unknown = [name for name in queries if name not in QUERY_VALUES]
        assert not unknown, f"{route.path}: add values for its required query parameters {unknown} to this test"
        for path in paths:
            if not queries:
                calls.append(path)
                continue
            combos = [""]
            for name in queries:
                combos = [f"{c}&{name}={v}" if c else f"?{name}={v}" for c in combos for v in QUERY_VALUES[name]]
            calls += [path + combo for combo in combos]
    return calls


def test_no_get_route_names_a_hidden_namespace_or_name_to_a_limited_key(consumer: TestClient) -> None:
    # The store does hold what is hidden, and an unlimited key sees it.
    assert HIDDEN_MARKS.search(consumer.get(f"/api/v1/lineage?nodeId=job:{OPEN}:load&depth=3", headers=ADMIN).text)
    calls = _calls(consumer)
    assert len(calls) > 60, calls
    leaks, answered = [], 0
    for call in calls:
        answer = consumer.get(call, headers=LIMITED)
        assert answer.status_code < 500, f"{call}: {answer.status_code} {answer.text[:300]}"
        answered += answer.status_code == 200
        text = answer.text
        if answer.status_code != 200:  # an error may repeat what was asked, and only that
            for value in re.split(r"[/?&=]", call):
                text = text.replace(value, "") if value and len(value) > 3 else text
        found = HIDDEN_MARKS.search(text)
        if found:
            start = max(found.start() - 120, 0)
            leaks.append(f"{call} ({answer.status_code}): ...{answer.text[start : found.end() + 80]}...")
    assert answered > 35, f"only {answered} of {len(calls)} calls answered 200: the values do not reach the routes"
    assert not leaks, f"{len(leaks)} answers name hidden lineage:\n" + "\n".join(leaks)
