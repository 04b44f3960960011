"""Reading Airflow's serialized DAGs from its metadata database: which versions exist, and the DAGs themselves.

Plain SQLAlchemy Core on Airflow's tables (reflected, see :func:`_tables`), through an engine of our own
rather than Airflow's ORM session: task processes in Airflow 3 have no ORM session (the task supervisor
blocks it), so the export DAG's publication task reaches the metadata database through an Airflow
Connection (see :func:`metadata_url`).
Only the latest version of each DAG that is not stale counts — what the scheduler runs.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy import Connection, and_, false, func, select

#: The URL Airflow 3's task supervisor puts in ``[database] sql_alchemy_conn`` of a task process.
_BLOCKED_URL_PREFIX = "airflow-db-not-allowed"


class MetadataDatabaseError(RuntimeError):
    """The metadata database cannot be reached from here; the message says what to configure."""


@dataclass(frozen=True)
class DagVersionRow:
    """The latest serialized version of one DAG, as the metadata database lists it (no DAG data read)."""

    dag_id: str
    dag_hash: str
    fileloc: str | None
    relative_fileloc: str | None
    bundle_name: str | None
    bundle_version: str | None


@dataclass
class LoadedDag:
    """One DAG deserialized from the metadata database, with the row it came from."""

    row: DagVersionRow
    dag: Any
    """The ``SerializedDAG``."""


def metadata_url(conn_id: str | None = None) -> str:
    """The SQLAlchemy URL of Airflow's metadata database.

    With ``conn_id`` (``[lineage_provider] publish_metadata_conn_id``): that Airflow Connection's URI, the way
    a task in Airflow 3 can reach it, looked up as ``airflow connections get`` looks it up (secrets backends,
    ``AIRFLOW_CONN_*``, and outside a task the metadata database: :mod:`.airflow_lookups`). Otherwise Airflow's
    own ``SQL_ALCHEMY_CONN`` (``[database] sql_alchemy_conn``) of this process, which the CLI and ``airflow
    dags test`` have and a task process on a worker does not: then :class:`MetadataDatabaseError` says to set
    the connection. Every failure is a :class:`MetadataDatabaseError` with a one-line message.
    """
    from airflow_lineage_provider.design.airflow_lookups import get_connection

    if conn_id:
        try:
            connection = get_connection(conn_id)
        except Exception as error:
            raise MetadataDatabaseError(
                f"the Airflow connection {conn_id!r} ([lineage_provider] publish_metadata_conn_id) could not be "
                f"read: {first_line(error)}. Add it (`airflow connections add {conn_id} --conn-uri ...`), or "
                "leave the option empty to read Airflow's own [database] sql_alchemy_conn"
            ) from None
        return _connection_url(connection)
    url = _own_metadata_url()
    if not url or url.startswith(_BLOCKED_URL_PREFIX):
        raise MetadataDatabaseError(
            "Airflow's metadata database is not reachable from this task process (Airflow 3 tasks have no "
            "database access); set [lineage_provider] publish_metadata_conn_id to an Airflow Connection to the "
            "metadata database (read access suffices), or publish with `airflow-lineage publish-dags`"
        )
    return url


def _own_metadata_url() -> str:
    """This process's ``[database] sql_alchemy_conn`` as Airflow's configuration gives it (honouring
    ``sql_alchemy_conn_cmd`` and ``_secret``). In a task process Airflow's supervisor replaces it with a URL
    that says database access is blocked (``airflow-db-not-allowed:///``)."""
    from airflow.configuration import conf

    return conf.get("database", "sql_alchemy_conn", fallback="") or ""


def first_line(error: BaseException) -> str:
    """The first line of an error's message (a database driver's own error's, for SQLAlchemy's wrapper), for
    one-line error messages; the error's type when it has no message."""
    lines = str(getattr(error, "orig", None) or error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


def _connection_url(connection: Any) -> str:
    """A SQLAlchemy URL for an Airflow Connection: the URI its database hook builds (``postgresql+psycopg://``,
    ``sqlite:////path``), else the connection's own URI with ``postgres://`` spelled as SQLAlchemy wants it."""
    try:
        uri = connection.get_hook().get_uri()
        if isinstance(uri, str) and "://" in uri:
            return uri
    except Exception:  # no provider for the connection type: its URI may still be a SQLAlchemy URL
        pass
    uri = connection.get_uri()
    return "postgresql://" + uri.removeprefix("postgres://") if uri.startswith("postgres://") else uri


@contextmanager
def metadata_connection(url: str) -> Iterator[Connection]:
    """A read connection to the metadata database at ``url`` (an engine of our own, disposed afterwards)."""
    import sqlalchemy as sa

    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as conn:
            yield conn
    finally:
        engine.dispose()


def _tables(conn: Connection) -> tuple[Any, Any, Any]:
    """Airflow's ``serialized_dag``, ``dag_version`` and ``dag`` tables, reflected from the database.

    Reflecting the few columns read costs a few catalog queries; importing Airflow's ORM models for their
    table definitions costs about 0.4 s, most of a pass that finds nothing changed.
    """
    from sqlalchemy import MetaData, Table

    metadata = MetaData()

    def reflect(name: str, *columns: str) -> Table:
        return Table(name, metadata, autoload_with=conn, include_columns=list(columns), resolve_fks=False)

    return (
        reflect("serialized_dag", "id", "dag_id", "dag_hash", "data", "data_compressed", "dag_version_id"),
        reflect("dag_version", "id", "dag_id", "version_number"),
        reflect("dag", "dag_id", "is_stale", "fileloc", "relative_fileloc", "bundle_name", "bundle_version"),
    )


def _latest_select(tables: tuple[Any, Any, Any], dag_ids: Sequence[str] | None, *columns: Any) -> Any:
    serialized, versions, dags = tables
    latest = select(versions.c.dag_id, func.max(versions.c.version_number).label("version_number")).join(
        serialized, serialized.c.dag_version_id == versions.c.id
    )
    if dag_ids is not None:
        latest = latest.where(versions.c.dag_id.in_(list(dag_ids)))
    latest_sub = latest.group_by(versions.c.dag_id).subquery()
    return (
        select(*columns)
        .select_from(serialized)
        .join(versions, serialized.c.dag_version_id == versions.c.id)
        .join(
            latest_sub,
            and_(versions.c.dag_id == latest_sub.c.dag_id, versions.c.version_number == latest_sub.c.version_number),
        )
        .join(dags, dags.c.dag_id == serialized.c.dag_id)
        .where(dags.c.is_stale == false())
        .order_by(serialized.c.dag_id)
    )


def latest_versions(conn: Connection, dag_ids: Sequence[str] | None = None) -> list[DagVersionRow]:
    """The latest serialized version of every DAG that is not stale (or of ``dag_ids``), without its data."""
    tables = _tables(conn)
    serialized, _, dags = tables
    statement = _latest_select(
        tables,
        dag_ids,
        serialized.c.dag_id,
        serialized.c.dag_hash,
        dags.c.fileloc,
        dags.c.relative_fileloc,
        dags.c.bundle_name,
        dags.c.bundle_version,
    )
    return [DagVersionRow(*row) for row in conn.execute(statement)]


def _document(data: Any, compressed: bytes | None) -> dict[str, Any]:
    if compressed:
        return json.loads(zlib.decompress(compressed))
    return json.loads(data) if isinstance(data, str | bytes) else data


def deserialize_dag(document: dict[str, Any]) -> Any:
    """A ``SerializedDAG`` from its serialized document (as stored, or serialized in memory from a parsed DAG)."""
    from airflow_lineage_provider.airflow_compat import DagSerialization

    # Public API only: Airflow's private switch that skips operator extra links (and so loading the
    # plugins, once per process) is left alone; a task process has its plugins loaded already.
    return DagSerialization.from_dict(document)


def load_dags(conn: Connection, rows: Sequence[DagVersionRow], chunk: int = 50) -> Iterator[LoadedDag]:
    """Deserialize the DAGs of ``rows`` (their latest versions), ``chunk`` rows per query."""
    tables = _tables(conn)
    serialized = tables[0]
    by_id = {row.dag_id: row for row in rows}
    ids = list(by_id)
    for start in range(0, len(ids), chunk):
        statement = _latest_select(
            tables,
            ids[start : start + chunk],
            serialized.c.dag_id,
            serialized.c.dag_hash,
            serialized.c.data,
            serialized.c.data_compressed,
        )
        for dag_id, dag_hash, data, compressed in conn.execute(statement):
            # The hash read with the data: a version written since the listing is the one published.
            row = replace(by_id[dag_id], dag_hash=dag_hash)
            yield LoadedDag(row, deserialize_dag(_document(data, compressed)))
