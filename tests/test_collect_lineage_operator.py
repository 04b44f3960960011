"""CollectLineageOperator under ``airflow dags test`` (a subprocess with its own AIRFLOW_HOME): one row per
edge, bounds and lookback per direction, failed columns from a list or a table, and never a failed task."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import sqlalchemy as sa
from support.airflow_run import dags_test, migrate
from support.consumer_helpers import dataset, run_event

from airflow_lineage_provider.consumer.store import LineageStore
from airflow_lineage_provider.consumer.store.write.ingest import ingest_events
from airflow_lineage_provider.consumer.validation import parse_event
from airflow_lineage_provider.operators.collect_lineage import LineageSearch

DAGS = Path(__file__).parent / "dags"
NS = "warehouse"


def _columns(**mapping: list[tuple[str, str]]) -> dict:
    return {target: [(NS, ds, field) for ds, field in sources] for target, sources in mapping.items()}


def _lineage_events() -> list[dict]:
    now = datetime.now(timezone.utc)
    recent = [
        run_event(
            "COMPLETE",
            "clean_orders",
            inputs=[dataset("raw.orders")],
            outputs=[
                dataset(
                    "staging.orders",
                    fields=["id", "amount"],
                    columns=_columns(id=[("raw.orders", "id")], amount=[("raw.orders", "amount_cents")]),
                )
            ],
        ),
        run_event("COMPLETE", "load_raw", inputs=[dataset("source.api")], outputs=[dataset("raw.orders")]),
        run_event(
            "COMPLETE",
            "revenue",
            inputs=[dataset("staging.orders")],
            outputs=[dataset("mart.revenue", fields=["total"], columns=_columns(total=[("staging.orders", "amount")]))],
        ),
        run_event(
            "COMPLETE",
            "join",
            inputs=[dataset("staging.orders"), dataset("staging.customers")],
            outputs=[
                dataset(
                    "mart.customer_orders",
                    fields=["amount", "name"],
                    columns=_columns(amount=[("staging.orders", "amount")], name=[("staging.customers", "name")]),
                )
            ],
        ),
    ]
    events = [{**event, "eventTime": (now - timedelta(hours=1)).isoformat()} for event in recent]
    old = run_event("COMPLETE", "archive", inputs=[dataset("staging.orders")], outputs=[dataset("legacy.archive")])
    return [*events, {**old, "eventTime": "2020-01-01T00:00:00Z"}]


@pytest.mark.airflow
def test_collect_lineage_operator_in_a_real_dag(tmp_path: Path) -> None:
    store_path, warehouse = tmp_path / "lineage.db", tmp_path / "warehouse.db"
    store = LineageStore(f"sqlite:///{store_path}")
    with store.write() as conn:
        ingest_events(conn, [parse_event(e) for e in _lineage_events()])
    store.dispose()
    engine = sa.create_engine(f"sqlite:///{warehouse}")
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE dq_failures (column_name TEXT, rule TEXT)")
        conn.exec_driver_sql(
            "INSERT INTO dq_failures VALUES ('amount', 'not_null'), ('amount', 'positive'), (NULL, 'x')"
        )
        # Issues without a run id count as this run's; those of another check run do not.
        conn.exec_driver_sql("CREATE TABLE dq_output (id INTEGER, _errors TEXT, _warnings TEXT)")
        conn.execute(
            sa.text("INSERT INTO dq_output VALUES (1, :errors, :warnings), (2, NULL, NULL)"),
            {
                "errors": json.dumps([{"name": "positive", "columns": ["amount"], "run_id": None}]),
                "warnings": json.dumps([{"name": "not_null", "columns": ["id"], "run_id": "another-check-run"}]),
            },
        )
    home, results = tmp_path / "airflow", tmp_path / "results.json"
    migrate(home)
    env = {
        "AIRFLOW_CONN_LINEAGE_STORE": f"sqlite:///{store_path}",
        "AIRFLOW_CONN_WAREHOUSE": f"sqlite:///{warehouse}",
        "AIRFLOW_CONN_BROKEN_WAREHOUSE": f"sqlite:///{tmp_path / 'missing' / 'dir' / 'x.db'}",
        "COLLECT_LINEAGE_RESULTS": str(results),
    }
    run = dags_test(home, DAGS, "collect_lineage_dag", env=env)
    assert run.returncode == 0, run.output[-4000:]
    outcome = json.loads(results.read_text())

    listed = outcome["collect_from_list"]
    assert listed["status"] == "ok", listed
    assert listed["counts"] == {"upstream": 2, "downstream": 2, "column_upstream": 1, "column_downstream": 2}
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT run_id, source_table, edge_type, depth, target_table, source_column, target_column "
                "FROM lineage_edges"
            )
        ).all()
    assert {row.run_id for row in rows} == {rows[0].run_id} and rows[0].run_id
    assert {row.source_table for row in rows} == {"staging.orders"}
    assert {tuple(row)[2:] for row in rows} == {
        ("upstream", 1, "raw.orders", None, None),
        ("upstream", 2, "source.api", None, None),
        ("downstream", 1, "mart.revenue", None, None),
        ("downstream", 1, "mart.customer_orders", None, None),  # legacy.archive: older than lookback
        ("column_upstream", 1, "raw.orders", "amount_cents", "amount"),
        ("column_downstream", 1, "mart.revenue", "amount", "total"),
        ("column_downstream", 1, "mart.customer_orders", "amount", "amount"),
    }

    from_table = outcome["collect_from_table"]
    assert from_table["status"] == "ok" and from_table["rows"] == 5
    with engine.connect() as conn:
        table_rows = conn.execute(
            sa.text("SELECT edge_type, target_table, source_column FROM lineage_edges_from_table")
        ).all()
    assert ("downstream", "legacy.archive", None) in table_rows  # lookback disabled
    assert {r.source_column for r in table_rows if r.edge_type == "column_downstream"} == {"amount"}

    from_results = outcome["collect_from_results"]
    assert from_results["status"] == "ok" and from_results["rows"] == 1, from_results
    with engine.connect() as conn:
        result_rows = conn.execute(
            sa.text(
                "SELECT edge_type, depth, target_table, source_column, target_column FROM lineage_edges_from_results"
            )
        ).all()
    assert [tuple(row) for row in result_rows] == [("column_upstream", 1, "raw.orders", "amount_cents", "amount")]

    broken = outcome["collect_broken_output"]
    assert broken["status"] == "error" and broken["rows"] == 0
    assert "unable to open database file" in broken["errors"][0]


def test_search_bounds_are_checked_with_a_clear_message() -> None:
    with pytest.raises(ValueError, match=r"depth must be an integer >= 1 or None \(unbounded\), got 0"):
        LineageSearch(depth=0)
    with pytest.raises(ValueError, match=r"depth must be an integer >= 1 or None .*, got '3'"):
        LineageSearch(depth="3")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_nodes must be an integer >= 1, got 0"):
        LineageSearch(max_nodes=0)
    with pytest.raises(ValueError, match="max_nodes must be an integer >= 1, got True"):
        LineageSearch(max_nodes=True)
    with pytest.raises(ValueError, match=r"lookback_days must be a number of days > 0 .*, got -1"):
        LineageSearch(lookback_days=-1)
    with pytest.raises(ValueError, match=r"lookback_days .*, got nan"):
        LineageSearch(lookback_days=float("nan"))


def test_search_defaults_are_dqxs_and_depth_may_be_unbounded() -> None:
    assert (LineageSearch().depth, LineageSearch().max_nodes) == (100, 100)
    assert LineageSearch(depth=None).depth is None


def test_a_missing_source_dataset_is_reported_not_raised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_lineage_provider.operators.collect_lineage import CollectLineageOperator

    url = f"sqlite:///{tmp_path / 'empty.db'}"
    LineageStore(url).engine  # noqa: B018 - create the tables
    monkeypatch.setenv("AIRFLOW__LINEAGE_PROVIDER__CONSUMER_STORE_URL", url)  # no lineage_conn_id: the plugin's store
    operator = CollectLineageOperator(
        task_id="collect", source_namespace="warehouse", source_name="nope", output_table="t", output_conn_id="unused"
    )
    result = operator.execute({"run_id": "manual"})
    assert result["status"] == "partial" and result["rows"] == 0
    assert "not in the lineage store" in result["errors"][0]
