"""Schema migrations of the package's own stores (the lineage store and the outbox), run with Alembic.

Each store has an Alembic script directory in the package (``consumer/store/schema/alembic``, ``outbox/alembic``)
holding one revision per schema version, and records its revision in a version table of its own
(:attr:`StoreSchema.version_table`), never in ``alembic_version``: the outbox may live in Airflow's
metadata database, whose ``alembic_version`` is Airflow's. Revision ids are the schema versions in four
digits (``0001``, ``0002``...): ``version N`` in the changelog, in errors and in the store's own version
record is revision ``000N``.

:meth:`StoreSchema.migrate` brings a store to head inside the transaction the caller opened (see
:func:`migration_transaction`: concurrent first uses wait for each other), so a migration and its stamp
commit together or not at all:

* a database without the store gets the tables as declared (which always describe head) and is stamped
  head, without running the revisions one by one;
* a store written before the schemas moved to Alembic has no version table yet, only the version its
  hand-written runner recorded (``lineage_schema_version``, ``lineage_outbox_schema``): it is adopted,
  stamped with the revision of that version, then upgraded like any other;
* a store at a revision this code does not know (written by a newer release) is refused with the store's
  own error, naming what was found;
* every store also keeps recording its version where the hand-written runners read it, so an older
  release refuses a store migrated past what it knows instead of writing into it.

A store already at head costs one query and does not import Alembic (the outbox opens its engine in every
task process that emits lineage).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Engine, column, inspect, select, table, text

from airflow_lineage_provider.sqlite_engine import WRITE
from airflow_lineage_provider.sqlite_writers import SqliteWriters, writer_turn

if TYPE_CHECKING:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

#: Digits of a revision id (``0007`` is schema version 7).
REVISION_DIGITS = 4


def revision_of(version: int) -> str:
    """The revision id of schema ``version``: ``revision_of(7) == "0007"``."""
    return f"{version:0{REVISION_DIGITS}d}"


def version_of(revision: str) -> int | None:
    """The schema version of ``revision`` (``"0007"`` → 7), ``None`` for an id that is not a version number."""
    return int(revision) if revision.isdigit() else None


@contextmanager
def migration_transaction(
    engine: Engine, lock_id: int, writers: SqliteWriters | None = None, timeout: float = 0.0
) -> Iterator[Connection]:
    """A connection in the transaction a migration runs in, holding the store's migration lock.

    SQLite: ``BEGIN IMMEDIATE`` (the write lock, waited for up to the busy timeout), after this write's turn in
    ``writers`` (the store's writers' queue, waited for at most ``timeout`` seconds, the busy timeout being its
    rest: :func:`~airflow_lineage_provider.sqlite_writers.writer_turn`), so the check of a process opening a
    store others are writing to queues with their writes rather than losing SQLite's lock to them; PostgreSQL:
    the transaction-scoped advisory lock ``lock_id``. Either way a second process opening the store at the same
    time waits, then finds it migrated.
    """
    with engine.connect() as conn:
        conn = conn.execution_options(**{WRITE: True})
        driver = conn.connection.dbapi_connection if writers is not None else None
        with writer_turn(writers, timeout, driver), conn.begin():
            if conn.dialect.name == "postgresql":
                conn.execute(text("SELECT pg_advisory_xact_lock(:id)"), {"id": lock_id})
            yield conn


@dataclass(frozen=True)
class StoreSchema:
    """One store's schema history, and how to create, adopt and upgrade the store."""

    #: The Alembic script directory as a package resource, e.g. ``"airflow_lineage_provider.outbox:alembic"``.
    script_location: str
    #: The table holding the store's Alembic revision (one per store; never Airflow's ``alembic_version``).
    version_table: str
    #: The schema version this code reads and writes: the head revision is ``revision_of(latest)``.
    latest: int
    #: Creates the store at head in a database without it: tables from their declarations, first rows.
    create: Callable[[Connection], None]
    #: The version recorded where the hand-written runners kept it (``None`` when that record is absent).
    recorded_version: Callable[[Connection], int | None]
    #: Records that the store went from version ``before`` to ``after``, where older releases read it.
    record_version: Callable[[Connection, int, int], None]
    #: The error for a store newer than this code, given the connection and what was found
    #: (``"schema version 12"``, ``"schema revision 'ab12'"``).
    too_new: Callable[[Connection, str], Exception]

    @property
    def head(self) -> str:
        """The revision this code reads and writes."""
        return revision_of(self.latest)

    def stored_revisions(self, conn: Connection) -> list[str] | None:
        """The revisions in the store's version table (one for a linear history), ``None`` without the table."""
        if not inspect(conn).has_table(self.version_table):
            return None
        return list(conn.execute(select(column("version_num")).select_from(table(self.version_table))).scalars())

    def current_version(self, conn: Connection) -> int | None:
        """The store's schema version (0 for a revision that is not a version number), ``None`` without the store."""
        revisions = self.stored_revisions(conn)
        if revisions:
            return max(version_of(revision) or 0 for revision in revisions)
        return self.recorded_version(conn)

    def migrate(self, conn: Connection) -> int:
        """Create, adopt or upgrade the store on ``conn`` (in its open transaction); answer the version it had
        (0 for a new store). Raises :attr:`too_new`'s error for a store newer than this code."""
        revisions = self.stored_revisions(conn)
        if revisions == [self.head]:
            return self.latest
        if not revisions:
            found = self.recorded_version(conn)
            if found is None:
                self.create(conn)
                self._stamp(conn, self.head)
                return 0
            if found > self.latest:
                raise self.too_new(conn, f"schema version {found}")
            self._stamp(conn, revision_of(found))  # adopted: the hand-written runner's version is this revision
        else:
            self._check_known(conn, revisions)
            found = min(version_of(revision) or 0 for revision in revisions)
        from alembic import command

        command.upgrade(self._config(conn), "head")
        self.record_version(conn, found, self.latest)
        return found

    def _check_known(self, conn: Connection, revisions: list[str]) -> None:
        known = {script.revision for script in _script_directory(self.script_location).walk_revisions()}
        for revision in revisions:
            version = version_of(revision)
            if version is not None and version > self.latest:
                raise self.too_new(conn, f"schema version {version}")
            if revision not in known:
                raise self.too_new(conn, f"schema revision {revision!r}")

    def _stamp(self, conn: Connection, revision: str) -> None:
        """Record ``revision`` in the version table (created if need be) without running anything."""
        from alembic.runtime.migration import MigrationContext

        context = MigrationContext.configure(conn, opts={"version_table": self.version_table})
        context.stamp(_script_directory(self.script_location), revision)

    def _config(self, conn: Connection) -> Config:
        config = _config(self.script_location, {"connection": conn})
        config.set_main_option("version_table", self.version_table)
        return config

    def new_revision(self, message: str) -> str:
        """Write the file of the next revision (``revision_of(latest + 1)``) from the script directory's
        template, for a developer to fill in; answer its path. Then raise :attr:`latest` where it is defined."""
        from alembic import command

        written = command.revision(_config(self.script_location), message=message, rev_id=revision_of(self.latest + 1))
        scripts = written if isinstance(written, list) else [written]
        return ", ".join(script.path for script in scripts if script is not None)


def _config(script_location: str, attributes: dict[str, Any] | None = None) -> Config:
    from alembic.config import Config

    config = Config(attributes=attributes or {})
    config.set_main_option("script_location", script_location)
    config.set_main_option("file_template", "%%(rev)s_%%(slug)s")  # 0011_what_it_changes.py
    return config


@cache
def _script_directory(script_location: str) -> ScriptDirectory:
    """The revisions at ``script_location``, read once per process (a new store is stamped with them)."""
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(_config(script_location))


def run_migrations() -> None:
    """The body of each store's ``env.py``: run the revisions Alembic chose on the connection the caller passed
    (``config.attributes["connection"]``, in its open transaction), recording them in the store's version table.
    """
    from alembic import context

    config = context.config
    connection = config.attributes.get("connection")
    if connection is None or context.is_offline_mode():
        raise RuntimeError(
            f"the migrations in {config.get_main_option('script_location')} run on an open connection: "
            "use the store's migrate(), not the alembic command line"
        )
    context.configure(
        connection=connection,
        version_table=config.get_main_option("version_table") or "",
        transaction_per_migration=False,
    )
    with context.begin_transaction():  # the caller's transaction: nothing commits here
        context.run_migrations()
