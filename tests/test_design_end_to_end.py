"""Design-time lineage end to end: a DAG reserialized into a real SQLite metadata database, its declared
lineage published with ``airflow-lineage publish-dags`` into an outbox and shipped to a real consumer
(``airflow-lineage serve`` on 127.0.0.1, SQLite store); then the DAG run with ``airflow dags test``, its events
through the same outbox to the same consumer; then declared and observed lineage and drift, read through the
consumer's HTTP API.

The DAG (``tests/dags/design_drift_dag.py``) gives each kind of edge: declared and observed (what ``@task.lineage``
declares plainly and a run names alike; a templated output's rendering, declared through its pattern), declared
only (the templated output's pattern: no run writes a table of that name) and observed only (a lookup an
operator's own lineage reports at run time).

Last, the DAG changes (``DESIGN_DRIFT_CHANGED``: ``summarize`` stops declaring its templated output, ``enrich`` is
removed), is reserialized and published again: a job's latest ``JobEvent`` is its declaration
(docs/declared-lineage.md), so what is no longer declared stops being declared. Those tests come last in this
file: their fixture changes what the consumer holds.
"""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
from support.airflow_run import VENV_BIN, airflow_env, dags_test
from support.environment import PRISTINE_DB, TEST_DAGS
from support.served import serve_consumer

pytestmark = pytest.mark.airflow

DAG_ID = "design_drift"
JOBS = "default"  # the stock listener's (and the publication's) job namespace when [openlineage] namespace is unset
SUMMARIZE, ENRICH = f"job:{JOBS}:{DAG_ID}.summarize", f"job:{JOBS}:{DAG_ID}.enrich"
LOOKUP = "dataset:s3://lookups:customers.csv"
LOGICAL_DATE = "2026-02-01"
OUTBOX_TRANSPORT = json.dumps({"type": "airflow_lineage_provider.outbox.OutboxTransport"})


@dataclass
class Served:
    """The consumer after publication and run, the answers read before the run, and the warehouse's namespace."""

    url: str
    warehouse: str
    before_run: list[dict[str, Any]]
    drift_before_run: dict[str, Any]
    env: dict[str, str]
    ship: list[str]

    def dataset(self, table: str) -> str:
        return f"dataset:{self.warehouse}:main.{table}"

    def get(self, path: str, **params: Any) -> dict[str, Any]:
        answer = requests.get(f"{self.url}{path}", params=params, timeout=30)
        assert answer.status_code == 200, answer.text
        return answer.json()

    def graph(self, node: str, **params: Any) -> dict[str, Any]:
        """The graph around ``node``, every rendering of a templated name drawn as itself (the edges as stored)."""
        return self.get("/api/v1/lineage", nodeId=node, depth=5, renderings="expanded", **params)

    def graphs(self, **params: Any) -> list[dict[str, Any]]:
        """The graphs around both task jobs (a walk from one does not cross to the other's lineage)."""
        return [self.graph(SUMMARIZE, **params), self.graph(ENRICH, **params)]


def _run(command: list[str], env: dict[str, str]) -> str:
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"{command} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result.stdout


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, airflow_home: Path) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("design-e2e")
    home, dags = root / "home", root / "dags"
    home.mkdir()
    dags.mkdir()
    shutil.copy(airflow_home / PRISTINE_DB, home / "airflow.db")  # no other test's DAGs
    (dags / "design_drift_dag.py").symlink_to(TEST_DAGS / "design_drift_dag.py")
    warehouse, outbox = root / "warehouse.db", f"sqlite:///{root / 'outbox.db'}"
    with closing(sqlite3.connect(warehouse)) as conn, conn:
        conn.execute("CREATE TABLE orders (id INTEGER, amount NUMERIC(10, 2))")
        conn.execute("INSERT INTO orders VALUES (1, 2.5), (2, 4.0)")
    settings = {
        "AIRFLOW_CONN_DRIFT_WAREHOUSE": f"sqlite:///{warehouse}",
        "AIRFLOW__LINEAGE_PROVIDER__OUTBOX_URL": outbox,
        "AIRFLOW__OPENLINEAGE__TRANSPORT": OUTBOX_TRANSPORT,  # the run's events: the same outbox
    }
    env = airflow_env(home, dags, settings)
    _run([str(VENV_BIN / "airflow"), "dags", "reserialize"], env)
    summary = _run([str(VENV_BIN / "airflow-lineage"), "publish-dags"], env).strip().splitlines()[-1]
    assert summary.startswith("1 DAG(s) published"), summary
    ship = [str(VENV_BIN / "airflow-lineage"), "ship", "--outbox", outbox, "--url"]
    with serve_consumer(f"sqlite:///{root / 'lineage.db'}", root / "consumer") as consumer:
        shipped = _run([*ship, consumer.url], env)
        assert "3 delivered, 0 dead-lettered" in shipped, shipped  # the DAG's job and its two tasks' jobs
        result = Served(consumer.url, f"sqlite://{warehouse}", [], {}, env, [*ship, consumer.url])
        result.before_run = result.graphs()
        result.drift_before_run = result.get("/api/v1/drift")
        run = dags_test(home, dags, DAG_ID, LOGICAL_DATE, env=settings)
        assert run.returncode == 0, run.output[-4000:]
        shipped = _run([*ship, consumer.url], env)
        # START and COMPLETE of the DAG run and of each task
        assert re.search(r": [1-9][0-9]* delivered, 0 dead-lettered, 0 to retry, 0 pending", shipped), shipped
        yield result


def _flags(graphs: list[dict[str, Any]]) -> dict[tuple[str, str], tuple[bool, bool]]:
    """``(origin, destination) → (declared, observed)`` of every edge of the graphs, checked to agree at both of
    its ends and between the graphs."""
    flags: dict[tuple[str, str], tuple[bool, bool]] = {}
    for graph in graphs:
        ends = [
            {(e["origin"], e["destination"]): (e["declared"], e["observed"]) for n in graph["graph"] for e in n[key]}
            for key in ("outEdges", "inEdges")
        ]
        assert ends[0] == ends[1], "inEdges and outEdges disagree"
        assert all(flags.get(edge, value) == value for edge, value in ends[0].items()), "the graphs disagree"
        flags.update(ends[0])
    return flags


def _nodes(graphs: list[dict[str, Any]]) -> set[str]:
    return {node["id"] for graph in graphs for node in graph["graph"]}


def _declared_only(graphs: list[dict[str, Any]]) -> set[str]:
    return {node["id"] for graph in graphs for node in graph["graph"] if node.get("declaredOnly")}


def test_before_the_run_every_edge_is_declared_only(served: Served) -> None:
    flags = _flags(served.before_run)
    assert flags == {
        (served.dataset("orders"), SUMMARIZE): (True, False),
        (SUMMARIZE, served.dataset("totals")): (True, False),
        (SUMMARIZE, served.dataset("totals_{{ ds_nodash }}")): (True, False),
        (served.dataset("orders"), ENRICH): (True, False),
        (ENRICH, served.dataset("enriched")): (True, False),
    }
    assert _declared_only(served.before_run) == _nodes(served.before_run)
    assert served.drift_before_run["totalCount"] == 2  # both tasks: nothing declared was observed yet
    not_observed = {
        job["job"]["name"]: {(e["direction"], e["name"]) for e in job["declaredNotObserved"]}
        for job in served.drift_before_run["jobs"]
    }
    assert not_observed == {
        f"{DAG_ID}.summarize": {
            ("input", "main.orders"),
            ("output", "main.totals"),
            ("output", "main.totals_{{ ds_nodash }}"),
        },
        f"{DAG_ID}.enrich": {("input", "main.orders"), ("output", "main.enriched")},
    }
    assert all(not job["observedNotDeclared"] for job in served.drift_before_run["jobs"])


def test_after_the_run_edges_are_declared_and_observed_declared_only_or_observed_only(served: Served) -> None:
    graphs = served.graphs()
    flags = _flags(graphs)
    orders, totals = served.dataset("orders"), served.dataset("totals")
    pattern, rendered = served.dataset("totals_{{ ds_nodash }}"), served.dataset("totals_20260201")
    assert flags == {
        (orders, SUMMARIZE): (True, True),
        (SUMMARIZE, totals): (True, True),
        (SUMMARIZE, pattern): (True, False),  # published as the pattern, never written under that name
        (SUMMARIZE, rendered): (True, True),  # what the run wrote, declared through the pattern
        (orders, ENRICH): (True, True),
        (ENRICH, served.dataset("enriched")): (True, True),
        (LOOKUP, ENRICH): (False, True),  # the operator's own lineage, known only at run time
    }
    assert _declared_only(graphs) == {pattern}


def test_declared_exclude_leaves_out_the_declared_only_edges_and_only_keeps_the_declared(served: Served) -> None:
    pattern, rendered = served.dataset("totals_{{ ds_nodash }}"), served.dataset("totals_20260201")
    excluded_graphs = served.graphs(declared="exclude")
    excluded = _flags(excluded_graphs)
    assert pattern not in _nodes(excluded_graphs) and rendered in _nodes(excluded_graphs)
    assert set(excluded) == {
        (served.dataset("orders"), SUMMARIZE),
        (SUMMARIZE, served.dataset("totals")),
        (SUMMARIZE, served.dataset("totals_20260201")),
        (served.dataset("orders"), ENRICH),
        (ENRICH, served.dataset("enriched")),
        (LOOKUP, ENRICH),
    }
    assert all(observed for _, observed in excluded.values())
    only_graphs = served.graphs(declared="only")
    only = _flags(only_graphs)
    assert pattern in _nodes(only_graphs) and rendered in _nodes(only_graphs) and LOOKUP not in _nodes(only_graphs)
    assert set(only) == {
        (served.dataset("orders"), SUMMARIZE),
        (SUMMARIZE, served.dataset("totals")),
        (SUMMARIZE, served.dataset("totals_{{ ds_nodash }}")),
        (SUMMARIZE, served.dataset("totals_20260201")),
        (served.dataset("orders"), ENRICH),
        (ENRICH, served.dataset("enriched")),
    }
    assert all(declared for declared, _ in only.values())


def test_drift_lists_both_directions_per_job(served: Served) -> None:
    drift = served.get("/api/v1/drift", days=30, namespace=JOBS)
    summary = {
        job["job"]["name"]: tuple(
            {(e["direction"], e["namespace"], e["name"]) for e in job[member]}
            for member in ("declaredNotObserved", "observedNotDeclared")
        )
        for job in drift["jobs"]
        if job["job"]["namespace"] == JOBS
    }
    # summarize's templated output is matched to what the run wrote (main.totals_20260201 renders
    # main.totals_{{ ds_nodash }}): neither is drift. enrich's lookup, known only at run time, is.
    assert drift["totalCount"] == 1
    assert summary == {f"{DAG_ID}.enrich": (set(), {("input", "s3://lookups", "customers.csv")})}
    (lookup,) = drift["jobs"][0]["observedNotDeclared"]
    assert lookup["declaredAt"] is None and lookup["lastObservedAt"] is not None


@pytest.fixture(scope="module")
def changed(served: Served) -> Served:
    """The consumer once the DAG changed and was reserialized, published and shipped again (see the module)."""
    env = {**served.env, "DESIGN_DRIFT_CHANGED": "1"}
    _run([str(VENV_BIN / "airflow"), "dags", "reserialize"], env)
    summary = _run([str(VENV_BIN / "airflow-lineage"), "publish-dags"], env).strip().splitlines()[-1]
    assert "1 retiring gone jobs" in summary, summary  # enrich
    shipped = _run(served.ship, env)
    assert re.search(r": [1-9][0-9]* delivered, 0 dead-lettered", shipped), shipped
    return served


def test_after_a_change_what_is_no_longer_declared_stops_being_declared(changed: Served) -> None:
    graphs = changed.graphs()
    orders, totals = changed.dataset("orders"), changed.dataset("totals")
    pattern, rendered = changed.dataset("totals_{{ ds_nodash }}"), changed.dataset("totals_20260201")
    assert _flags(graphs) == {
        (orders, SUMMARIZE): (True, True),
        (SUMMARIZE, totals): (True, True),
        (SUMMARIZE, rendered): (False, True),  # its pattern is no longer declared: observed only
        (orders, ENRICH): (False, True),  # enrich retired: what its run did stays, observed
        (ENRICH, changed.dataset("enriched")): (False, True),
        (LOOKUP, ENRICH): (False, True),
    }  # the pattern's edge, only ever declared, is gone
    assert pattern not in _nodes(graphs)
    only = _flags(changed.graphs(declared="only"))
    assert set(only) == {(orders, SUMMARIZE), (SUMMARIZE, totals)}


def test_after_a_change_drift_follows_the_latest_declaration(changed: Served) -> None:
    drift = changed.get("/api/v1/drift", days=30, namespace=JOBS)
    summary = {
        job["job"]["name"]: tuple(
            {(e["direction"], e["name"]) for e in job[member]}
            for member in ("declaredNotObserved", "observedNotDeclared")
        )
        for job in drift["jobs"]
    }
    # enrich was retired: no declaration, no drift. summarize's rendering is no longer declared through a pattern.
    assert summary == {f"{DAG_ID}.summarize": (set(), {("output", "main.totals_20260201")})}
    job = changed.get(f"/api/v1/namespaces/{JOBS}/jobs/{DAG_ID}.summarize")
    assert {d["name"] for d in job["outputs"]} == {"main.totals", "main.totals_20260201"}
