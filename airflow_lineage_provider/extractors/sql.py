"""What an operator's SQL reads and writes, and how many rows it wrote.

Lineage from SQL goes through the stock provider's ``SQLParser`` (openlineage-sql). Tables are named
exactly as the stock SQL operators name them when the operator's hook describes its database for
OpenLineage (``get_openlineage_database_info``: PostgreSQL, MySQL, Snowflake, ...). Hooks that do not
(SQLite) get this package's naming from their SQLAlchemy URL (:mod:`airflow_lineage_provider.producer.naming`);
SQL without any hook gets ``[lineage_provider] namespace``.

Rows written are read from what the hook already reports: ``DbApiHook.run`` sends each statement's cursor
``rowcount`` to Airflow's hook-lineage collector (``send_sql_hook_lineage``). Only statements that write
rows into a table count (INSERT, UPDATE, MERGE, CREATE TABLE AS, SELECT INTO, COPY FROM), and only those
run by a hook the operator holds, so another task's statements never leak in.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Protocol, TypeGuard

from openlineage.client.event_v2 import Dataset
from openlineage.client.facet_v2 import sql_job

from airflow_lineage_provider import conf
from airflow_lineage_provider.producer.naming import TableNaming, naming_for_url
from airflow_lineage_provider.reporting import warn_once

if TYPE_CHECKING:
    from airflow.providers.common.sql.hooks.sql import DbApiHook
    from airflow.providers.openlineage.extractors import OperatorLineage

# Statements whose rowcount is not "rows written" even though the parser reports an output table.
_NOT_WRITING = frozenset({"DELETE", "TRUNCATE", "DROP", "ALTER", "GRANT", "REVOKE", "COMMENT", "VACUUM", "ANALYZE"})
_LEADING_COMMENTS = re.compile(r"^\s*(?:--[^\n]*\n\s*|/\*.*?\*/\s*)*", re.DOTALL)


class ParsedTable(Protocol):
    """A table as openlineage-sql's parser reports it (``DbTableMeta``, which ships no type information)."""

    @property
    def schema(self) -> str | None: ...
    @property
    def name(self) -> str: ...
    @property
    def qualified_name(self) -> str: ...


def sql_of(operator: object) -> str | list[str] | None:
    """The operator's ``sql`` when it is a non-empty string or list of non-empty strings."""
    sql = getattr(operator, "sql", None)
    if isinstance(sql, str) and sql.strip():
        return sql
    if isinstance(sql, list) and sql and all(isinstance(s, str) and s.strip() for s in sql):
        return sql
    return None


def writes_rows(statement: object) -> bool:
    """Whether a statement's cursor ``rowcount`` counts rows written into a table."""
    if not isinstance(statement, str) or not statement.strip():
        return False
    body = _LEADING_COMMENTS.sub("", statement)
    keyword = body.split(None, 1)[0].upper() if body.strip() else ""
    if keyword in _NOT_WRITING:
        return False
    if keyword == "COPY":
        return bool(re.search(r"\bFROM\b", body, re.IGNORECASE))
    from airflow.providers.openlineage.sqlparser import SQLParser

    meta = SQLParser().parse([statement])
    return bool(meta and meta.out_tables)


def _is_db_api_hook(value: object) -> TypeGuard[DbApiHook]:
    try:
        from airflow.providers.common.sql.hooks.sql import DbApiHook
    except ImportError:  # pragma: no cover - common-sql is a dependency
        return False
    return isinstance(value, DbApiHook)


def held_hooks(operator: object) -> list[DbApiHook]:
    """The database hooks an operator holds as public attributes. Its private ones (a cached ``_hook``) are the
    operator's own business: an operator that caches its hook there hands it out through ``get_db_hook()``
    (:func:`used_hooks`)."""
    try:
        return [value for name, value in vars(operator).items() if not name.startswith("_") and _is_db_api_hook(value)]
    except TypeError:  # an object without __dict__
        return []


def used_hooks(operator: object) -> list[DbApiHook]:
    """The database hooks an operator ran its SQL with: its public hook attributes and what its ``get_db_hook()``
    answers (the SQL operators cache their hook, so after ``execute`` that is the hook that ran the SQL)."""
    hooks = held_hooks(operator)
    getter = getattr(operator, "get_db_hook", None)
    if callable(getter):
        try:
            hook = getter()
        except Exception:  # no connection, a hook that cannot be made: nothing ran through it
            hook = None
        if _is_db_api_hook(hook) and not any(hook is held for held in hooks):
            hooks.append(hook)
    return hooks


def operator_db_hook(operator: object) -> DbApiHook | None:
    """The database hook an operator runs its SQL with: its ``get_db_hook()``, a hook attribute, or the
    hook of its connection id (``conn_id``, the attribute named by ``conn_id_field``, or ``*_conn_id``)."""
    getter = getattr(operator, "get_db_hook", None)
    if callable(getter):
        return getter()
    if held := held_hooks(operator):
        return held[0]
    names = [getattr(operator, "conn_id_field", None), "conn_id"]
    names += sorted(n for n in vars(operator) if n.endswith("conn_id"))
    for name in names:
        conn_id = getattr(operator, name, None) if isinstance(name, str) else None
        if isinstance(conn_id, str) and conn_id:
            from airflow.sdk import BaseHook

            hook = BaseHook.get_connection(conn_id).get_hook()
            return hook if _is_db_api_hook(hook) else None
    return None


def _stock_sql_lineage(
    hook: DbApiHook, sql: str | list[str], database: str | None, use_connection: bool
) -> OperatorLineage | None:
    from airflow.providers.openlineage.sqlparser import get_openlineage_facets_with_sql

    conn_id = getattr(hook, getattr(hook, "conn_name_attr", ""), None)
    if not isinstance(conn_id, str) or not callable(getattr(hook, "get_openlineage_database_info", None)):
        return None
    return get_openlineage_facets_with_sql(hook, sql, conn_id, database, use_connection)


def _hook_naming(hook: DbApiHook) -> TableNaming | None:
    try:
        return naming_for_url(hook.get_sqlalchemy_engine().url)
    except Exception as error:
        warn_once(f"Lineage: could not name the tables of {type(hook).__name__} from its SQLAlchemy URL: {error}")
        return None


def _parsed_sql_lineage(sql: str | list[str], naming: TableNaming | None) -> OperatorLineage:
    from airflow.providers.openlineage.extractors import OperatorLineage
    from airflow.providers.openlineage.sqlparser import SQLParser

    dialect = {"postgresql": "postgres", "mssql": "mssql"}.get(naming.backend, naming.backend) if naming else None
    parser = SQLParser(dialect=dialect)
    meta = parser.parse(SQLParser.split_sql_string(sql))
    job_facets = {"sql": sql_job.SQLJobFacet(query=SQLParser.normalize_sql(sql), producer=conf.producer())}
    if not meta:
        return OperatorLineage(job_facets=job_facets)

    def dataset(table: ParsedTable) -> Dataset:
        written = f"{table.schema}.{table.name}" if table.schema else table.name
        if naming is None:
            return Dataset(namespace=conf.namespace(), name=table.qualified_name)
        return Dataset(namespace=naming.namespace, name=naming.name(written))

    return OperatorLineage(
        inputs=[dataset(t) for t in meta.in_tables],
        outputs=[dataset(t) for t in meta.out_tables],
        job_facets=job_facets,
    )


def sql_lineage(operator: object, *, use_connection: bool = False) -> OperatorLineage | None:
    """Inputs, outputs and the ``sql`` job facet of the operator's SQL, or ``None`` when it has none.

    ``use_connection`` lets the stock parser query the database for table schemas (as the stock SQL
    operators do); without it, only names are computed (no query; a connection lookup at most).
    """
    sql = sql_of(operator)
    if sql is None:
        return None
    naming = None
    try:
        hook = operator_db_hook(operator)
    except Exception as error:
        warn_once(f"Lineage: could not get the database hook of task {getattr(operator, 'task_id', '?')!r}: {error}")
        hook = None
    if hook is not None:
        lineage = _stock_sql_lineage(hook, sql, getattr(operator, "database", None), use_connection)
        if lineage is not None:
            return lineage
        naming = _hook_naming(hook)
    return _parsed_sql_lineage(sql, naming)


def _collector_created() -> bool:
    # Creating the collector just to read it back empty imports every provider's asset handlers (seconds).
    try:
        from airflow.sdk import lineage

        return lineage.get_hook_lineage_collector.cache_info().currsize != 0
    except Exception:
        return True


def cursor_rows_written(operator: object) -> int | None:
    """Rows written by the SQL the operator's hooks ran, from their cursors' ``rowcount``; ``None`` if unknown."""
    if not _collector_created():
        return None
    hooks = used_hooks(operator)
    if not hooks:
        return None
    try:
        from airflow.providers.common.compat.lineage.hook import get_hook_lineage_collector
        from airflow.providers.common.sql.hooks.lineage import SqlJobHookLineageExtra
    except ImportError:  # pragma: no cover - an older common-sql without send_sql_hook_lineage
        return None
    total: int | None = None
    for extra in get_hook_lineage_collector().collected_assets.extra:
        if extra.key != SqlJobHookLineageExtra.KEY.value or not any(extra.context is hook for hook in hooks):
            continue
        rows = extra.value.get(SqlJobHookLineageExtra.VALUE__ROW_COUNT.value)
        statement = extra.value.get(SqlJobHookLineageExtra.VALUE__SQL_STATEMENT.value)
        if isinstance(rows, int) and rows >= 0 and writes_rows(statement):
            total = (total or 0) + rows * max(int(extra.count), 1)
    return total
