"""CollectLineageOperator reading failed columns from data-quality results in DQX's shape, on real SQLite and
PostgreSQL tables: issue structs in ``_errors`` / ``_warnings`` from three runs (one issue without a run id),
output-only, quarantine-only and both; every PostgreSQL storage (jsonb, json, composite array, JSON text);
missing tables, columns and unreadable values as ``partial``; overwrite vs append; sanitised logs."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url
from support.consumer_helpers import dataset, run_event
from support.environment import PG_URL, postgres_schema_url

from airflow_lineage_provider.consumer.store import LineageStore
from airflow_lineage_provider.consumer.store.write.ingest import ingest_events
from airflow_lineage_provider.consumer.validation import parse_event
from airflow_lineage_provider.operators.collect_lineage import CollectLineageOperator, LineageSearch
from airflow_lineage_provider.operators.dq_results import read_failed_columns

NS = "warehouse"
CURRENT = "run-a"


def _issue(columns: list[str], run_id: str | None, name: str = "check") -> dict[str, Any]:
    return {"name": name, "message": f"{name} failed", "columns": columns, "filter": None, "run_id": run_id}


#: Output-table rows as (_errors, _warnings): issues of the current run, of two earlier runs, and one
#: without a run id (it counts as the current run's).
OUTPUT_ROWS: list[tuple[list[dict[str, Any]] | None, list[dict[str, Any]] | None]] = [
    ([_issue(["amount"], CURRENT)], [_issue(["discount"], "run-b")]),
    ([_issue(["customer_id", "amount"], "run-b")], [_issue(["note"], None)]),
    (None, [_issue(["email"], "run-c"), _issue(["status"], CURRENT)]),
    ([], None),
]
QUARANTINE_ROWS = [([_issue(["quantity", "amount"], CURRENT)], None), ([_issue(["sku"], "run-c")], [])]
OUTPUT_FAILED = ["amount", "note", "status"]
QUARANTINE_FAILED = ["amount", "quantity"]


class ResultsDb:
    """A results database: where tables go (``prefix``), its URL, and how to create a results table."""

    def __init__(self, url: str, prefix: str = "") -> None:
        self.url, self.prefix = url, prefix
        self.engine = sa.create_engine(url)

    @property
    def is_postgres(self) -> bool:
        return self.engine.dialect.name == "postgresql"

    def results_table(self, name: str, rows: list[tuple[Any, Any]], storage: str = "json", columns: tuple = ()) -> str:
        """Create ``name`` with ``_errors``/``_warnings`` stored as ``storage`` and fill it; its qualified name."""
        qualified = f"{self.prefix}{name}"
        issue_columns = columns or ("_errors", "_warnings")
        sql_type = {"json": "TEXT", "jsonb": "jsonb", "pgjson": "json", "text": "text", "composite": "dq_issue[]"}
        with self.engine.begin() as conn:
            if storage == "composite":
                conn.exec_driver_sql(
                    f"CREATE TYPE {self.prefix}dq_issue AS (name text, message text, columns text[], filter text, "
                    "run_id text)"
                )
                kind = f"{self.prefix}dq_issue[]"
            else:
                kind = sql_type[storage]
            defined = ", ".join(f'"{c}" {kind}' for c in issue_columns)
            conn.exec_driver_sql(f"CREATE TABLE {qualified} (id INTEGER, {defined})")
            for index, row in enumerate(rows):
                values = dict(zip(issue_columns, row, strict=False))
                conn.execute(
                    sa.text(
                        f"INSERT INTO {qualified} VALUES (:id, {', '.join(self._value(c, storage) for c in values)})"
                    ),
                    {"id": index, **{c: self._bind(v, storage) for c, v in values.items()}},
                )
        return qualified

    def _value(self, column: str, storage: str) -> str:
        if storage == "composite":
            return (
                "(SELECT array_agg(ROW(i->>'name', i->>'message', "
                "ARRAY(SELECT jsonb_array_elements_text(i->'columns')), i->>'filter', i->>'run_id')"
                f"::{self.prefix}dq_issue) FROM jsonb_array_elements(CAST(:{column} AS jsonb)) i)"
            )
        if storage in ("jsonb", "pgjson"):
            return f"CAST(:{column} AS {'jsonb' if storage == 'jsonb' else 'json'})"
        return f":{column}"

    @staticmethod
    def _bind(value: Any, storage: str) -> Any:
        return None if value is None else json.dumps(value)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def results_db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ResultsDb]:
    if request.param == "sqlite":
        db = ResultsDb(f"sqlite:///{tmp_path / 'results.db'}")
        yield db
        db.engine.dispose()
        return
    with postgres_results_db() as db:
        yield db


@contextmanager
def postgres_results_db() -> Iterator[ResultsDb]:
    """A results database in a private PostgreSQL schema (tables named ``<schema>.<table>``), dropped after."""
    with postgres_schema_url() as url:
        schema = make_url(url).query["options"].split("=", 1)[1]  # -csearch_path=<schema>
        db = ResultsDb(PG_URL, prefix=f"{schema}.")
        try:
            yield db
        finally:
            db.engine.dispose()


@pytest.fixture
def lineage_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A lineage store (the plugin's, by config) where ``staging.orders`` has upstream and column lineage."""
    url = f"sqlite:///{tmp_path / 'lineage.db'}"
    now = datetime.now(timezone.utc) - timedelta(hours=1)
    columns = {
        "amount": [(NS, "raw.orders", "amount_cents")],
        "quantity": [(NS, "raw.orders", "qty")],
        "note": [(NS, "raw.notes", "text")],
    }
    flows = [
        run_event(
            "COMPLETE",
            "clean_orders",
            inputs=[dataset("raw.orders"), dataset("raw.notes")],
            outputs=[dataset("staging.orders", fields=list(columns), columns=columns)],
        ),
        run_event("COMPLETE", "load", inputs=[dataset("source.api")], outputs=[dataset("raw.orders")]),
    ]
    store = LineageStore(url)
    with store.write() as conn:
        ingest_events(conn, [parse_event({**event, "eventTime": now.isoformat()}) for event in flows])
    store.dispose()
    monkeypatch.setenv("AIRFLOW__LINEAGE_PROVIDER__CONSUMER_STORE_URL", url)
    return url


def _operator(db: ResultsDb, monkeypatch: pytest.MonkeyPatch, **kwargs: Any) -> CollectLineageOperator:
    monkeypatch.setenv("AIRFLOW_CONN_RESULTS_DB", db.url.replace("postgresql+psycopg2", "postgresql"))
    settings: dict[str, Any] = {
        "task_id": "collect",
        "source_namespace": NS,
        "source_name": "staging.orders",
        "output_table": f"{db.prefix}lineage_edges",
        "output_conn_id": "results_db",
        "upstream": LineageSearch(depth=None),
        "downstream": None,
        "column_upstream": LineageSearch(depth=None),
        "column_downstream": None,
        **kwargs,
    }
    return CollectLineageOperator(**settings)


def _rows(db: ResultsDb, name: str = "lineage_edges") -> list[tuple]:
    with db.engine.connect() as conn:
        query = f"SELECT run_id, edge_type, depth, target_table, source_column, target_column FROM {db.prefix}{name}"
        return sorted(conn.execute(sa.text(query)).all(), key=lambda row: tuple(str(v) for v in row))


@pytest.mark.parametrize("given", ["output only", "quarantine only", "both"])
def test_failed_columns_are_the_current_runs_issues_of_the_given_tables(results_db: ResultsDb, given: str) -> None:
    output = results_db.results_table("dq_output", OUTPUT_ROWS)
    quarantine = results_db.results_table("dq_quarantine", QUARANTINE_ROWS)
    tables = {"output only": [output], "quarantine only": [quarantine], "both": [output, quarantine]}[given]
    found = read_failed_columns(results_db.engine, tables, CURRENT)
    expected = {"output only": OUTPUT_FAILED, "quarantine only": QUARANTINE_FAILED}.get(
        given, sorted(set(OUTPUT_FAILED) | set(QUARANTINE_FAILED))
    )
    assert found.columns == expected and found.warnings == []
    of_run_b = [] if given == "quarantine only" else ["amount", "customer_id", "discount", "note"]
    assert read_failed_columns(results_db.engine, tables, "run-b").columns == of_run_b


@pytest.mark.postgres
@pytest.mark.parametrize("storage", ["jsonb", "pgjson", "composite", "text"])
def test_every_postgresql_storage_of_the_issue_arrays_is_read(tmp_path: Path, storage: str) -> None:
    with postgres_results_db() as db:
        output = db.results_table("dq_output", OUTPUT_ROWS, storage=storage)
        found = read_failed_columns(db.engine, [output], CURRENT)
        assert found.columns == OUTPUT_FAILED and found.warnings == []


def test_the_operator_walks_from_the_failed_columns_of_output_and_quarantine(
    results_db: ResultsDb, lineage_store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    output = results_db.results_table("dq_output", OUTPUT_ROWS)
    quarantine = results_db.results_table("dq_quarantine", QUARANTINE_ROWS)
    operator = _operator(results_db, monkeypatch, results_output_table=output, results_quarantine_table=quarantine)
    result = operator.execute({"run_id": CURRENT})
    assert result["status"] == "ok", result
    assert result["counts"] == {"upstream": 3, "downstream": 0, "column_upstream": 3, "column_downstream": 0}
    columns = {row[3:] for row in _rows(results_db) if row[1] == "column_upstream"}
    assert columns == {
        ("raw.orders", "amount_cents", "amount"),
        ("raw.orders", "qty", "quantity"),
        ("raw.notes", "text", "note"),
    }


def test_results_run_id_picks_another_run_than_airflows(
    results_db: ResultsDb, lineage_store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    output = results_db.results_table("dq_output", OUTPUT_ROWS)
    operator = _operator(results_db, monkeypatch, results_output_table=output, results_run_id="run-b", upstream=None)
    result = operator.execute({"run_id": "scheduled__2026-12-01"})
    assert result["status"] == "ok" and result["counts"]["column_upstream"] == 2  # amount and note have lineage
    assert {row[5] for row in _rows(results_db)} == {"amount", "note"}


def test_a_missing_table_or_issue_column_gives_partial_and_the_rest(
    results_db: ResultsDb, lineage_store: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    only_errors = results_db.results_table("dq_output", [([_issue(["amount"], CURRENT)],)], columns=("_errors",))
    operator = _operator(
        results_db,
        monkeypatch,
        results_output_table=only_errors,
        results_quarantine_table=f"{results_db.prefix}no_such_table",
    )
    with caplog.at_level(logging.WARNING):
        result = operator.execute({"run_id": CURRENT})
    assert result["status"] == "partial"
    assert result["counts"]["upstream"] == 3 and result["counts"]["column_upstream"] == 1  # amount, from _errors
    assert any("has no issue column '_warnings'" in error for error in result["errors"])
    assert any("no_such_table' does not exist" in error for error in result["errors"])
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 2


@pytest.mark.postgres
def test_an_unreadable_issue_column_gives_partial_not_a_failure(
    lineage_store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with postgres_results_db() as db:
        with db.engine.begin() as conn:
            conn.exec_driver_sql(f"CREATE TABLE {db.prefix}dq (_errors text, _warnings text)")
            conn.exec_driver_sql(
                f"""INSERT INTO {db.prefix}dq VALUES ('not json at all', '[{{"columns": ["amount"]}}]')"""
            )
        result = _operator(db, monkeypatch, results_output_table=f"{db.prefix}dq").execute({"run_id": CURRENT})
        assert result["status"] == "partial"
        assert result["counts"]["column_upstream"] == 1  # _warnings was still read
        assert any("issue column '_errors'" in error and "could not be read" in error for error in result["errors"])


def test_overwrite_replaces_the_rows_append_adds_them(
    results_db: ResultsDb, lineage_store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def run(mode: str, run_id: str, **kwargs: Any) -> dict[str, Any]:
        return _operator(results_db, monkeypatch, failed_columns=["amount"], write_mode=mode, **kwargs).execute(
            {"run_id": run_id}
        )

    assert run("append", "first")["rows"] == 4
    assert run("append", "second")["rows"] == 4
    assert [row[0] for row in _rows(results_db)].count("first") == 4 and len(_rows(results_db)) == 8
    assert run("overwrite", "third")["rows"] == 4
    assert {row[0] for row in _rows(results_db)} == {"third"} and len(_rows(results_db)) == 4
    assert run("overwrite", "fourth", upstream=None, column_upstream=None)["rows"] == 0
    assert _rows(results_db) == []  # overwrite with nothing found empties the table


def test_overwrite_creates_a_missing_table(
    results_db: ResultsDb, lineage_store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = _operator(
        results_db,
        monkeypatch,
        failed_columns=["amount"],
        write_mode="overwrite",
        output_table=f"{results_db.prefix}fresh",
    ).execute({"run_id": "r"})
    assert result["status"] == "ok" and len(_rows(results_db, "fresh")) == 4


def test_log_injection_through_a_column_name_is_logged_on_one_line(
    results_db: ResultsDb, lineage_store: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    output = results_db.results_table("dq_output", OUTPUT_ROWS)
    forged = "_errors\n2026-12-01 ERROR - forged line \x1b[31mred\x1b[0m"
    operator = _operator(results_db, monkeypatch, results_output_table=output, issue_columns=[forged, "_warnings"])
    with caplog.at_level(logging.WARNING):
        result = operator.execute({"run_id": CURRENT})
    assert result["status"] == "partial"
    logged = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(logged) == 1
    assert "\n" not in logged[0] and "\x1b" not in logged[0]
    assert "\\n2026-12-01 ERROR - forged line \\x1b[31mred" in logged[0]
    assert all("\n" not in error and "\x1b" not in error for error in result["errors"])


def test_failed_columns_given_two_ways_is_refused_at_once() -> None:
    with pytest.raises(ValueError, match="one way, not several: failed_columns, results_output_table"):
        CollectLineageOperator(
            task_id="t",
            source_namespace=NS,
            source_name="x",
            output_table="t",
            output_conn_id="c",
            failed_columns=["a"],
            results_output_table="dq",
        )
    with pytest.raises(ValueError, match="write_mode must be one of append, overwrite, got 'replace'"):
        CollectLineageOperator(
            task_id="t",
            source_namespace=NS,
            source_name="x",
            output_table="t",
            output_conn_id="c",
            write_mode="replace",
        )


@pytest.mark.parametrize("store", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_the_lookback_is_days_before_the_run_on_either_store(
    store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``lookback_days`` (a fraction too) keeps lineage seen since that many days before the run, on a SQLite and
    a PostgreSQL store: ``since`` is a time, compared with the store's UTC times."""
    now = datetime.now(timezone.utc)
    flows = [
        run_event("COMPLETE", f"load_{name}", inputs=[dataset(name)], outputs=[dataset("staging.orders")])
        | {"eventTime": (now - timedelta(hours=hours)).isoformat()}
        for name, hours in (("raw.orders", 20), ("legacy.orders", 30), ("archive.orders", 72))
    ]
    reached: dict[float | None, set[str]] = {}
    with ExitStack() as stack:
        sqlite_store = f"sqlite:///{tmp_path / 'lineage.db'}"
        url = sqlite_store if store == "sqlite" else stack.enter_context(postgres_schema_url())
        lineage = LineageStore(url)
        with lineage.write() as conn:
            ingest_events(conn, [parse_event(event) for event in flows])
        lineage.dispose()
        monkeypatch.setenv("AIRFLOW__LINEAGE_PROVIDER__CONSUMER_STORE_URL", url)
        results = ResultsDb(f"sqlite:///{tmp_path / 'results.db'}")
        stack.callback(results.engine.dispose)
        for lookback in (1.0, 1.5, None):
            search = LineageSearch(depth=None, lookback_days=lookback)
            result = _operator(results, monkeypatch, upstream=search, column_upstream=None).execute({"run_id": "r"})
            assert result["status"] == "ok", result
            reached[lookback] = {row[3] for row in _rows(results)}
            with results.engine.begin() as conn:
                conn.exec_driver_sql("DELETE FROM lineage_edges")
    assert reached == {
        1.0: {"raw.orders"},
        1.5: {"raw.orders", "legacy.orders"},
        None: {"raw.orders", "legacy.orders", "archive.orders"},
    }


def test_dqxs_errors_column_and_warnings_column_name_the_issue_columns(
    results_db: ResultsDb, lineage_store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DQX's engine may rename its issue columns; ``errors_column`` / ``warnings_column`` follow it."""
    renamed = results_db.results_table("dq_renamed", OUTPUT_ROWS, columns=("dq_errors", "dq_warnings"))
    operator = _operator(
        results_db, monkeypatch, results_output_table=renamed, errors_column="dq_errors", warnings_column="dq_warnings"
    )
    assert operator.issue_columns == ["dq_errors", "dq_warnings"]
    result = operator.execute({"run_id": CURRENT})
    assert result["status"] == "ok", result
    assert {row[4] for row in _rows(results_db) if row[1] == "column_upstream"} == {"amount_cents", "text"}
    only_errors = _operator(results_db, monkeypatch, results_output_table=renamed, errors_column="dq_errors")
    assert only_errors.issue_columns == ["dq_errors", "_warnings"]  # the other keeps DQX's default


def test_issue_columns_and_dqxs_names_together_are_refused_naming_the_values() -> None:
    with pytest.raises(
        ValueError,
        match=r"issue_columns=\['a', 'b'\] or errors_column='e' / warnings_column=None, not both",
    ):
        CollectLineageOperator(
            task_id="t",
            source_namespace=NS,
            source_name="x",
            output_table="t",
            output_conn_id="c",
            results_output_table="dq",
            issue_columns=["a", "b"],
            errors_column="e",
        )
    with pytest.raises(ValueError, match="warnings_column must be a column name such as '_errors', got ''"):
        CollectLineageOperator(
            task_id="t", source_namespace=NS, source_name="x", output_table="t", output_conn_id="c", warnings_column=""
        )
    default = CollectLineageOperator(
        task_id="t", source_namespace=NS, source_name="x", output_table="t", output_conn_id="c"
    )
    assert default.issue_columns == ["_errors", "_warnings"]


def test_the_result_carries_dqxs_lineage_location_and_rows_name_tables_by_their_own_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows name tables as DQX does (the name, not ``namespace/name``), also where namespace and name hold
    slashes; the result carries ``lineage_location`` (DQX's key) and ``table`` (the same, for existing readers)."""
    sqlite_ns = f"sqlite://{tmp_path / 'lake.db'}"
    flows = [
        run_event(
            "COMPLETE",
            "features",
            inputs=[dataset("/warehouse/features", namespace="file"), dataset("main.raw", namespace=sqlite_ns)],
            outputs=[dataset("staging.orders")],
        )
        | {"eventTime": (datetime.now(timezone.utc) - timedelta(hours=1)).isoformat()}
    ]
    url = f"sqlite:///{tmp_path / 'lineage.db'}"
    store = LineageStore(url)
    with store.write() as conn:
        ingest_events(conn, [parse_event(event) for event in flows])
    store.dispose()
    monkeypatch.setenv("AIRFLOW__LINEAGE_PROVIDER__CONSUMER_STORE_URL", url)
    results = ResultsDb(f"sqlite:///{tmp_path / 'results.db'}")
    try:
        result = _operator(results, monkeypatch, column_upstream=None).execute({"run_id": "r"})
        assert result["status"] == "ok", result
        assert result["lineage_location"] == result["table"] == "lineage_edges"
        assert {row[3] for row in _rows(results)} == {"/warehouse/features", "main.raw"}
        with results.engine.connect() as conn:
            assert set(conn.exec_driver_sql("SELECT source_table FROM lineage_edges").scalars()) == {"staging.orders"}
    finally:
        results.engine.dispose()


def test_lookback_days_defaults_to_dqxs_30() -> None:
    assert LineageSearch().lookback_days == 30
