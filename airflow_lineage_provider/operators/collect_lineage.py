"""``CollectLineageOperator``: write the lineage around a dataset to a table, after Databricks DQX's
``CollectLineageAction``.

For a source dataset (say one whose data-quality check just failed) and optionally the columns that
failed, the operator walks, each with its own bounds:

* ``upstream`` / ``downstream`` table lineage (dataset → dataset through jobs), and
* ``column_upstream`` / ``column_downstream`` lineage of the failed columns (from ``columnLineage`` facets),

over the consumer's lineage store through its read API (:mod:`..consumer.reads`), breadth first with one
statement per hop (each node expanded once, at its nearest depth, so a cycle ends the walk), and writes one
row per edge to ``output_table`` through an Airflow connection::

    run_id, run_time, source_table, edge_type, depth, target_table, source_column, target_column

The failed columns come from a list, from a column of a table, or from data-quality results in DQX's
shape (issue structs in ``_errors`` / ``_warnings``, see :mod:`.dq_results`) in an output table, a
quarantine table or both. Tables are named by the dataset's own name (``analytics.public.orders``), as DQX
names them; the source's namespace is the operator's ``source_namespace``. The
operator never fails the pipeline: every error is logged (sanitised: no forged lines or terminal escapes)
and reported in its XCom result (``status``, ``rows``, ``errors``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from airflow.sdk import BaseOperator
from sqlalchemy import Column, DateTime, Integer, MetaData, String, Table, Text, column, delete, select, table

from airflow_lineage_provider.operators.dq_results import read_failed_columns, resolve_issue_columns, split_table_name
from airflow_lineage_provider.operators.log_safety import sanitized

log = logging.getLogger(__name__)

EDGE_TYPES = ("upstream", "downstream", "column_upstream", "column_downstream")


WRITE_MODES = ("append", "overwrite")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class LineageSearch:
    """Bounds of one walk direction (DQX's ``LineageSearchConfig``, with its defaults)."""

    depth: int | None = 100
    """Hops from the source: 1 = direct neighbours only; None: no bound (each node is still expanded once)."""

    max_nodes: int = 100
    """At most this many edges are written for the direction; no hop of the walk reads more."""

    lookback_days: float | None = 30
    """Only lineage seen in the last this-many days; None: all of it."""

    def __post_init__(self) -> None:
        if self.depth is not None and (not _is_int(self.depth) or self.depth < 1):
            raise ValueError(f"LineageSearch.depth must be an integer >= 1 or None (unbounded), got {self.depth!r}")
        if not _is_int(self.max_nodes) or self.max_nodes < 1:
            raise ValueError(f"LineageSearch.max_nodes must be an integer >= 1, got {self.max_nodes!r}")
        if self.lookback_days is not None and (
            isinstance(self.lookback_days, bool)
            or not isinstance(self.lookback_days, int | float)
            or not 0 < self.lookback_days < 36_500
        ):
            raise ValueError(
                f"LineageSearch.lookback_days must be a number of days > 0 (and < 36,500) or None, "
                f"got {self.lookback_days!r}"
            )


def lineage_table(name: str, metadata: MetaData | None = None) -> Table:
    """The output table's definition (``schema.table`` names are split at the last dot)."""
    schema, bare = split_table_name(name)
    return Table(
        bare,
        metadata or MetaData(),
        Column("run_id", String(250), nullable=False),
        Column("run_time", DateTime(timezone=True), nullable=False),
        Column("source_table", Text, nullable=False),
        Column("edge_type", String(20), nullable=False),
        Column("depth", Integer),
        Column("target_table", Text),
        Column("source_column", Text),
        Column("target_column", Text),
        schema=schema,
    )


def _engine(conn_id: str) -> Any:
    from airflow.sdk import BaseHook

    return BaseHook.get_connection(conn_id).get_hook().get_sqlalchemy_engine()


def _store_url(conn_id: str | None) -> str:
    if conn_id is None:
        from airflow_lineage_provider import conf

        return conf.consumer_store_url()
    from airflow.sdk import BaseHook

    hook = BaseHook.get_connection(conn_id).get_hook()
    try:
        return hook.sqlalchemy_url.render_as_string(hide_password=False)
    except (NotImplementedError, AttributeError):
        return hook.get_uri()


class CollectLineageOperator(BaseOperator):
    """Collect table and column lineage around ``source_namespace``/``source_name`` into ``output_table``.

    :param source_namespace: namespace of the source dataset (e.g. ``postgres://db:5432``).
    :param source_name: name of the source dataset (e.g. ``analytics.public.orders``).
    :param output_table: table the rows are written to (created if missing), ``schema.table`` allowed.
    :param output_conn_id: Airflow connection of the database holding ``output_table``.
    :param write_mode: ``append`` (default) adds this run's rows; ``overwrite`` replaces the table's rows
        with them in one transaction (an empty result empties it).
    :param lineage_conn_id: Airflow connection of the lineage store; None: ``[lineage_provider]
        consumer_store_url`` (the store the consumer plugin writes).
    :param failed_columns: columns of the source whose column lineage is walked. Or, one of:
    :param failed_columns_table: a table with one failed column name per row (distinct non-null
        ``failed_columns_column`` values);
    :param results_output_table: / ``results_quarantine_table``: data-quality results in DQX's shape
        (issue structs in ``errors_column`` and ``warnings_column``, DQX's names, default ``_errors`` and
        ``_warnings``; or any list of such columns as ``issue_columns``, not both forms); either table or
        both, their failed columns unioned. Only issues of ``results_run_id`` (default: this Airflow run's
        id) or without a run id count.
    :param failed_columns_conn_id: connection of the tables failed columns are read from (default
        ``output_conn_id``).
    :param upstream: bounds of the upstream table walk; None disables it. Likewise ``downstream``,
        ``column_upstream`` and ``column_downstream``.
    """

    template_fields: Sequence[str] = (
        "source_namespace",
        "source_name",
        "output_table",
        "failed_columns",
        "failed_columns_table",
        "failed_columns_column",
        "results_output_table",
        "results_quarantine_table",
        "results_run_id",
    )
    ui_color = "#d8f0e8"

    def __init__(
        self,
        *,
        source_namespace: str,
        source_name: str,
        output_table: str,
        output_conn_id: str,
        write_mode: str = "append",
        lineage_conn_id: str | None = None,
        failed_columns: list[str] | None = None,
        failed_columns_table: str | None = None,
        failed_columns_column: str = "column_name",
        results_output_table: str | None = None,
        results_quarantine_table: str | None = None,
        results_run_id: str | None = None,
        errors_column: str | None = None,
        warnings_column: str | None = None,
        issue_columns: Sequence[str] | None = None,
        failed_columns_conn_id: str | None = None,
        upstream: LineageSearch | None = LineageSearch(),
        downstream: LineageSearch | None = LineageSearch(),
        column_upstream: LineageSearch | None = LineageSearch(),
        column_downstream: LineageSearch | None = LineageSearch(),
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if write_mode not in WRITE_MODES:
            raise ValueError(f"write_mode must be one of {', '.join(WRITE_MODES)}, got {write_mode!r}")
        sources = {
            "failed_columns": failed_columns is not None,
            "failed_columns_table": bool(failed_columns_table),
            "results_output_table/results_quarantine_table": bool(results_output_table or results_quarantine_table),
        }
        if sum(sources.values()) > 1:
            given = ", ".join(name for name, is_given in sources.items() if is_given)
            raise ValueError(f"give the failed columns one way, not several: {given}")
        self.issue_columns = resolve_issue_columns(issue_columns, errors_column, warnings_column)
        self.source_namespace = source_namespace
        self.source_name = source_name
        self.output_table = output_table
        self.output_conn_id = output_conn_id
        self.write_mode = write_mode
        self.lineage_conn_id = lineage_conn_id
        self.failed_columns = failed_columns
        self.failed_columns_table = failed_columns_table
        self.failed_columns_column = failed_columns_column
        self.results_output_table = results_output_table
        self.results_quarantine_table = results_quarantine_table
        self.results_run_id = results_run_id
        self.failed_columns_conn_id = failed_columns_conn_id
        self.searches = {
            "upstream": upstream,
            "downstream": downstream,
            "column_upstream": column_upstream,
            "column_downstream": column_downstream,
        }

    def execute(self, context: Any) -> dict[str, Any]:
        """Collect and write the rows; return ``{status, lineage_location, table, rows, counts, errors}``
        (never raises). ``lineage_location`` is the output table, as DQX's action returns it; ``table``
        is the same value, kept for existing readers."""
        errors: list[str] = []
        rows: list[dict[str, Any]] = []
        try:
            rows = self._collect(context, errors)
            if rows or self.write_mode == "overwrite":
                self._write(rows)
        except Exception as error:  # lineage collection must never fail the pipeline
            message = sanitized(f"{type(error).__name__}: {error}")
            log.warning("CollectLineageOperator %s failed and was skipped: %s", self.task_id, message)
            errors.append(message)
            return self._result("error", 0, errors, rows)
        return self._result("ok" if not errors else "partial", len(rows), errors, rows)

    def _result(self, status: str, written: int, errors: list[str], rows: list[dict[str, Any]]) -> dict[str, Any]:
        counts = {edge: sum(1 for row in rows if row["edge_type"] == edge) for edge in EDGE_TYPES}
        return {
            "status": status,
            "lineage_location": self.output_table,
            "table": self.output_table,
            "rows": written,
            "counts": counts,
            "errors": errors,
        }

    def _warn(self, errors: list[str], message: str) -> None:
        """Record a problem that costs part of the result (``partial``), logged on one sanitised line."""
        message = sanitized(message)
        log.warning("CollectLineageOperator %s: %s", self.task_id, message)
        errors.append(message)

    def _collect(self, context: Any, errors: list[str]) -> list[dict[str, Any]]:
        from airflow_lineage_provider.consumer.reads import LineageWalker

        source = f"{self.source_namespace}/{self.source_name}"
        run_id = str(context.get("run_id") or "")
        run_time = datetime.now(timezone.utc)
        common = {"run_id": run_id, "run_time": run_time, "source_table": self.source_name}
        walker = LineageWalker(_store_url(self.lineage_conn_id))
        try:
            dataset = walker.dataset_id(self.source_namespace, self.source_name)
            if dataset is None:
                self._warn(errors, f"the source dataset {source!r} is not in the lineage store (no lineage collected)")
                return []
            rows = []
            columns: list[str] | None = None
            for edge_type, search in self.searches.items():
                if search is None:
                    continue
                since = None if search.lookback_days is None else run_time - timedelta(days=search.lookback_days)
                if edge_type.startswith("column_") and columns is None:
                    columns = self._failed_columns(run_id, errors)
                try:
                    if edge_type.startswith("column_"):
                        found = walker.column_edges(
                            dataset, columns or [], edge_type, search.depth, search.max_nodes, since
                        )
                    else:
                        found = walker.table_edges(dataset, edge_type, search.depth, search.max_nodes, since)
                except Exception as error:  # one direction failing must not lose the others
                    self._warn(errors, f"{edge_type} walk failed: {type(error).__name__}: {error}")
                    continue
                rows += [
                    {
                        **common,
                        "edge_type": edge_type,
                        "depth": row["depth"],
                        "target_table": row["target_name"],  # DQX's rows name a table by its own name
                        "source_column": row["source_column"],
                        "target_column": row["target_column"],
                    }
                    for row in found
                ]
            return rows
        finally:
            walker.close()

    def _failed_columns(self, run_id: str, errors: list[str]) -> list[str]:
        """The seeds of the column walks; a table that cannot be read gives none, and a warning."""
        if self.failed_columns is not None:
            return [str(name) for name in self.failed_columns]
        results = [name for name in (self.results_output_table, self.results_quarantine_table) if name]
        if not self.failed_columns_table and not results:
            return []
        engine = _engine(self.failed_columns_conn_id or self.output_conn_id)
        try:
            if results:
                found = read_failed_columns(engine, results, self.results_run_id or run_id, self.issue_columns)
                for warning in found.warnings:
                    self._warn(errors, warning)
                return found.columns
            return self._scalar_failed_columns(engine, errors)
        finally:
            engine.dispose()

    def _scalar_failed_columns(self, engine: Any, errors: list[str]) -> list[str]:
        assert self.failed_columns_table is not None
        schema, name = split_table_name(self.failed_columns_table)
        failures = table(name, column(self.failed_columns_column), schema=schema)
        value = failures.c[self.failed_columns_column]
        query = select(value).distinct().where(value.is_not(None))
        try:
            with engine.connect() as conn:
                return sorted({str(value) for value in conn.execute(query).scalars()})
        except Exception as error:  # a missing table or column: no seeds, the table walks still run
            self._warn(
                errors,
                f"failed columns could not be read from {self.failed_columns_table!r}: {type(error).__name__}: {error}",
            )
            return []

    def _write(self, rows: list[dict[str, Any]]) -> None:
        engine = _engine(self.output_conn_id)
        try:
            target = lineage_table(self.output_table)
            with engine.begin() as conn:
                target.create(conn, checkfirst=True)
                if self.write_mode == "overwrite":
                    conn.execute(delete(target))
                if rows:
                    conn.execute(target.insert(), rows)
        finally:
            engine.dispose()
