"""Failed columns from data-quality results the way Databricks DQX writes them.

DQX adds two columns to every checked row, ``_errors`` and ``_warnings``: arrays of issue structs, each
with the check's ``run_id`` and the ``columns`` it flagged. One results table accumulates many check runs,
and a run may split its rows into an output table and a quarantine table. :func:`read_failed_columns`
explodes both arrays and each issue's ``columns`` in SQL, keeps the issues of the current run (an issue
without a ``run_id`` counts as the current run's), and answers the distinct column names of every given
table together.

Storage, read through SQLAlchemy:

* PostgreSQL: ``jsonb`` or ``json`` (an array of objects), an array of a composite type or of ``jsonb``,
  or JSON text — each turned into ``jsonb`` (``to_jsonb``, or a cast for text) and exploded with
  ``jsonb_array_elements``;
* SQLite: JSON text, exploded with ``json_each``.

A missing table, a missing issue column or a failed read costs only that table's (or column's) issues:
it is reported as a warning, sanitised for logging, and the other tables and columns are still read.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine, String, case, cast, column, func, inspect, literal, or_, select, table, true
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.exc import SAWarning, SQLAlchemyError

from airflow_lineage_provider.operators.log_safety import sanitized

#: DQX's names of the two issue columns (its ``errors_column`` and ``warnings_column`` defaults).
DEFAULT_ERRORS_COLUMN = "_errors"
DEFAULT_WARNINGS_COLUMN = "_warnings"
DEFAULT_ISSUE_COLUMNS = (DEFAULT_ERRORS_COLUMN, DEFAULT_WARNINGS_COLUMN)


def resolve_issue_columns(
    issue_columns: Sequence[str] | None, errors_column: str | None, warnings_column: str | None
) -> list[str]:
    """The issue columns to read, from DQX's ``errors_column`` / ``warnings_column`` or the general
    ``issue_columns`` list (any number of columns). Giving both forms is refused with the values named.

    Either DQX name left out keeps DQX's default (``_errors``, ``_warnings``); neither form given reads both
    defaults."""
    if issue_columns is not None and (errors_column is not None or warnings_column is not None):
        raise ValueError(
            f"give the issue columns one way: issue_columns={list(issue_columns)!r} or "
            f"errors_column={errors_column!r} / warnings_column={warnings_column!r}, not both"
        )
    if issue_columns is not None:
        if isinstance(issue_columns, str) or not issue_columns:
            raise ValueError(f"issue_columns must be a list of column names such as ['_errors'], got {issue_columns!r}")
        return [str(name) for name in issue_columns]
    named = {"errors_column": errors_column, "warnings_column": warnings_column}
    for parameter, value in named.items():
        if value is not None and (not isinstance(value, str) or not value):
            raise ValueError(f"{parameter} must be a column name such as '_errors', got {value!r}")
    return [errors_column or DEFAULT_ERRORS_COLUMN, warnings_column or DEFAULT_WARNINGS_COLUMN]


@dataclass
class FailedColumns:
    """The distinct failed column names found, and what could not be read (already sanitised)."""

    columns: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def split_table_name(name: str) -> tuple[str | None, str]:
    """``schema.table`` as ``(schema, table)``, split at the last dot; ``(None, table)`` without one."""
    schema, _, bare = name.rpartition(".")
    return schema or None, bare


def _issue_query_postgres(source: Any, value: Any, is_text: bool, run_id: str) -> Any:
    document = cast(cast(value, String), JSONB) if is_text else func.to_jsonb(value)
    array = case((func.jsonb_typeof(document) == "array", document), else_=cast(literal("[]"), JSONB))
    issue = func.jsonb_array_elements(array).table_valued(column("value", JSONB)).lateral("issue")
    flagged = issue.c.value["columns"]
    names = case((func.jsonb_typeof(flagged) == "array", flagged), else_=cast(literal("[]"), JSONB))
    failed = func.jsonb_array_elements_text(names).table_valued("value").lateral("failed")
    run = issue.c.value["run_id"].astext
    return (
        select(failed.c.value)
        .select_from(source.join(issue, true()).join(failed, true()))
        .where(or_(run.is_(None), run == run_id))
        .distinct()
    )


def _issue_query_sqlite(source: Any, value: Any, run_id: str) -> Any:
    # Nested CASEs rather than AND: json_type() raises on text that is not JSON, so it runs only on valid JSON.
    array = case((func.json_valid(value) == 1, case((func.json_type(value) == "array", value))))
    issue = func.json_each(array).table_valued("value", "type").alias("issue")
    is_object = issue.c.type == "object"
    flagged = case(
        (
            is_object,
            case(
                (func.json_type(issue.c.value, "$.columns") == "array", func.json_extract(issue.c.value, "$.columns"))
            ),
        )
    )
    failed = func.json_each(flagged).table_valued("value", "type").alias("failed")
    run = cast(case((is_object, func.json_extract(issue.c.value, "$.run_id"))), String)
    return (
        select(failed.c.value)
        .select_from(source.join(issue, true()).join(failed, true()))
        .where(failed.c.type == "text", or_(run.is_(None), run == run_id))
        .distinct()
    )


def _issue_columns(engine: Engine, schema: str | None, bare: str) -> dict[str, bool] | None:
    """The table's columns → whether each holds text; None when the table does not exist."""
    with engine.connect() as conn:
        inspector = inspect(conn)
        if not inspector.has_table(bare, schema=schema):
            return None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SAWarning)  # a composite type is not recognised, and need not be
            described = inspector.get_columns(bare, schema=schema)
    return {c["name"]: isinstance(c["type"], String) for c in described}


def read_failed_columns(
    engine: Engine, tables: Sequence[str], run_id: str, issue_columns: Sequence[str] = DEFAULT_ISSUE_COLUMNS
) -> FailedColumns:
    """Distinct columns flagged by issues of run ``run_id`` (or of no run) in ``tables``' ``issue_columns``."""
    result = FailedColumns()
    found: set[str] = set()
    for name in tables:
        schema, bare = split_table_name(name)
        try:
            described = _issue_columns(engine, schema, bare)
        except SQLAlchemyError as error:
            result.warnings.append(f"results table '{sanitized(name)}' could not be read: {sanitized(error)}")
            continue
        if described is None:
            result.warnings.append(f"results table '{sanitized(name)}' does not exist: no failed columns read from it")
            continue
        for issues in issue_columns:
            if issues not in described:
                result.warnings.append(
                    f"results table '{sanitized(name)}' has no issue column '{sanitized(issues)}': "
                    "no failed columns read from it"
                )
                continue
            source = table(bare, column(issues), schema=schema)
            value = source.c[issues]
            if engine.dialect.name == "postgresql":
                query = _issue_query_postgres(source, value, described[issues], run_id)
            else:
                query = _issue_query_sqlite(source, value, run_id)
            try:
                with engine.connect() as conn:
                    found.update(str(v) for v in conn.execute(query).scalars() if v)
            except SQLAlchemyError as error:
                result.warnings.append(
                    f"issue column '{sanitized(issues)}' of '{sanitized(name)}' could not be read: {sanitized(error)}"
                )
    result.columns = sorted(found)
    return result
