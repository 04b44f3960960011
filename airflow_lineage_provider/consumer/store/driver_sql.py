"""The ingest's prebuilt statements run on the driver's cursor: compiled once, not once per execution.

An ingest transaction of one to three events runs about a dozen small statements, and SQLAlchemy's work per
statement (cache lookup, execution context, a bind processor call per value, result setup) cost several times
what the database spent running it. Here each prebuilt statement is compiled once per dialect — on SQLite
once per row count too, as the multi-row ``VALUES`` SQLAlchemy would send — into the driver's SQL text and
parameter order, then run on the DBAPI cursor of the same connection, inside its transaction. Values are
converted as the statement's bind processors would convert them (SQLAlchemy's own processors, but for SQLite
times, converted by :func:`sqlite_time` to the same text); ``tests/test_consumer_ingest_statements.py`` holds
every table's rows to what the SQLAlchemy statements store.

Each function answers ``None`` when it does not run the statement, and the caller runs it through
SQLAlchemy: a driver other than pysqlite, psycopg2 or psycopg (3), an engine with cursor-execute listeners
(tests counting statements, tracing) or echo on, an ``IN`` list longer than :data:`MAX_ROWS`. A driver error is
raised as SQLAlchemy raises it (``sqlalchemy.exc.OperationalError``, ... with ``connection_invalidated``), so
retries and error answers do not depend on the path.

On psycopg2, writes whose answers nobody reads can also be held and sent together (:func:`one_round_trip`):
on PostgreSQL most of what a small batch still costs is the round trips.

On psycopg2 the statements are also prepared on the server (:class:`ServerSide`): psycopg2 sends each statement
as text, which the server parses and plans every time — for the ingest's big ``INSERT ... SELECT FROM unnest(...)
ON CONFLICT DO UPDATE`` upserts most of what a small batch costs the server. Each DBAPI connection gets
``PREPARE lineage_ingest_<hash> (types) AS ...`` once, then only ``EXECUTE lineage_ingest_<hash> (...)``; which
statements a connection has prepared is kept in its pool record's ``info``, so a new connection (one replaced after
invalidation too) prepares again. A ``PREPARE`` goes in a string of its own, never with data: the server keeps the
whole string a statement was prepared from for the life of the session, so a ``PREPARE`` sent with its first
``EXECUTE`` would keep that execution's arrays (and those of every write sent with it) in the backend's memory.
``PREPARE`` is not transactional: a statement prepared in a transaction that rolls back stays prepared, but one
whose ``PREPARE`` failed does not exist; after any error on the driver's cursor the connection's list is read again
from ``pg_prepared_statements`` before its next statement. psycopg (3) prepares on its own (after five executions
of a statement). Named prepared statements do not survive a pooler that hands each transaction another server
connection (PgBouncer in transaction mode): turn them off with ``LINEAGE_STORE_PREPARED_STATEMENTS=off`` in the
environment, or the engine execution option ``lineage_prepared_statements=False``
(:data:`PREPARED_STATEMENTS_OPTION`).

psycopg2 sends a Python list as an ``ARRAY[...]`` constructor, which the server parses into an expression per
element and folds into an array: hundreds of bytes of backend memory and about a microsecond per element, several
times what the values weigh. The arrays go as one array literal each instead (``'{...}'::TEXT[]``, read by the
server's array input in one pass): :func:`array_text`, :func:`integer_array_text`.
"""

from __future__ import annotations

import hashlib
import os
import re
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

from sqlalchemy import ARRAY, Connection, Integer, bindparam
from sqlalchemy.engine import Dialect

from airflow_lineage_provider.consumer.store.statements import Statement
from airflow_lineage_provider.consumer.store.tables import UtcDateTime, as_utc

#: ``(dialect, driver, paramstyle)`` of the connections whose statements run on the driver's cursor.
DRIVERS = frozenset(
    {("sqlite", "pysqlite", "qmark"), ("postgresql", "psycopg2", "pyformat"), ("postgresql", "psycopg", "pyformat")}
)
#: Most rows (SQLite) per statement compiled for — a larger batch is sent in statements of at most this many rows,
#: in order (8 concurrent single-event requests make groups of 30-40 nodes: through SQLAlchemy, those were 8% of
#: the server's CPU) — and most values of an ``IN`` list (a longer one goes through SQLAlchemy).
MAX_ROWS = 32

Processor = Callable[[Any], Any] | None

#: Engine (or connection) execution option: ``False`` turns the server-side prepared statements off (psycopg2).
PREPARED_STATEMENTS_OPTION = "lineage_prepared_statements"
#: Whether psycopg2 connections prepare the statements on the server when no execution option says otherwise:
#: on unless the environment's ``LINEAGE_STORE_PREPARED_STATEMENTS`` is ``off`` (``0``, ``false``, ``no``).
PREPARED_STATEMENTS = os.environ.get("LINEAGE_STORE_PREPARED_STATEMENTS", "on").strip().lower() not in {
    "off",
    "0",
    "false",
    "no",
}
#: What the names of the statements this module prepares start with.
NAME_PREFIX = "lineage_ingest_"
#: Most bytes of writes :func:`one_round_trip` holds before it sends them (what it holds is sent in order, so
#: sending early changes nothing but the round trips; this bounds the string on both ends).
HELD_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True)
class ServerSide:
    """A psycopg2 statement as a prepared statement of the server: ``prepare`` creates it (``PREPARE name (types)
    AS ...``, the SQL's ``%(name)s`` parameters as ``$1``, ``$2``, ... in order of first use) and ``execute`` runs
    it with the same pyformat parameters as the statement (``EXECUTE name (%(c_a)s::TEXT[], ...)``). Both are in
    pyformat text (a ``%`` of the SQL stays ``%%``): they go through psycopg2's parameter binding."""

    name: str
    prepare: str
    execute: str


_PYFORMAT = re.compile(r"%%|%\(([^)]*)\)s")


def server_side(sql: str, types: dict[str, str]) -> ServerSide:
    """``sql`` (pyformat) as a statement prepared on the server; ``types`` gives the PostgreSQL type of the named
    parameters that have to be declared (arrays: ``unnest($1, $2)`` infers none), others are inferred from where
    they stand (``unknown``), as psycopg2's literals are. The name is a hash of what is prepared, so it is the same
    in every process and never names another statement."""
    order: dict[str, int] = {}

    def numbered(match: re.Match[str]) -> str:
        name = match.group(1)
        if name is None:
            return match.group(0)
        return f"${order.setdefault(name, len(order) + 1)}"

    body = _PYFORMAT.sub(numbered, sql)
    declared = ", ".join(types.get(name, "unknown") for name in order)
    definition = f"({declared}) AS {body}" if order else f"AS {body}"
    name = NAME_PREFIX + hashlib.sha1(definition.encode()).hexdigest()[:20]
    arguments = ", ".join(f"%({n})s::{types[n]}" if n in types else f"%({n})s" for n in order)
    return ServerSide(
        name=name,
        prepare=f"PREPARE {name} {definition}",
        execute=f"EXECUTE {name} ({arguments})" if order else f"EXECUTE {name}",
    )


@lru_cache(maxsize=4096)
def sqlite_time(value: datetime) -> str:
    """A time as :class:`.tables.UtcDateTime` stores it on SQLite: naive UTC text, ``2026-01-01 00:02:00.000000``
    (``UtcDateTime.process_bind_param``, then SQLAlchemy's SQLite ``DATETIME`` format), memoized: a batch
    repeats few times many times over."""
    return as_utc(value).replace(tzinfo=None).isoformat(" ", "microseconds")


def _sqlite_time_or_none(value: datetime | None) -> str | None:
    return None if value is None else sqlite_time(value)


@dataclass(frozen=True)
class Prepared:
    """A statement compiled for a driver: its SQL, and how to build its parameters from a list of variables.

    ``slots`` gives, per parameter in the SQL's order (qmark) or per named parameter (pyformat), the index of
    the variable it takes or ``-1`` for a constant of the statement (``constants``, already processed);
    ``processors`` converts each variable as the statement's bind processor would.
    """

    sql: str
    names: tuple[str, ...]
    slots: tuple[int, ...]
    constants: tuple[Any, ...]
    processors: tuple[Processor, ...]
    positional: bool
    server: ServerSide | None = None

    def parameters(self, variables: Sequence[Any]) -> Sequence[Any] | dict[str, Any]:
        """The driver's parameters for ``variables`` (unprocessed values, in the statement's variable order)."""
        processed = list(variables)
        for index, processor in enumerate(self.processors):
            if processor is not None:
                processed[index] = processor(processed[index])
        pairs = zip(self.slots, self.constants, strict=True)
        values = [processed[slot] if slot >= 0 else constant for slot, constant in pairs]
        return values if self.positional else dict(zip(self.names, values, strict=True))


def _quoted(value: Any) -> str:
    text = value if isinstance(value, str) else str(value)
    if '"' in text or "\\" in text:
        text = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{text}"'


def array_text(values: Sequence[Any]) -> str:
    """``values`` (text or ``None``) as a PostgreSQL array literal: ``{"a","b\\"c",NULL}``."""
    if not values:
        return "{}"
    # Most arrays: text and NULLs, nothing to escape (the only quotes are the separators'). A NULL goes as NUL
    # first (no stored text holds one), then as NULL, unquoted.
    nulls = values.count(None)
    texts = ["\x00" if value is None else value for value in values] if nulls else values
    try:
        joined = '","'.join(texts)
    except TypeError:  # a value that is not text
        joined = '"'
    if joined.count('"') != 2 * (len(texts) - 1) or "\\" in joined or joined.count("\x00") != nulls:
        return "{" + ",".join(["NULL" if value is None else _quoted(value) for value in values]) + "}"
    literal = '{"' + joined + '"}'
    return literal.replace('"\x00"', "NULL") if nulls else literal


def integer_array_text(values: Sequence[Any]) -> str:
    """``values`` (integers or ``None``) as a PostgreSQL array literal: ``{1,2,NULL}``."""
    if None in values:
        return "{" + ",".join(["NULL" if value is None else f"{value:d}" for value in values]) + "}"
    return "{" + ",".join([f"{value:d}" for value in values]) + "}"


def _processor(bind: Any, dialect: Dialect) -> Processor:
    if dialect.name == "sqlite" and isinstance(bind.type, UtcDateTime):
        return _sqlite_time_or_none
    impl = bind.type.dialect_impl(dialect)
    if isinstance(impl, ARRAY) and dialect.driver == "psycopg2":  # one literal per array (see the module)
        return integer_array_text if isinstance(impl.item_type, Integer) else array_text
    if isinstance(impl, ARRAY) and impl.item_type.dialect_impl(dialect).bind_processor(dialect) is None:
        return None  # SQLAlchemy's would copy the list (of scalars, the arrays of .statements): the same values
    processor: Processor = impl.bind_processor(dialect)
    return processor


def _prepare(
    statement: Any, dialect: Dialect, variables: Sequence[str], expanded: dict[str, Any] | None = None
) -> Prepared:
    """Compile ``statement`` for ``dialect``; ``variables`` names its bind parameters the caller gives values
    for, in order. With ``expanded`` (``{expanding parameter: n distinct placeholder values}``), the statement is
    expanded for that many values and the variables are the expanded parameters, in the given values' order."""
    compiled = statement.compile(dialect=dialect)
    if expanded is None:
        sql, positions, params = compiled.string, compiled.positiontup, compiled.params
        index = {name: i for i, name in enumerate(variables)}
    else:
        state = compiled.construct_expanded_state(expanded)
        sql, positions, params = state.statement, state.positiontup, state.parameters
        placeholder = {value: i for values in expanded.values() for i, value in enumerate(values)}
        index = {
            name: placeholder[value]
            for name, value in params.items()
            if isinstance(value, str) and value in placeholder
        }
        variables = sorted(index, key=index.__getitem__)
    names = tuple(positions) if positions is not None else tuple(params)
    expanding = next(iter(expanded)) if expanded else None
    processors = {
        name: _processor(compiled.binds[expanding if name in index and expanding else name], dialect) for name in names
    }
    constants = tuple(
        None if name in index else (params[name] if processors[name] is None else processors[name](params[name]))  # type: ignore[misc]
        for name in names
    )
    server = None
    if dialect.driver == "psycopg2":
        binds = {name: compiled.binds.get(expanding if name in index and expanding else name) for name in names}
        types = {
            name: dialect.type_compiler_instance.process(bind.type)
            for name, bind in binds.items()
            if bind is not None and isinstance(bind.type, ARRAY)
        }
        server = server_side(sql, types)
    return Prepared(
        sql=sql,
        names=names,
        slots=tuple(index.get(name, -1) for name in names),
        constants=constants,
        processors=tuple(processors[name] for name in variables),
        positional=positions is not None,
        server=server,
    )


#: Per dialect (an engine's), the statements prepared for it: ``(kind, id of the statement, shape) → Prepared``.
_prepared: weakref.WeakKeyDictionary[Dialect, dict[tuple[Any, ...], tuple[Any, Prepared]]] = weakref.WeakKeyDictionary()


def _cached(dialect: Dialect, key: tuple[Any, ...], statement: Any, build: Callable[[], Prepared]) -> Prepared:
    known = _prepared.setdefault(dialect, {})
    found = known.get(key)
    if found is None or found[0] is not statement:
        # The statement is kept with what was compiled from it, so its id is never another's while cached.
        found = known[key] = (statement, build())
    return found[1]


def driver_connection(conn: Connection) -> Any | None:
    """The DBAPI connection of ``conn`` when its statements can run on the driver's cursor, else ``None``."""
    dialect = conn.dialect
    if (dialect.name, dialect.driver, dialect.paramstyle) not in DRIVERS or conn.engine.echo:
        return None
    if conn.dispatch.before_cursor_execute or conn.dispatch.after_cursor_execute:
        return None
    return conn.connection.dbapi_connection


#: ``Connection.info`` key (the pool record's, kept while its DBAPI connection lives) of the statements prepared
#: on the connection: ``(DBAPI connection, names)``, names ``None`` when they must be read from the server.
_PREPARED = "lineage_driver_sql_prepared"


def _server_side(conn: Connection, prepared: Prepared) -> ServerSide | None:
    """How ``prepared`` runs on the server, when it runs as a prepared statement on ``conn``."""
    if prepared.server is None:
        return None
    option = conn.get_execution_options().get(PREPARED_STATEMENTS_OPTION)
    return prepared.server if (PREPARED_STATEMENTS if option is None else option) else None


def _known(conn: Connection, driver: Any) -> set[str]:
    """The names of the statements prepared on ``driver`` (``conn``'s DBAPI connection): none on a connection not
    seen before, read from ``pg_prepared_statements`` after an error (whether its ``PREPARE`` ran is unknown)."""
    entry: tuple[Any, set[str] | None] | None = conn.info.get(_PREPARED)
    if entry is not None and entry[0] is driver and entry[1] is not None:
        return entry[1]
    names = set() if entry is None or entry[0] is not driver else _read_prepared(conn, driver)
    conn.info[_PREPARED] = (driver, names)
    return names


def _read_prepared(conn: Connection, driver: Any) -> set[str]:
    sql = "SELECT name FROM pg_prepared_statements WHERE starts_with(name, %(prefix)s)"
    cursor = driver.cursor()
    try:
        cursor.execute(sql, {"prefix": NAME_PREFIX})
        return {name for (name,) in cursor.fetchall()}
    except conn.dialect.loaded_dbapi.Error as error:
        conn._handle_dbapi_exception(error, sql, {"prefix": NAME_PREFIX}, cursor, None)
    finally:
        cursor.close()


def _forget(conn: Connection, driver: Any) -> None:
    """After an error on ``driver``: which statements it has prepared is read from the server before the next."""
    if conn.info.get(_PREPARED) is not None:
        conn.info[_PREPARED] = (driver, None)


def _sql(
    conn: Connection, driver: Any, prepared: Prepared, preparing: set[str] | None = None
) -> tuple[str, ServerSide | None]:
    """The SQL to send for ``prepared`` on ``conn`` (the statement itself, or its ``EXECUTE``), and the statement to
    prepare on the server before it, when neither the connection nor ``preparing`` (what is held to be sent before
    it) has it."""
    server = _server_side(conn, prepared)
    if server is None:
        return prepared.sql, None
    if server.name in _known(conn, driver) or (preparing is not None and server.name in preparing):
        return server.execute, None
    return server.execute, server


def _run(conn: Connection, driver: Any, prepared: Prepared, variables: Sequence[Any]) -> list[Any]:
    flush(conn)
    parameters = prepared.parameters(variables)
    sql, preparing = _sql(conn, driver, prepared)
    cursor = driver.cursor()
    try:
        if preparing is not None:
            sql = preparing.prepare  # named in the error, if it fails
            cursor.execute(sql, ())  # a string of its own (see the module); () turns its %% into %
            _known(conn, driver).add(preparing.name)
            sql = preparing.execute
        cursor.execute(sql, parameters)
        return cursor.fetchall() if cursor.description is not None else []
    except conn.dialect.loaded_dbapi.Error as error:
        _forget(conn, driver)
        # What SQLAlchemy does with a driver error: the disconnect check, then its exception class.
        conn._handle_dbapi_exception(error, sql, parameters, cursor, None)
    finally:
        cursor.close()


#: ``Connection.info`` key of the writes :func:`one_round_trip` holds back (:class:`_Held`).
_HELD = "lineage_driver_sql_held"


@dataclass
class _Held:
    """The writes held: their SQL, parameters bound (and its bytes in all), and the statements to prepare on the
    server before they are sent (``PREPARE`` texts in pyformat, their names)."""

    sql: list[bytes]
    preparing: set[str]
    prepares: list[str]
    size: int = 0


@contextmanager
def one_round_trip(conn: Connection) -> Iterator[None]:
    """Send the writes of the block whose answers nobody reads (:func:`write_rows` with ``answers=False``) to the
    database together, as one multi-statement string, when the block ends; in the same order, as the same
    statements, so nothing changes but the round trips (each cost ~0.1 ms of CPU on PostgreSQL, a tenth of a
    small batch's ingest).

    Only with psycopg2 (its parameters are bound in the client: ``cursor.mogrify``, what its ``execute`` sends);
    elsewhere, and for statements SQLAlchemy runs, each runs when called. Any statement run on the connection in
    the block through this module first sends what is held; a statement run through SQLAlchemy in the block must
    not read what the held writes write. On an error in the block nothing held is sent.
    """
    if conn.dialect.driver != "psycopg2" or driver_connection(conn) is None or _HELD in conn.info:
        yield
        return
    conn.info[_HELD] = _Held([], set(), [])
    try:
        yield
        flush(conn)
    finally:
        conn.info.pop(_HELD, None)


def flush(conn: Connection) -> None:
    """Send the writes :func:`one_round_trip` holds on ``conn`` (nothing when it holds none)."""
    held: _Held | None = conn.info.get(_HELD)
    if held is None or not held.sql:
        return
    sql = b";\n".join(held.sql)
    preparing, prepares = set(held.preparing), ";\n".join(held.prepares)
    held.sql.clear()
    held.preparing.clear()
    held.prepares.clear()
    held.size = 0
    driver = conn.connection.dbapi_connection
    cursor = driver.cursor()  # type: ignore[union-attr]
    sent: str | bytes = prepares
    try:
        if prepares:  # a string of their own, before the data (see the module)
            cursor.execute(prepares, ())
            _known(conn, driver).update(preparing)
        sent = sql
        cursor.execute(sql)
    except conn.dialect.loaded_dbapi.Error as error:
        _forget(conn, driver)
        shown = sent.decode(errors="replace") if isinstance(sent, bytes) else sent
        conn._handle_dbapi_exception(error, shown, None, cursor, None)
    finally:
        cursor.close()


def _hold(conn: Connection, driver: Any, prepared: Prepared, variables: Sequence[Any]) -> bool:
    """Hold the write for :func:`one_round_trip`'s single send, if one is open on ``conn``."""
    held: _Held | None = conn.info.get(_HELD)
    if held is None:
        return False
    sql, preparing = _sql(conn, driver, prepared, held.preparing)
    cursor = driver.cursor()
    try:
        bound = cursor.mogrify(sql, prepared.parameters(variables))
    finally:
        cursor.close()
    held.sql.append(bound)
    held.size += len(bound)
    if preparing is not None:
        held.preparing.add(preparing.name)
        held.prepares.append(preparing.prepare)
    if held.size > HELD_BYTES:
        flush(conn)
    return True


def write_rows(
    conn: Connection, statement: Statement, rows: list[dict[str, Any]], answers: bool = True
) -> list[Any] | None:
    """Run a prebuilt insert (:mod:`.statements`) with ``rows``, as SQLAlchemy would send them; the rows it
    answers (``RETURNING``) as tuples, or ``None`` when SQLAlchemy has to run it. Without ``answers`` (the
    caller reads no answer) the write may be held until :func:`one_round_trip` ends (answering ``[]``)."""
    driver = driver_connection(conn)
    if driver is None or not rows:
        return None
    dialect = conn.dialect
    sql = statement.sql
    if statement.columns:  # one array per column (PostgreSQL)
        names = [f"c_{name}" for name in statement.columns]
        prepared = _cached(dialect, ("arrays", id(sql)), sql, lambda: _prepare(sql, dialect, names))
        variables = arrays(statement, rows)
        if not answers and _hold(conn, driver, prepared, variables):
            return []
        return _run(conn, driver, prepared, variables)
    columns = tuple(rows[0])
    answered: list[Any] = []
    for start in range(0, len(rows), MAX_ROWS):  # rows in order, at most MAX_ROWS per statement
        part = rows[start : start + MAX_ROWS]
        count = len(part)
        prepared = _cached(
            dialect,
            ("rows", id(sql), columns, count),
            sql,
            lambda count=count: _prepare_rows(sql, dialect, columns, count),  # type: ignore[misc]
        )
        answered += _run(conn, driver, prepared, [row[name] for row in part for name in columns])
    return answered


def _prepare_rows(sql: Any, dialect: Dialect, columns: tuple[str, ...], count: int) -> Prepared:
    table = sql.table
    values = [{name: bindparam(f"r{i}_{name}", type_=table.c[name].type) for name in columns} for i in range(count)]
    return _prepare(sql.values(values), dialect, [f"r{i}_{name}" for i in range(count) for name in columns])


def arrays(statement: Statement, rows: list[dict[str, Any]]) -> list[list[Any]]:
    """One list per column of ``statement``, times as ISO 8601 UTC text (what its arrays take)."""
    return [
        utc_texts(row.get(name) for row in rows) if name in statement.times else [row.get(name) for row in rows]
        for name in statement.columns
    ]


def utc_texts(values: Any) -> list[str | None]:
    """``values`` (times or ``None``) as ISO 8601 UTC text, each distinct time converted once.

    A batch repeats few times many times over (an event's time goes to its nodes, edges and groups):
    the conversion, ~1 us each, was 6% of a PostgreSQL batch's ingest before the memo.
    """
    texts: dict[datetime, str] = {}
    out: list[str | None] = []
    for value in values:
        if value is None:
            out.append(None)
            continue
        text = texts.get(value)
        if text is None:
            text = texts[value] = as_utc(value).isoformat()
        out.append(text)
    return out


def select_in(conn: Connection, query: Any, parameter: str, values: Sequence[Any]) -> list[Any] | None:
    """The rows of ``query`` (a prebuilt ``SELECT`` whose only parameter is the expanding ``parameter``) for
    ``values``, or ``None`` when SQLAlchemy has to run it. Only for queries whose columns need no result
    processing (keys, ids, text)."""
    driver = driver_connection(conn)
    if driver is None or not values or len(values) > MAX_ROWS:
        return None
    dialect = conn.dialect
    count = len(values)
    placeholders = {parameter: [f"\x00placeholder {i}" for i in range(count)]}
    prepared = _cached(
        dialect, ("in", id(query), count), query, lambda: _prepare(query, dialect, (), expanded=placeholders)
    )
    return _run(conn, driver, prepared, values)


def select_all(conn: Connection, query: Any) -> list[Any] | None:
    """The rows of ``query`` (a prebuilt ``SELECT`` without parameters of its caller's, whose columns need no
    result processing), or ``None`` when SQLAlchemy has to run it."""
    driver = driver_connection(conn)
    if driver is None:
        return None
    dialect = conn.dialect
    prepared = _cached(dialect, ("select", id(query)), query, lambda: _prepare(query, dialect, ()))
    return _run(conn, driver, prepared, ())
