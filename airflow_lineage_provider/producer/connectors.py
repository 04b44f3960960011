"""Connectors: where a ``"database/table"`` dataset gets its OpenLineage name and its schema.

``connector=`` takes one of these, or a dict mapping the database prefix of ``"database/table"`` strings
to one of these:

* a SQLAlchemy ``Engine``;
* an Airflow connection id (``"postgres_default"``), resolved to the connection's hook;
* an Airflow hook offering a SQLAlchemy engine (any ``DbApiHook``: Postgres, MySQL, SQLite, ...);
* any object with ``get_table_schema(table)`` returning fields in a form ``schema_facet`` accepts, and
  optionally a ``namespace`` attribute and a ``dataset_name(table)`` method, or a ``url`` / ``engine``
  attribute naming its database (see :class:`CallableSource`: without any of these, the prefix is kept
  as the database part of the name, so ``"db1/orders"`` and ``"db2/orders"`` stay two datasets).

A single connector (not a dict) serves every ``"database/table"`` string. Naming needs no database
connection (it comes from the URL); only the schema lookup at COMPLETE/FAIL connects. Each connector is
resolved once per run; one that cannot be resolved, and each table whose lookup fails, is logged and left
as it was without affecting the others.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
import time
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from openlineage.client.facet_v2 import schema_dataset

from airflow_lineage_provider import conf
from airflow_lineage_provider.producer.dataset_facets import schema_fields
from airflow_lineage_provider.producer.dataset_refs import DatasetRef
from airflow_lineage_provider.producer.naming import TableNaming, naming_for_url, split_table
from airflow_lineage_provider.reporting import report_misuse, warn_once

CONNECTOR_FORMS = (
    "a SQLAlchemy Engine, an Airflow connection id, an Airflow hook with get_sqlalchemy_engine() "
    "(any DbApiHook), an object with get_table_schema(table), or a dict mapping the database prefix of "
    "'database/table' strings to one of these"
)


@runtime_checkable
class TableSchemaSource(Protocol):
    """The duck type of a user-supplied schema source."""

    def get_table_schema(self, table: str) -> Any: ...


class SchemaSource(Protocol):
    """A resolved connector: names tables and looks up their columns.

    ``remote`` sources (database connections) are looked up on helper threads under a deadline; the
    others on the calling thread (see :func:`add_schemas`).
    """

    @property
    def namespace(self) -> str: ...
    @property
    def remote(self) -> bool: ...

    def dataset_name(self, table: str) -> str: ...

    def columns(self, table: str) -> list[schema_dataset.SchemaDatasetFacetFields]: ...


@dataclass
class SqlAlchemySource:
    """Tables of a database reached through a SQLAlchemy engine; columns from the inspector."""

    engine: Any
    naming: TableNaming

    @property
    def namespace(self) -> str:
        return self.naming.namespace

    def dataset_name(self, table: str) -> str:
        return self.naming.name(table)

    @property
    def remote(self) -> bool:
        """Whether lookups go over the network (anything but an in-memory SQLite database, whose
        connections are per thread and cannot hang)."""
        url = self.engine.url
        in_memory = url.get_backend_name() == "sqlite" and (
            url.database in (None, "", ":memory:") or "mode=memory" in str(url)
        )
        return not in_memory

    def columns(self, table: str) -> list[schema_dataset.SchemaDatasetFacetFields]:
        import sqlalchemy as sa

        schema, bare = split_table(table)
        if self.naming.backend in ("mysql", "mariadb") and schema is None:
            schema = self.naming.database
        with self.engine.connect() as connection:
            columns = sa.inspect(connection).get_columns(bare, schema=schema)
            if connection.dialect.name == "sqlite" and any(isinstance(c["type"], sa.types.NullType) for c in columns):
                declared = _sqlite_declared_types(connection, bare, schema)
            else:
                declared = {}
        return [
            schema_dataset.SchemaDatasetFacetFields(
                name=column["name"],
                type=_type_name(column["type"], self.engine.dialect, declared.get(column["name"])),
                description=column.get("comment") or None,
                ordinal_position=position,
                fields=None,
            )
            for position, column in enumerate(columns, start=1)
        ]


def _type_name(type_: Any, dialect: Any, declared: str | None = None) -> str | None:
    """The column type as the database names it; for a type SQLAlchemy does not know (``NullType``), the
    type the database declares (``declared``), else ``None``: the field is sent without a type."""
    import sqlalchemy as sa

    if isinstance(type_, sa.types.NullType):
        return declared or None
    try:
        return str(type_.compile(dialect=dialect))
    except Exception:  # a type the dialect cannot render
        return type(type_).__name__.upper()


def _sqlite_declared_types(connection: Any, table: str, schema: str | None) -> dict[str, str]:
    """Column name → the type SQLite declares for it (``""`` for none: a view's or ``CREATE TABLE AS``'s
    computed column, a column declared without a type)."""
    import sqlalchemy as sa

    if schema is None:
        query = sa.text("SELECT name, type FROM pragma_table_info(:table)").bindparams(table=table)
    else:
        query = sa.text("SELECT name, type FROM pragma_table_info(:table, :schema)").bindparams(
            table=table, schema=schema
        )
    return {str(name): str(type_ or "") for name, type_ in connection.execute(query)}


@dataclass
class CallableSource:
    """A user object with ``get_table_schema(table)``, asked on the calling thread it may be tied to.

    Its datasets are named, in this order of preference:

    * by the object's ``dataset_name(table)`` method and ``namespace`` attribute, when it has them;
    * from the database URL it exposes (a ``url`` attribute: a SQLAlchemy ``URL`` or URL string, or an
      ``engine`` attribute holding a SQLAlchemy ``Engine``), per the OpenLineage naming spec as engines are;
    * otherwise with the prefix it serves kept as the database part of the name (``"db1/orders"`` →
      ``db1.orders`` in ``[lineage_provider] namespace``), so that two prefixes never name one dataset.
    """

    target: Any
    #: The ``"database/..."`` prefix this source serves (``None`` for a string without one).
    prefix: str | None = None
    remote = False

    @property
    def naming(self) -> TableNaming | None:
        """The naming of the database the object exposes by URL, or ``None``."""
        return _naming_exposed_by(self.target)

    @property
    def namespace(self) -> str:
        namespace = getattr(self.target, "namespace", None)
        if isinstance(namespace, str) and namespace:
            return namespace
        naming = self.naming
        return naming.namespace if naming is not None else conf.namespace()

    def dataset_name(self, table: str) -> str:
        namer = getattr(self.target, "dataset_name", None)
        if callable(namer):
            return str(namer(table))
        namespace = getattr(self.target, "namespace", None)
        if isinstance(namespace, str) and namespace:  # the object names its server: the table is as given
            return table
        naming = self.naming
        if naming is not None:
            return naming.name(table)
        return f"{self.prefix}.{table}" if self.prefix else table

    def columns(self, table: str) -> list[schema_dataset.SchemaDatasetFacetFields]:
        return schema_fields(self.target.get_table_schema(table))


def _naming_exposed_by(target: Any) -> TableNaming | None:
    """The naming of the database a user object exposes (``url`` or ``engine`` attribute), or ``None``."""
    from sqlalchemy.engine import URL, make_url

    engine: Any = getattr(target, "engine", None)
    url = engine.url if engine is not None and _is_engine(engine) else getattr(target, "url", None)
    if isinstance(url, str):
        try:
            url = make_url(url)
        except Exception:  # not a database URL: the object does not tell its database
            return None
    return naming_for_url(url) if isinstance(url, URL) else None


def _is_engine(value: Any) -> bool:
    from sqlalchemy.engine import Engine

    return isinstance(value, Engine)


#: Per process: the source resolved for each Airflow connection id, and the engine made for each hook object,
#: so every lookup through one connector in a process checks a connection out of one pool (an Airflow
#: ``get_connection`` is a round trip to the supervisor, and ``get_sqlalchemy_engine`` a new engine and
#: pool each time it is called). A forked process (the stock listener forks per event) inherits them, with
#: its engines' pools replaced (:func:`_after_fork_in_child`): it never uses its parent's connections.
_sources_by_conn_id: dict[tuple[int, str, str | None], SqlAlchemySource] = {}
_engines_by_hook: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
_engines_in_use: weakref.WeakSet[Any] = weakref.WeakSet()
_cache_lock = threading.Lock()


def forget_resolved_connections() -> None:
    """Resolve Airflow connection ids again from now on (tests, and long-lived shells whose connections
    changed; :func:`~.client.reset` calls it)."""
    with _cache_lock:
        _sources_by_conn_id.clear()


def _after_fork_in_child() -> None:
    """In a forked child: give every engine the parent's lookups used a new, empty pool. The parent's
    connections are left to the parent (``close=False``: closing them here would close the parent's too)."""
    for engine in list(_engines_in_use):
        with contextlib.suppress(Exception):  # an engine without a pool: nothing to replace
            engine.dispose(close=False)


os.register_at_fork(after_in_child=_after_fork_in_child)


def _source_from_hook(hook: Any) -> SqlAlchemySource:
    try:
        engine = _engines_by_hook.get(hook)
    except TypeError:  # an object that cannot be weakly referenced: not cached
        engine = None
    if engine is None:
        engine = hook.get_sqlalchemy_engine()
        with contextlib.suppress(TypeError):  # an object that cannot be weakly referenced: not cached
            _engines_by_hook[hook] = engine
    naming = naming_for_url(engine.url)
    info_getter = getattr(hook, "get_openlineage_database_info", None)
    if callable(info_getter):
        try:
            # The stock SQL operators name datasets from this; using it keeps our names equal to theirs.
            info = info_getter(hook.get_connection(hook.get_conn_id()))
        except Exception:
            info = None
        if info is not None and getattr(info, "scheme", None):
            naming = naming.with_database_info(info.scheme, info.authority, info.database)
    _engines_in_use.add(engine)
    return SqlAlchemySource(engine, naming)


def _hook_for_conn_id(conn_id: str) -> Any:
    from airflow.sdk import BaseHook

    return BaseHook.get_connection(conn_id).get_hook()


def resolve_source(connector: Any) -> SchemaSource:
    """Resolve one connector (not a dict) to a :class:`SchemaSource`. Raises when it cannot.

    An Airflow connection id is resolved once per process (see ``_sources_by_conn_id``)."""
    if _is_engine(connector):
        _engines_in_use.add(connector)
        return SqlAlchemySource(connector, naming_for_url(connector.url))
    if isinstance(connector, str):
        # A connection given in the environment is looked up again when its variable changes.
        key = (os.getpid(), connector, os.environ.get(f"AIRFLOW_CONN_{connector.upper()}"))
        source = _sources_by_conn_id.get(key)
        if source is None:
            source = _source_from_hook(_hook_for_conn_id(connector))
            with _cache_lock:
                source = _sources_by_conn_id.setdefault(key, source)
        return source
    if callable(getattr(connector, "get_sqlalchemy_engine", None)):
        return _source_from_hook(connector)
    if isinstance(connector, TableSchemaSource):
        return CallableSource(connector)
    raise TypeError(f"connector {connector!r} ({type(connector).__name__}) is not supported; pass {CONNECTOR_FORMS}")


def _is_supported(connector: Any) -> bool:
    return (
        isinstance(connector, str)
        or _is_engine(connector)
        or callable(getattr(connector, "get_sqlalchemy_engine", None))
        or isinstance(connector, TableSchemaSource)
    )


class Connectors:
    """The connectors of one run, resolved lazily and at most once each."""

    def __init__(self, spec: Any = None) -> None:
        self._by_prefix: dict[str, Any] = {}
        self._single: Any = None
        self._resolved: dict[str | None, SchemaSource | None] = {}
        if spec is None:
            return
        if isinstance(spec, Mapping):
            for prefix, connector in spec.items():
                if _is_supported(connector):
                    self._by_prefix[str(prefix)] = connector
                else:
                    report_misuse(
                        TypeError(
                            f"connector for {prefix!r} is {connector!r} ({type(connector).__name__}); "
                            f"pass {CONNECTOR_FORMS}"
                        )
                    )
        elif _is_supported(spec):
            self._single = spec
        else:
            report_misuse(
                TypeError(f"connector {spec!r} ({type(spec).__name__}) is not supported; pass {CONNECTOR_FORMS}")
            )

    def __bool__(self) -> bool:
        return bool(self._by_prefix) or self._single is not None

    def _source(self, key: str | None, connector: Any) -> SchemaSource | None:
        if key not in self._resolved:
            try:
                self._resolved[key] = resolve_source(connector)
            except Exception as error:
                label = f"connector {key!r}" if key is not None else "connector"
                warn_once(
                    f"Lineage: {label} ({connector!r}) could not be resolved: {error}. Datasets it would "
                    "serve keep the default namespace and get no schema."
                )
                self._resolved[key] = None
        return self._resolved[key]

    def source_for(self, raw: str) -> tuple[SchemaSource, str] | None:
        """The source serving a ``"database/table"`` string and the table part, or ``None``."""
        prefix, sep, table = raw.partition("/")
        if self._single is not None:
            source = self._source(None, self._single)
            if isinstance(source, CallableSource):  # one object for every prefix: each keeps its own name
                source = dataclasses.replace(source, prefix=prefix if sep else None)
            return (source, table if sep else raw) if source else None
        if sep and prefix in self._by_prefix:
            source = self._source(prefix, self._by_prefix[prefix])
            if isinstance(source, CallableSource):
                source.prefix = prefix
            return (source, table) if source else None
        return None


def name_datasets(refs: list[DatasetRef], connectors: Connectors) -> None:
    """Give each ``"database/table"`` dataset (and column-lineage source) its connector's name, in place."""
    if not connectors:
        return
    default_namespace = conf.namespace()
    for ref in refs:
        if ref.raw is not None and (served := connectors.source_for(ref.raw)):
            source, table = served
            ref.namespace, ref.name = source.namespace, source.dataset_name(table)
        lineage = ref.facets.get("columnLineage")
        if isinstance(lineage, Mapping):
            for field in (lineage.get("fields") or {}).values():
                for input_field in field.get("inputFields") or []:
                    if input_field.get("namespace") == default_namespace and (
                        served := connectors.source_for(input_field.get("name", ""))
                    ):
                        source, table = served
                        input_field["namespace"], input_field["name"] = source.namespace, source.dataset_name(table)


def add_schemas(
    refs: list[DatasetRef],
    connectors: Connectors,
    known: dict[str, list[schema_dataset.SchemaDatasetFacetFields]] | None = None,
) -> None:
    """Add a ``schema`` facet from the database to each served dataset that has none, in place.

    ``known``: columns already looked up, by ``"database/table"`` string: those datasets are not looked up
    again, and what is looked up now is added to it (the mixin looks its datasets up in the task process,
    so that the listener's forked processes find them there).

    Lookups through database connections run on one helper thread per database, all of them within
    ``[lineage_provider] schema_lookup_timeout`` seconds: a database that hangs (a host that drops
    packets, a server that never answers) costs the task that long at most, and the datasets not looked
    up by then are sent without a schema. Objects with ``get_table_schema`` and in-memory SQLite are
    asked on the calling thread, which they may be tied to.
    """
    if not connectors:
        return
    wanted = []
    for ref in refs:
        if ref.raw is None or "schema" in ref.facets:
            continue
        if known is not None and ref.raw in known:
            if known[ref.raw]:
                ref.facets["schema"] = schema_dataset.SchemaDatasetFacet(
                    fields=known[ref.raw], producer=conf.producer()
                )
            continue
        if served := connectors.source_for(ref.raw):
            wanted.append((ref, *served))
    if not wanted:
        return
    looked_up: dict[int, list[schema_dataset.SchemaDatasetFacetFields]] = {}

    def look_up(indexes: list[int]) -> None:
        for index in indexes:
            ref, source, table = wanted[index]
            try:
                looked_up[index] = source.columns(table)
            except Exception as error:
                looked_up[index] = []
                warn_once(
                    f"Lineage: schema lookup of {ref.raw!r} ({source.namespace}) failed: {error}. "
                    "The dataset is sent without a schema."
                )

    # One helper thread per database, so that one that hangs holds up only its own datasets.
    per_database: dict[int, list[int]] = {}
    local: list[int] = []
    for index, (_ref, source, _table) in enumerate(wanted):
        if source.remote:
            per_database.setdefault(id(source), []).append(index)
        else:
            local.append(index)
    workers = [
        threading.Thread(target=look_up, args=(indexes,), name="lineage-schema-lookup", daemon=True)
        for indexes in per_database.values()
    ]
    timeout = conf.schema_lookup_timeout()
    deadline = None if timeout is None else time.monotonic() + timeout
    for worker in workers:
        worker.start()
    look_up(local)  # user objects and in-memory SQLite: on this thread (they may be tied to it)
    for worker in workers:
        worker.join(None if deadline is None else max(deadline - time.monotonic(), 0))
    answered = dict(looked_up)  # what came in time; a late answer changes nothing
    for index, (ref, source, _table) in enumerate(wanted):
        if index not in answered:
            warn_once(
                f"Lineage: schema lookup of {ref.raw!r} ({source.namespace}) did not answer within {timeout:g} s "
                "([lineage_provider] schema_lookup_timeout). The dataset is sent without a schema."
            )
        else:
            if known is not None and ref.raw is not None:  # it is: only named datasets are wanted
                known[ref.raw] = answered[index]  # an empty answer too: the lookup failed or found no table
            if answered[index]:
                ref.facets["schema"] = schema_dataset.SchemaDatasetFacet(
                    fields=answered[index], producer=conf.producer()
                )
