"""Queries on the outbox, each a function taking a SQLAlchemy ``Connection`` (the caller owns the transaction).

The life of an event: :func:`append_events` stores it once per identity; :func:`sequence_events` gives it
its place in outbox order; :func:`materialize` adds a pending delivery for every destination;
:func:`claim_batch` leases pending deliveries in order to one shipper (``FOR UPDATE SKIP LOCKED`` on
PostgreSQL, the database write lock on SQLite); :func:`mark_delivered`, :func:`mark_retry` and
:func:`mark_dead` settle a claim, but only while it is still the caller's (its ``claim_token``).
"""

from __future__ import annotations

import hashlib
import json
import operator
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from sqlalchemy import Connection, and_, bindparam, exists, func, insert, literal, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite

from airflow_lineage_provider.outbox.tables import (
    DEAD,
    DELIVERED,
    PENDING,
    TERMINAL_EVENT_TYPES,
    deliveries,
    destinations,
    events,
    sequencer,
)

SEQUENCE_CHUNK = 10_000


def utcnow() -> datetime:
    """Now, as the naive UTC datetime the outbox stores."""
    return datetime.now(timezone.utc).replace(tzinfo=None)


def event_key(payload: str) -> str:
    """The identity of an event: SHA-256 of its JSON (re-emitting the same event gives the same key)."""
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def record_from_payload(payload: str, stored_at: datetime | None = None) -> dict[str, Any]:
    """The row for one event given as JSON (the spill file's form)."""
    document = json.loads(payload)
    run = document.get("run") or {}
    job = document.get("job") or {}
    return {
        "event_key": event_key(payload),
        "run_id": run.get("runId"),
        "event_type": document.get("eventType"),
        "event_time": document.get("eventTime"),
        "job_namespace": job.get("namespace"),
        "job_name": job.get("name"),
        "payload": payload,
        "stored_at": stored_at or utcnow(),
    }


def record_from_event(event: Any, payload: str) -> dict[str, Any]:
    """The row for an openlineage-python event object whose JSON is ``payload`` (no re-parsing)."""
    run = getattr(event, "run", None)
    job = getattr(event, "job", None)
    event_type = getattr(event, "eventType", None)
    return {
        "event_key": event_key(payload),
        "run_id": str(run.runId) if run is not None else None,
        "event_type": getattr(event_type, "value", event_type),
        "event_time": getattr(event, "eventTime", None),
        "job_namespace": getattr(job, "namespace", None),
        "job_name": getattr(job, "name", None),
        "payload": payload,
        "stored_at": utcnow(),
    }


def _insert_ignoring_duplicates(conn: Connection) -> Any:
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    return dialect.insert(events).on_conflict_do_nothing(index_elements=["event_key"])


#: The columns :func:`append_event` writes, in the order of its SQLite parameters.
_APPEND_COLUMNS = (
    "event_key",
    "run_id",
    "event_type",
    "event_time",
    "job_namespace",
    "job_name",
    "payload",
    "stored_at",
)
#: The record values of every column but ``stored_at``, which SQLite gets as text (:func:`_sqlite_time`).
_sqlite_values = operator.itemgetter(*_APPEND_COLUMNS[:-1])


def _append_sql(placeholders: Iterable[str]) -> str:
    return (
        f"INSERT INTO {events.name} ({', '.join(_APPEND_COLUMNS)}) VALUES ({', '.join(placeholders)})"
        " ON CONFLICT (event_key) DO NOTHING"
    )


#: The insert of :func:`append_event`, written out in the parameter style of the drivers the outbox runs on
#: (``(dialect, paramstyle)``): the same statement as :func:`append_events`'s, which
#: ``tests/test_outbox_append.py`` holds it to (the same row stored, a duplicate ignored).
_APPEND_SQL = {
    ("sqlite", "qmark"): _append_sql("?" for _ in _APPEND_COLUMNS),
    ("postgresql", "pyformat"): _append_sql(f"%({column})s" for column in _APPEND_COLUMNS),
}


def _sqlite_time(value: datetime) -> str:
    """A naive UTC ``datetime`` as SQLAlchemy's SQLite ``DateTime`` stores it (``2026-01-01 00:02:00.000000``),
    so that a row written without SQLAlchemy's types reads back and compares like the others."""
    return value.isoformat(" ", "microseconds")


def append_event(conn: Connection, record: dict[str, Any]) -> None:
    """Store one event (as :func:`append_events`) on the hot path of a task.

    On SQLite (pysqlite) and PostgreSQL (psycopg2, psycopg) the insert is a fixed string in the driver's own
    parameter style, run on the driver's cursor of ``conn``: no statement looked up, no execution context and
    no type processing per call, which the task would pay for every event. Any other driver, or a
    connection without its driver connection, runs :func:`append_events`'s statement.

    The caller's connection is in autocommit mode: the insert is its own transaction. On the fixed insert a
    driver error (``sqlite3.OperationalError``, ``psycopg2.Error``) is raised as it is.
    """
    dialect = conn.dialect
    sql = _APPEND_SQL.get((dialect.name, dialect.paramstyle))
    driver = conn.connection.dbapi_connection if sql is not None else None
    if sql is None or driver is None:
        conn.execute(_insert_ignoring_duplicates(conn), record)
        return
    if dialect.name == "sqlite":
        parameters: Sequence[Any] | dict[str, Any] = (*_sqlite_values(record), _sqlite_time(record["stored_at"]))
    else:
        parameters = record
    cursor = driver.cursor()
    try:
        cursor.execute(sql, parameters)
    finally:
        cursor.close()


def append_events(conn: Connection, records: Sequence[dict[str, Any]]) -> None:
    """Store events; one already stored (same ``event_key``) is left as it is."""
    if records:
        conn.execute(_insert_ignoring_duplicates(conn), list(records))


def sequence_events(conn: Connection, limit: int = SEQUENCE_CHUNK) -> int:
    """Give up to ``limit`` unsequenced events their ``seq`` (above every earlier one); return how many.

    Runs under the sequencer row's lock, so sequences are handed out in commit order: a destination's
    frontier can then never pass an event that was still being inserted.
    """
    last_seq = conn.execute(select(sequencer.c.last_seq).where(sequencer.c.id == 1).with_for_update()).scalar_one()
    window = select(events.c.id).where(events.c.seq.is_(None)).order_by(events.c.id).limit(limit).subquery()
    low, high, count = conn.execute(select(func.min(window.c.id), func.max(window.c.id), func.count())).one()
    if not count:
        return 0
    base = last_seq - low + 1  # seq = base + id: unique, and above last_seq for every id >= low
    conn.execute(
        update(events).where(events.c.seq.is_(None), events.c.id.between(low, high)).values(seq=events.c.id + base)
    )
    conn.execute(update(sequencer).where(sequencer.c.id == 1).values(last_seq=base + high))
    return int(count)


def ensure_destination(conn: Connection, name: str, kind: str, target: str) -> int:
    """The id of destination ``name``, created (starting from every retained event) when new."""
    # Under the sequencer row's lock: two shippers creating the same destination wait for each other,
    # and pruning (which takes it too) always sees every destination.
    conn.execute(select(sequencer.c.last_seq).where(sequencer.c.id == 1).with_for_update())
    found = conn.execute(select(destinations.c.id, destinations.c.kind).where(destinations.c.name == name)).first()
    if found is not None:
        if found.kind != kind:
            raise ValueError(f"destination {name!r} is a {found.kind} destination, not {kind}; choose another name")
        return int(found.id)
    return int(
        conn.execute(
            insert(destinations)
            .values(name=name, kind=kind, target=target, frontier=0, created_at=utcnow())
            .returning(destinations.c.id)
        ).scalar_one()
    )


def destination_id(conn: Connection, name: str) -> int | None:
    return conn.execute(select(destinations.c.id).where(destinations.c.name == name)).scalar()


def materialize(conn: Connection, destination: int) -> int:
    """Add a pending delivery to ``destination`` for every sequenced event past its frontier."""
    frontier = conn.execute(
        select(destinations.c.frontier).where(destinations.c.id == destination).with_for_update()
    ).scalar_one()
    last_seq = conn.execute(select(sequencer.c.last_seq).where(sequencer.c.id == 1)).scalar_one()
    if last_seq <= frontier:
        return 0
    source = select(
        literal(destination),
        events.c.id,
        events.c.seq,
        events.c.run_id,
        events.c.event_type,
        literal(PENDING),
        literal(0),
        events.c.stored_at,
    ).where(events.c.seq > frontier, events.c.seq <= last_seq)
    columns = ["destination_id", "event_id", "seq", "run_id", "event_type", "status", "attempts", "not_before"]
    added = conn.execute(insert(deliveries).from_select(columns, source)).rowcount
    conn.execute(update(destinations).where(destinations.c.id == destination).values(frontier=last_seq))
    return int(added or 0)


@dataclass(frozen=True)
class ClaimedEvent:
    """One leased delivery: which row, the event's JSON and what the outbox knows about it."""

    delivery_id: int
    seq: int
    run_id: str | None
    event_type: str | None
    event_time: str | None
    payload: str
    export_file: str | None
    attempts: int = 0
    """Failed delivery attempts so far."""


@dataclass(frozen=True)
class Claim:
    """Deliveries leased to one shipper until ``lease_until``; settle them with ``token``."""

    token: str
    lease_until: datetime
    events: list[ClaimedEvent]


def claim_batch(
    conn: Connection,
    destination: int,
    limit: int,
    lease_seconds: float,
    now: datetime | None = None,
    start_before_terminal: bool = True,
) -> Claim:
    """Lease up to ``limit`` due pending deliveries of ``destination``, in outbox order.

    A delivery whose lease ran out (its shipper died) is due again: delivery is at least once.
    With ``start_before_terminal``, a run's COMPLETE/FAIL/ABORT is not claimed while that run's START
    is still pending for the destination (in backoff or claimed by another shipper), so a START is
    never delivered after its run's end.
    """
    now = now or utcnow()
    token = uuid.uuid4().hex
    lease_until = now + timedelta(seconds=lease_seconds)
    # An alias, so the subquery is not correlated to the UPDATE's own table.
    candidate = deliveries.alias("candidate")
    due = and_(candidate.c.destination_id == destination, candidate.c.status == PENDING, candidate.c.not_before <= now)
    if start_before_terminal:
        start = deliveries.alias("start_delivery")
        start_pending = exists().where(
            start.c.destination_id == candidate.c.destination_id,
            start.c.run_id == candidate.c.run_id,
            start.c.event_type == "START",
            start.c.status == PENDING,
        )
        due = and_(
            due,
            or_(
                candidate.c.event_type.is_(None),
                candidate.c.event_type.not_in(TERMINAL_EVENT_TYPES),
                candidate.c.run_id.is_(None),
                ~start_pending,
            ),
        )
    eligible = (
        select(candidate.c.id)
        .where(due)
        .order_by(candidate.c.seq)
        .limit(limit)
        .with_for_update(skip_locked=True, of=candidate)
        .scalar_subquery()
    )
    conn.execute(
        update(deliveries).where(deliveries.c.id.in_(eligible)).values(claim_token=token, not_before=lease_until)
    )
    rows = conn.execute(
        select(
            deliveries.c.id,
            deliveries.c.seq,
            deliveries.c.run_id,
            deliveries.c.event_type,
            events.c.event_time,
            events.c.payload,
            deliveries.c.export_file,
            deliveries.c.attempts,
        )
        .join(events, events.c.id == deliveries.c.event_id)
        .where(deliveries.c.claim_token == token, deliveries.c.status == PENDING)
        .order_by(deliveries.c.seq)
    ).all()
    return Claim(token, lease_until, [ClaimedEvent(*row) for row in rows])


def _claimed(token: str, ids: Iterable[int]) -> Any:
    return and_(deliveries.c.id.in_(list(ids)), deliveries.c.claim_token == token, deliveries.c.status == PENDING)


def mark_delivered(conn: Connection, token: str, ids: Iterable[int], now: datetime | None = None) -> int:
    """Settle claimed deliveries as delivered; return how many were still this claim's."""
    result = conn.execute(
        update(deliveries)
        .where(_claimed(token, ids))
        .values(status=DELIVERED, delivered_at=now or utcnow(), claim_token=None, status_code=None, last_error=None)
    )
    return int(result.rowcount or 0)


def mark_retry(
    conn: Connection,
    token: str,
    ids: Iterable[int],
    backoff: Any,
    error: str,
    status_code: int | None = None,
    now: datetime | None = None,
) -> int:
    """Leave claimed deliveries pending until a backoff passes (``backoff(attempts) -> seconds``)."""
    now = now or utcnow()
    ids = list(ids)
    rows = conn.execute(select(deliveries.c.id, deliveries.c.attempts).where(_claimed(token, ids))).all()
    if not rows:
        return 0
    conn.execute(
        update(deliveries)
        .where(deliveries.c.id == bindparam("b_id"), deliveries.c.claim_token == token)
        .values(
            attempts=bindparam("b_attempts"),
            not_before=bindparam("b_not_before"),
            claim_token=None,
            status_code=status_code,
            last_error=error[:4000],
        ),
        [
            {
                "b_id": row.id,
                "b_attempts": row.attempts + 1,
                "b_not_before": now + timedelta(seconds=backoff(row.attempts + 1)),
            }
            for row in rows
        ],
    )
    return len(rows)


def release(conn: Connection, token: str, ids: Iterable[int], now: datetime | None = None) -> int:
    """Give claimed deliveries back untouched (due again now)."""
    result = conn.execute(
        update(deliveries).where(_claimed(token, ids)).values(claim_token=None, not_before=now or utcnow())
    )
    return int(result.rowcount or 0)


def mark_dead(conn: Connection, token: str, delivery: int, status_code: int | None, error: str) -> int:
    """Dead-letter one claimed delivery, keeping the consumer's status code and response text."""
    result = conn.execute(
        update(deliveries)
        .where(_claimed(token, [delivery]))
        .values(status=DEAD, claim_token=None, status_code=status_code, last_error=error[:4000])
    )
    return int(result.rowcount or 0)


def plan_export_files(conn: Connection, token: str, files: dict[int, str]) -> None:
    """Record which file each claimed delivery is about to be exported to (see :mod:`.export`)."""
    if not files:
        return
    conn.execute(
        update(deliveries)
        .where(deliveries.c.id == bindparam("b_id"), deliveries.c.claim_token == token)
        .values(export_file=bindparam("b_file")),
        [{"b_id": delivery, "b_file": path} for delivery, path in files.items()],
    )


def replay_dead(conn: Connection, destination: int, now: datetime | None = None) -> int:
    """Make every dead delivery of ``destination`` pending again (after the consumer was fixed)."""
    result = conn.execute(
        update(deliveries)
        .where(deliveries.c.destination_id == destination, deliveries.c.status == DEAD)
        .values(status=PENDING, attempts=0, not_before=now or utcnow(), claim_token=None)
    )
    return int(result.rowcount or 0)


def next_due(conn: Connection, destination: int) -> datetime | None:
    """When the earliest pending delivery of ``destination`` becomes due (``None``: nothing pending)."""
    return conn.execute(
        select(func.min(deliveries.c.not_before)).where(
            deliveries.c.destination_id == destination, deliveries.c.status == PENDING
        )
    ).scalar()


def status(conn: Connection) -> dict[str, Any]:
    """``{"events": n, "destinations": {name: {"pending": n, "delivered": n, "dead": n}}}``.

    Pending counts events not yet taken into a destination's deliveries (they will be).
    """
    total = conn.execute(select(func.count()).select_from(events)).scalar_one()
    counts: dict[str, Any] = {}
    for dest in conn.execute(select(destinations.c.id, destinations.c.name, destinations.c.frontier)).all():
        by_status: dict[str, int] = {
            state: count
            for state, count in conn.execute(
                select(deliveries.c.status, func.count())
                .where(deliveries.c.destination_id == dest.id)
                .group_by(deliveries.c.status)
            )
        }
        untaken = conn.execute(
            select(func.count()).where(or_(events.c.seq.is_(None), events.c.seq > dest.frontier))
        ).scalar_one()
        counts[dest.name] = {
            "pending": int(by_status.get(PENDING, 0)) + int(untaken),
            "delivered": int(by_status.get(DELIVERED, 0)),
            "dead": int(by_status.get(DEAD, 0)),
        }
    return {"events": int(total), "destinations": counts}


def dead_letters(conn: Connection, destination: int, limit: int = 20) -> list[dict[str, Any]]:
    """The first dead deliveries of ``destination``: event, status code and the consumer's answer."""
    rows = conn.execute(
        select(deliveries.c.seq, deliveries.c.run_id, deliveries.c.event_type, deliveries.c.status_code,
               deliveries.c.last_error)
        .where(deliveries.c.destination_id == destination, deliveries.c.status == DEAD)
        .order_by(deliveries.c.seq)
        .limit(limit)
    ).all()  # fmt: skip
    return [row._asdict() for row in rows]
