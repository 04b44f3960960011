"""The version 12 upgrade and table and column lineage a superseded JobEvent named, on SQLite and PostgreSQL.

Versions 9 to 11 kept an io group and a column edge once any event named them, without saying whether a JobEvent or
a run did. The upgrade works out which: a group of a job with JobEvents is observed only when its job's edges to
each of its datasets were observed (version 9 derived those from the runs), a column edge only when a run named its
target dataset; a column edge a DatasetEvent names is declared. What is left neither declared nor observed (named
only by a superseded JobEvent, as a wrong publication leaves) goes, with the datasets only it named.
"""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa
from openlineage.client.event_v2 import DatasetEvent, StaticDataset
from openlineage.client.serde import Serde
from support.consumer_helpers import PRODUCER
from support.olschema import assert_valid_event, shared_available
from test_consumer_declaration_replacement import column_lineage, column_links_on, declared
from test_consumer_declared import WAREHOUSE, _when, observed

from airflow_lineage_provider.consumer.store import create_store_engine
from airflow_lineage_provider.consumer.store.schema import tables
from airflow_lineage_provider.consumer.store.schema.migrations import migrate
from airflow_lineage_provider.consumer.store.write.ingest import ingest_events
from airflow_lineage_provider.consumer.validation import parse_event

pytest_plugins = ("support.consumer_fixtures",)

#: The tables whose rows a replaced declaration deletes, which version 11 kept.
KEPT_BY_VERSION_11 = (
    tables.nodes,
    tables.datasets,
    tables.fields,
    tables.node_producers,
    tables.edges,
    tables.io_groups,
    tables.io_members,
    tables.column_edges,
)


def _with_column_lineage(event: dict[str, Any], output: str, columns: dict[str, list[str]]) -> dict[str, Any]:
    """``event`` (a RunEvent) with ``columns`` as the columnLineage of its output ``output``."""
    facet = json.loads(Serde.to_json(column_lineage(columns)))
    for dataset in event["outputs"]:
        if dataset["name"] == output:
            dataset.setdefault("facets", {})["columnLineage"] = facet
    if shared_available():
        assert_valid_event(event)
    return event


def _dataset_event(name: str, columns: dict[str, list[str]], days_ago: float) -> dict[str, Any]:
    event = DatasetEvent(
        eventTime=_when(days_ago),
        producer=PRODUCER,
        dataset=StaticDataset(namespace=WAREHOUSE, name=name, facets={"columnLineage": column_lineage(columns)}),
    )
    data = json.loads(Serde.to_json(event))
    if shared_available():
        assert_valid_event(data)
    return data


def _rows(conn: sa.Connection, table: sa.Table) -> dict[tuple[Any, ...], dict[str, Any]]:
    keys = list(table.primary_key.columns)
    return {tuple(row[k.name] for k in keys): dict(row) for row in conn.execute(sa.select(table)).mappings()}


def _groups(conn: sa.Connection) -> dict[tuple[str, frozenset[str]], tuple[bool, bool]]:
    """``(job, its datasets as "direction name") → (declared, observed)`` of every io group."""
    g, m, n = tables.io_groups, tables.io_members, tables.nodes
    job, member = n.alias("job"), n.alias("member")
    found: dict[int, tuple[str, set[str], bool, bool]] = {}
    query = sa.select(g.c.id, job.c.name, g.c.declared_at, g.c.observed_at, m.c.direction, member.c.name).select_from(
        g.join(job, job.c.id == g.c.job_id).join(m, m.c.group_id == g.c.id).join(member, member.c.id == m.c.dataset_id)
    )
    for group, job_name, declared_at, observed_at, direction, name in conn.execute(query):
        found.setdefault(group, (job_name, set(), declared_at is not None, observed_at is not None))[1].add(
            f"{direction} {name}"
        )
    return {(name, frozenset(members)): (d, o) for name, members, d, o in found.values()}


def test_the_upgrade_drops_table_and_column_lineage_only_a_superseded_jobevent_named(store_url: str) -> None:
    from test_consumer_store import back_to_version

    wrong = declared(
        ["src"],
        ["balances", "balances_audit"],
        days_ago=3,
        columns={"balances": {"total": ["src.amount"]}, "balances_audit": {"total": ["src.amount", "src.tax"]}},
    )
    right = declared(["src"], ["balances"], days_ago=2, columns={"balances": {"total": ["src.amount"]}})
    ran = _with_column_lineage(
        observed("load", ["src"], ["balances"], days_ago=1), "balances", {"total": ["src.amount"]}
    )
    copied = _with_column_lineage(
        observed("copy", ["src"], ["mirror"], days_ago=1), "mirror", {"amount": ["src.amount"]}
    )
    reported = _dataset_event("report", {"x": ["src.tax"]}, days_ago=1)
    engine = create_store_engine(store_url)
    try:
        migrate(engine)
        with engine.begin() as conn:
            # The runs and the DatasetEvent first, so that the replacement makes no node and no field: SQLite
            # gives a new row the id of a deleted one, which would leave the rows put back below pointing elsewhere.
            for event in (ran, copied, reported, wrong):
                assert ingest_events(conn, [parse_event(event)]).stored == 1
            before = {table: _rows(conn, table) for table in KEPT_BY_VERSION_11}
            assert ingest_events(conn, [parse_event(right)]).stored == 1
            assert "src.tax>balances_audit.total" not in column_links_on(conn)  # today's ingest replaced it
            # As version 11 left it: what the superseded JobEvent named is still there.
            for table, rows in before.items():
                kept = _rows(conn, table)
                gone = [row for key, row in rows.items() if key not in kept]
                if gone:
                    conn.execute(table.insert(), gone)
            back_to_version(conn, 11)
        migrate(engine)
        with engine.connect() as conn:
            datasets = set(
                conn.execute(sa.select(tables.nodes.c.name).where(tables.nodes.c.kind == "dataset")).scalars()
            )
            links = column_links_on(conn)
            groups = _groups(conn)
    finally:
        engine.dispose()
    assert datasets == {"src", "balances", "mirror", "report"}  # balances_audit went with what named it
    assert links == {
        "src.amount>balances.total": (True, True),  # declared by the latest JobEvent and seen by a run after it
        "src.amount>mirror.amount": (False, True),  # a run's, of a job never declared
        "src.tax>report.x": (True, False),  # a DatasetEvent's
    }
    assert groups == {
        ("load", frozenset({"input src", "output balances"})): (True, True),
        ("copy", frozenset({"input src", "output mirror"})): (False, True),
    }
