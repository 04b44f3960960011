"""``OutboxTransport``: an openlineage-python transport that appends events to the SQL outbox.

Select it by class path, in Airflow::

    [openlineage]
    transport = {"type": "airflow_lineage_provider.outbox.OutboxTransport"}

or anywhere through openlineage-python's configuration (``openlineage.yml``, or
``OPENLINEAGE__TRANSPORT__TYPE=airflow_lineage_provider.outbox.OutboxTransport`` and
``OPENLINEAGE__TRANSPORT__URL=sqlite:////path/outbox.db``). Without ``url`` it uses
``[lineage_provider] outbox_url``. The export DAG (or ``airflow-lineage ship``/``export``) delivers
what the outbox holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from openlineage.client.serde import Serde
from openlineage.client.transport.transport import Config, Transport

from airflow_lineage_provider.outbox import store
from airflow_lineage_provider.outbox.database import DEFAULT_SQLITE_SYNCHRONOUS, SQLITE_SYNCHRONOUS, parse_outbox_url
from airflow_lineage_provider.outbox.writer import DURABILITY, OutboxWriter
from airflow_lineage_provider.reporting import warn_once

#: SQLite ``PRAGMA synchronous`` of the transport's appends unless ``sqlite_synchronous`` says otherwise.
#:
#: ``NORMAL``: every append is committed through an fsync, so an event ``emit`` returned for survives the task
#: process being killed *and* the machine crashing (power loss, kernel panic) — the outbox's promise that no
#: event is lost — at the cost of that fsync on every append. ``OFF`` (opt in) returns once SQLite has handed
#: its writes to the operating system, several times cheaper, and still safe when the task process is killed
#: (``kill -9``, OOM), but a crashed machine can lose the last appends and, with the rollback journal the
#: outbox uses (see :mod:`~.database`), damage the file — every event not yet shipped with it. Issue 18
#: measured ``OFF`` as the default and kept ``NORMAL``: a benchmark is not worth that risk. The cost of each,
#: per event, is in ``docs/benchmarks.md`` (emission cost).
TRANSPORT_SQLITE_SYNCHRONOUS = DEFAULT_SQLITE_SYNCHRONOUS


def _number(params: dict[str, Any], key: str, default: float) -> float:
    value = params.get(key, default)
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"outbox transport option {key}={value!r} is not a number of seconds") from None
    if number < 0:
        raise ValueError(f"outbox transport option {key}={value!r} must not be negative")
    return number


@dataclass
class OutboxConfig(Config):
    """Configuration of :class:`OutboxTransport`."""

    url: str = ""
    """SQLAlchemy URL of the outbox (``sqlite:////abs/path.db`` or ``postgresql+psycopg2://...``). Empty:
    ``[lineage_provider] outbox_url``, itself defaulting to ``$AIRFLOW_HOME/lineage_outbox.db``."""

    spill_dir: str = ""
    """Folder for events the database could not take. Empty: ``[lineage_provider] outbox_spill_dir``, else
    beside the SQLite file or under ``$AIRFLOW_HOME/lineage_outbox_spill/``."""

    timeout: float = 2.0
    """Seconds an append may wait for the database (connecting, or SQLite's write lock held by others)
    before the event is spilled instead."""

    retry_after: float = 10.0
    """After the database failed, seconds during which events are spilled without trying it again."""

    sqlite_synchronous: str = TRANSPORT_SQLITE_SYNCHRONOUS
    """SQLite ``PRAGMA synchronous`` of appends: ``NORMAL`` (default) or ``FULL`` survive a crashed machine
    (power loss, kernel panic) at an fsync or more per event; ``OFF`` (opt in) only a crashed process, at no
    fsync (see :data:`TRANSPORT_SQLITE_SYNCHRONOUS`, and :mod:`~.database` for why the outbox uses a rollback
    journal)."""

    durability: str = DURABILITY[0]
    """``machine`` (default): an event is on the disk when ``emit`` returns, through a crashed machine.
    ``process`` (opt in): one ``write`` to this process's spill file, no fsync — survives the task process
    being killed, but a crashed machine can lose the events of its last seconds (never the outbox); several
    times cheaper. Those files move into the outbox with every shipper, export and ``close()``, and in the
    background of later writers (see :mod:`~.writer`)."""

    @classmethod
    def from_dict(cls, params: dict[str, Any]) -> OutboxConfig:
        url = str(params.get("url") or "").strip()
        if url:
            parse_outbox_url(url)  # a malformed URL is a configuration error: say so at start-up
        synchronous = str(params.get("sqlite_synchronous") or TRANSPORT_SQLITE_SYNCHRONOUS).upper()
        if synchronous not in SQLITE_SYNCHRONOUS:
            raise ValueError(
                f"outbox transport option sqlite_synchronous={synchronous!r} is not one of "
                f"{', '.join(SQLITE_SYNCHRONOUS)}"
            )
        durability = str(params.get("durability") or DURABILITY[0]).strip().lower()
        if durability not in DURABILITY:
            raise ValueError(
                f"outbox transport option durability={params.get('durability')!r} is not one of {', '.join(DURABILITY)}"
            )
        return cls(
            url=url,
            durability=durability,
            spill_dir=str(params.get("spill_dir") or "").strip(),
            timeout=_number(params, "timeout", 2.0),
            retry_after=_number(params, "retry_after", 10.0),
            sqlite_synchronous=synchronous,
        )


class OutboxTransport(Transport):
    """Appends each event to the SQL outbox (one local insert; its cost is in ``docs/benchmarks.md``); never
    raises, never blocks.

    Idempotent: the same event emitted twice is stored once. When the database cannot be reached, the
    event goes to a spill file and is moved into the outbox automatically once it can.
    """

    kind = "outbox"
    config_class = OutboxConfig

    def __init__(self, config: OutboxConfig) -> None:
        self.config = config
        url = config.url
        spill_dir = config.spill_dir
        if not url or not spill_dir:
            from airflow_lineage_provider import conf

            url = url or conf.outbox_url()
            spill_dir = spill_dir or conf.outbox_spill_dir()
        parse_outbox_url(url)
        self.writer = OutboxWriter(
            url,
            spill_dir=spill_dir or None,
            timeout=config.timeout,
            retry_after=config.retry_after,
            sqlite_synchronous=config.sqlite_synchronous,
            durability=config.durability,
        )

    @classmethod
    def prepare(cls, params: dict[str, Any]) -> None:
        """Open the outbox these transport options name, with its schema brought up to date, in this process, and
        close its connections again: processes forked from this one (task processes, the listener's children)
        then use the engine without checking the schema again. Raises what opening the outbox raises."""
        transport = cls(cls.config_class.from_dict(params))
        transport.writer.engine().dispose()  # no connection of this process is left for a fork to inherit

    @property
    def url(self) -> str:
        return self.writer.url

    def emit(self, event: Any) -> None:
        """Append ``event`` (a RunEvent, DatasetEvent or JobEvent) to the outbox. Never raises."""
        try:
            payload = Serde.to_json(event)
            if self.writer.durability == "process":
                self.writer.journal(payload)  # never raises
                return
            record = store.record_from_event(event, payload)
        except Exception as error:
            warn_once(f"Lineage outbox: could not serialize a {type(event).__name__} ({error}); it is not stored")
            return
        try:
            self.writer.append(record)
        except Exception as error:  # the writer already spills; this is a bug guard, never a task failure
            warn_once(f"Lineage outbox: unexpected error while storing an event: {error}", exc_info=error)

    def close(self, timeout: float = -1) -> bool:
        """Wait up to ``timeout`` seconds (negative: 5 s) for spilled events to move into the outbox (with
        ``durability="process"``, this process's events too)."""
        return self.writer.wait_drained(5.0 if timeout < 0 else timeout)

    def __str__(self) -> str:
        return f"<OutboxTransport(url={self.url!r})>"
