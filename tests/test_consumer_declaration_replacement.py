"""A job's latest JobEvent is its declaration (docs/declared-lineage.md), on SQLite and PostgreSQL.

What an earlier JobEvent of a job named and the latest does not is no longer declared: an edge only declared is gone
from graph answers, ``declared=only``, drift and the job's inputs and outputs; one a run observed stays, observed
and not declared. "Latest" is by event time whatever order JobEvents arrive in; a JobEvent naming no dataset (a
retired job) leaves the job no declaration. Table lineage (io groups) and column lineage follow the same rule.
Events are openlineage-python ``event_v2`` objects serialized by ``Serde`` and checked against the spec.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient
from openlineage.client.event_v2 import InputDataset, Job, JobEvent, OutputDataset
from openlineage.client.facet_v2 import column_lineage_dataset
from openlineage.client.serde import Serde
from support.consumer_helpers import PRODUCER
from support.olschema import assert_valid_event, shared_available
from test_consumer_declared import JOBS, WAREHOUSE, _when, observed
from test_consumer_templated_names import TEMPLATE, _templated

from airflow_lineage_provider.consumer import create_app
from airflow_lineage_provider.consumer.security.access import Access, ApiKey, NamespaceScope
from airflow_lineage_provider.consumer.store import create_store_engine
from airflow_lineage_provider.consumer.store.graph import walks
from airflow_lineage_provider.consumer.store.schema import tables
from airflow_lineage_provider.consumer.store.schema.migrations import migrate
from airflow_lineage_provider.consumer.store.write.ingest import ingest_events
from airflow_lineage_provider.consumer.validation import parse_event

pytest_plugins = ("support.consumer_fixtures",)

ADMIN = {"X-API-Key": "admin-secret"}
#: A key limited to the job's and the datasets' namespaces: its job listings are built for it, not cached.
LIMITED = {"X-API-Key": "limited-secret"}
KEYS = (
    ApiKey("operator", Access.ADMIN, ADMIN["X-API-Key"]),
    ApiKey("limited", Access.READ, LIMITED["X-API-Key"], NamespaceScope((JOBS, WAREHOUSE))),
)
LOAD = f"job:{JOBS}:load"


def _dataset(name: str, kind: type, columns: dict[str, list[str]] | None = None) -> Any:
    """``name`` in the warehouse (a template when it holds ``{{``); ``columns``: target field → source
    ``dataset.field`` of a columnLineage facet."""
    if "{{" in name:
        return _templated(name, kind)
    facets = {"columnLineage": column_lineage(columns)} if columns else None
    return kind(namespace=WAREHOUSE, name=name, facets=facets)


def column_lineage(columns: dict[str, list[str]]) -> column_lineage_dataset.ColumnLineageDatasetFacet:
    """A columnLineage facet: the dataset's field → source ``dataset.field``s in the warehouse."""
    fields = {
        target: column_lineage_dataset.Fields(
            inputFields=[
                column_lineage_dataset.InputField(namespace=WAREHOUSE, name=s.split(".")[0], field=s.split(".")[1])
                for s in sources
            ],
            transformationDescription="",
            transformationType="",
        )
        for target, sources in columns.items()
    }
    return column_lineage_dataset.ColumnLineageDatasetFacet(fields=fields)


def declared(
    inputs: list[str], outputs: list[str], days_ago: float, columns: dict[str, dict[str, list[str]]] | None = None
) -> dict[str, Any]:
    """A JobEvent of ``load``; ``columns``: output → its columnLineage (target field → sources)."""
    event = JobEvent(
        eventTime=_when(days_ago),
        job=Job(namespace=JOBS, name="load"),
        producer=PRODUCER,
        inputs=[_dataset(name, InputDataset) for name in inputs],
        outputs=[_dataset(name, OutputDataset, (columns or {}).get(name)) for name in outputs],
    )
    data = json.loads(Serde.to_json(event))
    if shared_available():
        assert_valid_event(data)
    return data


@pytest.fixture
def consumer(store_url: str) -> Iterator[TestClient]:
    app = create_app(store_url=store_url, keys=KEYS)
    with TestClient(app) as client:
        yield client
    app.state.store.dispose()


def _post(client: TestClient, *events: dict[str, Any]) -> None:
    for event in events:  # one request each: declarations are replaced across requests
        answer = client.post("/api/v1/lineage", json=event, headers=ADMIN)
        assert answer.status_code in (200, 201), answer.text


def _get(client: TestClient, path: str, **params: Any) -> dict[str, Any]:
    answer = client.get(path, params=params, headers=ADMIN)
    assert answer.status_code == 200, answer.text
    return answer.json()


def _edges(client: TestClient, **params: Any) -> dict[str, tuple[bool, bool]]:
    """``dataset name → (declared, observed)`` of every edge at ``load`` in its graph."""
    graph = _get(client, "/api/v1/lineage", nodeId=LOAD, depth=1, **params)
    found = {}
    for node in graph["graph"]:
        for edge in node["outEdges"]:
            if LOAD in (edge["origin"], edge["destination"]):
                other = edge["destination"] if edge["origin"] == LOAD else edge["origin"]
                found[other.rsplit(":", 1)[1]] = (edge["declared"], edge["observed"])
    return found


def _job_io(client: TestClient) -> tuple[set[str], set[str]]:
    job = _get(client, f"/api/v1/namespaces/{JOBS}/jobs/load")
    return {d["name"] for d in job["inputs"]}, {d["name"] for d in job["outputs"]}


def _drift(client: TestClient) -> dict[str, tuple[set[str], set[str]]]:
    body = _get(client, "/api/v1/drift", days=7)
    return {
        job["job"]["name"]: tuple(  # type: ignore[misc]
            {f"{e['direction']} {e['name']}" for e in job[member]}
            for member in ("declaredNotObserved", "observedNotDeclared")
        )
        for job in body["jobs"]
    }


@pytest.mark.parametrize("order", ["in order", "latest first"])
def test_the_latest_jobevent_is_the_declaration_whatever_order_they_arrive_in(consumer: TestClient, order: str) -> None:
    first = declared(["src"], ["balances", "balances_audit"], days_ago=3)
    latest = declared(["src"], ["balances"], days_ago=2)
    _post(consumer, *([first, latest] if order == "in order" else [latest, first]))
    assert _edges(consumer) == {"src": (True, False), "balances": (True, False)}  # balances_audit gone
    assert _edges(consumer, declared="only") == {"src": (True, False), "balances": (True, False)}
    assert _job_io(consumer) == ({"src"}, {"balances"})
    assert _drift(consumer) == {"load": ({"input src", "output balances"}, set())}
    # The dataset only the earlier JobEvent named is gone from listings, search and the namespace graph.
    assert {d["name"] for d in _get(consumer, f"/api/v1/namespaces/{WAREHOUSE}/datasets")["datasets"]} == {
        "src",
        "balances",
    }
    assert _get(consumer, "/api/v1/search", q="balances_audit")["totalCount"] == 0
    assert f"dataset:{WAREHOUSE}:balances_audit" not in {n["id"] for n in _get(consumer, "/api/v1/graph")["nodes"]}
    assert len(_get(consumer, "/api/v1/events", limit=10)["events"]) == 2  # both JobEvents stay stored


def test_two_jobevents_of_one_batch_leave_the_later_one(consumer: TestClient) -> None:
    events = [declared(["src"], ["latest_out"], days_ago=1), declared(["src"], ["earlier_out"], days_ago=2)]
    answer = consumer.post("/api/v1/lineage/batch", json=events, headers=ADMIN)
    assert answer.status_code in (200, 201, 207), answer.text
    assert _edges(consumer) == {"src": (True, False), "latest_out": (True, False)}


def test_an_observed_edge_no_longer_declared_stays_observed_and_drifts(consumer: TestClient) -> None:
    _post(
        consumer,
        declared(["src"], ["balances", "balances_audit"], days_ago=3),
        observed("load", ["warehouse.src"], ["warehouse.balances", "warehouse.balances_audit"], days_ago=2.5),
        declared(["src"], ["balances"], days_ago=2),
    )
    assert _edges(consumer) == {"src": (True, True), "balances": (True, True), "balances_audit": (False, True)}
    assert "balances_audit" not in _edges(consumer, declared="only")
    assert _drift(consumer) == {"load": (set(), {"output balances_audit"})}
    # Declared again later: declared again.
    _post(consumer, declared(["src"], ["balances", "balances_audit"], days_ago=1))
    assert _edges(consumer)["balances_audit"] == (True, True)
    assert _drift(consumer) == {}


def test_a_retired_job_has_no_declaration(consumer: TestClient) -> None:
    _post(
        consumer,
        declared(["src"], ["planned"], days_ago=3),
        observed("load", ["warehouse.src"], ["warehouse.done"], days_ago=2.5),
    )
    assert _drift(consumer) == {"load": ({"output planned"}, {"output done"})}
    _post(consumer, declared([], [], days_ago=2))  # what publish-dags sends for a removed task
    assert _edges(consumer) == {"src": (False, True), "done": (False, True)}  # planned: only declared, gone
    assert _drift(consumer) == {}  # no declaration, no drift
    assert _job_io(consumer) == ({"src"}, {"done"})
    # An older JobEvent arriving late does not bring the declaration back.
    _post(consumer, declared(["src"], ["planned"], days_ago=4))
    assert _edges(consumer) == {"src": (False, True), "done": (False, True)}
    assert _drift(consumer) == {}


def _listed(client: TestClient, path: str, headers: dict[str, str]) -> dict[str, tuple[set[str], set[str]]]:
    """``job name → (input names, output names)`` of every job a job listing shows."""
    answer = client.get(path, headers=headers)
    assert answer.status_code == 200, answer.text
    return {
        job["name"]: ({d["name"] for d in job["inputs"]}, {d["name"] for d in job["outputs"]})
        for job in answer.json()["jobs"]
    }


@pytest.mark.parametrize("headers", [ADMIN, LIMITED], ids=["every-namespace", "namespace-limited"])
def test_job_listings_follow_the_declaration_and_a_retired_job_lists_nothing(
    consumer: TestClient, headers: dict[str, str]
) -> None:
    """``GET /api/v1/jobs`` and ``/api/v1/namespaces/{ns}/jobs``, each read before the declaration changes (a
    listing for every namespace keeps the Jobs it built) and after."""
    listings = ("/api/v1/jobs", f"/api/v1/namespaces/{JOBS}/jobs")
    _post(consumer, declared(["src"], ["balances", "balances_audit"], days_ago=3))
    for path in listings:
        assert _listed(consumer, path, headers) == {"load": ({"src"}, {"balances", "balances_audit"})}
    _post(consumer, declared(["src"], ["balances"], days_ago=2))
    for path in listings:
        assert _listed(consumer, path, headers) == {"load": ({"src"}, {"balances"})}, path
    _post(consumer, declared([], [], days_ago=1))  # retired
    for path in listings:
        assert _listed(consumer, path, headers) == {"load": (set(), set())}, path
    # An older JobEvent arriving late does not bring the outputs back.
    _post(consumer, declared(["src"], ["balances"], days_ago=4))
    for path in listings:
        assert _listed(consumer, path, headers) == {"load": (set(), set())}, path


def test_a_removed_template_takes_its_renderings_declaration_with_it(consumer: TestClient) -> None:
    _post(
        consumer,
        declared([], [TEMPLATE], days_ago=3),
        observed("load", [], ["warehouse.totals_20260201"], days_ago=2.5),
    )
    assert _drift(consumer) == {}  # the rendering realises the template
    assert _edges(consumer) == {TEMPLATE: (True, True)}  # drawn as the pattern's node by default
    _post(consumer, declared([], ["summary"], days_ago=2))
    # No declaration names the pattern any more: its rendering is drawn as itself, observed and not declared,
    # whether renderings are collapsed (the default) or expanded.
    after = {"summary": (True, False), "totals_20260201": (False, True)}
    assert _edges(consumer) == _edges(consumer, renderings="expanded") == after
    assert _drift(consumer) == {"load": ({"output summary"}, {"output totals_20260201"})}
    # Declared again: the stored rendering is matched again.
    _post(consumer, declared([], [TEMPLATE], days_ago=1))
    assert _drift(consumer) == {}


def _io_groups(client: TestClient) -> dict[frozenset[str], tuple[bool, bool]]:
    """``names of the group's datasets → (declared, observed)`` of every io group."""
    g, m, n = tables.io_groups, tables.io_members, tables.nodes
    query = sa.select(g.c.id, g.c.declared_at, g.c.observed_at, n.c.name).select_from(
        g.join(m, m.c.group_id == g.c.id).join(n, n.c.id == m.c.dataset_id)
    )
    found: dict[int, tuple[set[str], bool, bool]] = {}
    with client.app.state.store.read() as conn:  # type: ignore[attr-defined]
        for group, declared_at, observed_at, name in conn.execute(query):
            found.setdefault(group, (set(), declared_at is not None, observed_at is not None))[0].add(name)
    return {frozenset(names): (d, o) for names, d, o in found.values()}


def test_table_lineage_says_declared_or_observed_and_follows_the_declaration(consumer: TestClient) -> None:
    _post(
        consumer,
        declared(["src"], ["a", "b"], days_ago=3),
        observed("load", ["warehouse.src"], ["warehouse.a"], days_ago=2.5),
    )
    assert _io_groups(consumer) == {
        frozenset({"src", "a", "b"}): (True, False),
        frozenset({"src", "a"}): (False, True),
    }
    _post(consumer, declared(["src"], ["a"], days_ago=2))
    assert _io_groups(consumer) == {frozenset({"src", "a"}): (True, True)}  # the declared-only group is gone
    with consumer.app.state.store.read() as conn:  # type: ignore[attr-defined]
        members = conn.execute(sa.select(sa.func.count()).select_from(tables.io_members)).scalar()
    assert members == 2


def _table_walk(client: TestClient, start: str, direction: walks.Direction, declared: walks.Declared) -> set[str]:
    """Names of the datasets a table-lineage walk (dataset → dataset through io groups) from ``start`` reaches,
    crossing the io groups ``declared`` keeps."""
    n = tables.nodes.c
    bounds = walks.WalkBounds(hops=3, max_nodes=100, declared=declared)
    with client.app.state.store.read() as conn:  # type: ignore[attr-defined]
        root = conn.execute(sa.select(n.id).where(n.kind == "dataset", n.name == start)).scalar_one()
        reached = walks.walk_nodes(conn, walks.DATASET_EDGES[direction], [root], bounds)
        names = dict(conn.execute(sa.select(n.id, n.name).where(n.id.in_(list(reached)))).all())
    return {names[node] for node in reached} - {start}


def test_table_lineage_walks_follow_the_declaration(consumer: TestClient) -> None:
    """``load`` declared src → {a, b, c}, a run of it wrote b, then it declared src → a: the group of the replaced
    declaration is gone (c with it), ``declared=only`` crosses only the new one, ``declared=exclude`` only b's."""
    _post(
        consumer,
        declared(["src"], ["a", "b", "c"], days_ago=3),
        observed("load", ["warehouse.src"], ["warehouse.b"], days_ago=2.5),
    )
    walked = {mode: _table_walk(consumer, "src", "downstream", mode) for mode in ("include", "only", "exclude")}
    assert walked == {"include": {"a", "b", "c"}, "only": {"a", "b", "c"}, "exclude": {"b"}}
    assert _table_walk(consumer, "b", "upstream", "only") == {"src"}
    _post(consumer, declared(["src"], ["a"], days_ago=2))
    walked = {mode: _table_walk(consumer, "src", "downstream", mode) for mode in ("include", "only", "exclude")}
    assert walked == {"include": {"a", "b"}, "only": {"a"}, "exclude": {"b"}}
    upstream = {mode: _table_walk(consumer, "b", "upstream", mode) for mode in ("include", "only", "exclude")}
    assert upstream == {"include": {"src"}, "only": set(), "exclude": {"src"}}  # b's group is observed, not declared
    assert _table_walk(consumer, "a", "upstream", "exclude") == set()  # a's group is only declared


def _column_links(client: TestClient) -> dict[str, tuple[bool, bool]]:
    """``source.field>target.field → (declared, observed)`` of every column edge."""
    with client.app.state.store.read() as conn:  # type: ignore[attr-defined]
        return column_links_on(conn)


def column_links_on(conn: sa.Connection) -> dict[str, tuple[bool, bool]]:
    """:func:`_column_links` read on ``conn``."""
    c, f, s, t = tables.column_edges, tables.fields, tables.nodes.alias("s"), tables.nodes.alias("t")
    sf, tf = f.alias("sf"), f.alias("tf")
    query = sa.select(s.c.name, sf.c.name, t.c.name, tf.c.name, c.c.declared_at, c.c.observed_at).select_from(
        c.join(sf, sf.c.id == c.c.source_field_id)
        .join(tf, tf.c.id == c.c.target_field_id)
        .join(s, s.c.id == sf.c.dataset_id)
        .join(t, t.c.id == tf.c.dataset_id)
    )
    return {f"{a}.{b}>{x}.{y}": (d is not None, o is not None) for a, b, x, y, d, o in conn.execute(query)}


def test_column_lineage_follows_the_declaration(consumer: TestClient) -> None:
    _post(consumer, declared(["src"], ["out"], days_ago=3, columns={"out": {"total": ["src.amount", "src.tax"]}}))
    assert _column_links(consumer) == {"src.amount>out.total": (True, False), "src.tax>out.total": (True, False)}
    field = f"datasetField:{WAREHOUSE}:out:total"
    shown = _get(consumer, "/api/v1/column-lineage", nodeId=field, depth=2)
    assert {node["id"] for node in shown["graph"]} >= {f"datasetField:{WAREHOUSE}:src:tax"}
    edges = {(e["origin"], e["declared"], e["observed"]) for node in shown["graph"] for e in node["inEdges"]}
    assert edges == {(f"datasetField:{WAREHOUSE}:src:{f}", True, False) for f in ("amount", "tax")}
    only_observed = _get(consumer, "/api/v1/column-lineage", nodeId=field, depth=2, declared="exclude")
    assert [node["id"] for node in only_observed["graph"]] == [field]  # the walk crosses no declared-only link
    _post(consumer, declared(["src"], ["out"], days_ago=2, columns={"out": {"total": ["src.amount"]}}))
    assert _column_links(consumer) == {"src.amount>out.total": (True, False)}
    shown = _get(consumer, "/api/v1/column-lineage", nodeId=field, depth=2)
    assert f"datasetField:{WAREHOUSE}:src:tax" not in {node["id"] for node in shown["graph"]}


def test_a_version_11_store_keeps_only_each_job_s_latest_declaration(store_url: str) -> None:
    """Version 9 to 11 kept an edge declared by any JobEvent; the upgrade leaves only the latest's."""
    from test_consumer_store import back_to_version

    engine = create_store_engine(store_url)
    try:
        migrate(engine)
        with engine.begin() as conn:
            old = declared(["src"], ["balances", "balances_audit"], days_ago=3)
            assert ingest_events(conn, [parse_event(old)]).stored == 1
            stored = {t: conn.execute(sa.select(t)).mappings().all() for t in (tables.edges, tables.nodes)}
            new = declared(["src"], ["balances"], days_ago=2)
            assert ingest_events(conn, [parse_event(new)]).stored == 1
            # As version 11 left it: the edge the earlier JobEvent declared kept, declared at that event's time.
            conn.execute(tables.edges.delete())
            conn.execute(tables.edges.insert(), [dict(row) for row in stored[tables.edges]])
            kept = set(conn.execute(sa.select(tables.nodes.c.id)).scalars())
            lost = [dict(row) for row in stored[tables.nodes] if row["id"] not in kept]
            assert [row["name"] for row in lost] == ["balances_audit"]
            conn.execute(tables.nodes.insert(), lost)
            moved = (
                tables.edges.update().values(declared_at=_parsed(new)).where(tables.edges.c.declared_at.is_not(None))
            )
            conn.execute(moved.where(tables.edges.c.destination_id != _node_id(conn, "balances_audit")))
            back_to_version(conn, 11)
        migrate(engine)
        with engine.connect() as conn:
            names = {
                name
                for (name,) in conn.execute(
                    sa.select(tables.nodes.c.name).join(
                        tables.edges,
                        sa.or_(
                            tables.edges.c.origin_id == tables.nodes.c.id,
                            tables.edges.c.destination_id == tables.nodes.c.id,
                        ),
                    )
                )
            }
            declarations = conn.execute(sa.select(tables.job_declarations)).mappings().all()
            datasets = set(
                conn.execute(sa.select(tables.nodes.c.name).where(tables.nodes.c.kind == "dataset")).scalars()
            )
        assert names == {"src", "balances", "load"}
        assert datasets == {"src", "balances"}  # balances_audit, only ever declared by the earlier JobEvent, is gone
        assert [(row["event_key"], row["empty"]) for row in declarations] == [(parse_event(new).key, 0)]
    finally:
        engine.dispose()


def _parsed(event: dict[str, Any]) -> Any:
    return parse_event(event).event_time + timedelta(0)


def _node_id(conn: sa.Connection, name: str) -> int:
    return conn.execute(sa.select(tables.nodes.c.id).where(tables.nodes.c.name == name)).scalar_one()
