"""Run state from the OpenLineage lifecycle and event times, never from arrival order.

A run's state is ranked: ``NEW`` (``OTHER`` events) < ``RUNNING`` (``START``/``RUNNING``) < terminal
(``COMPLETED``/``FAILED``/``ABORTED``). An event moves the state only to a higher rank, or to the same
rank at a later or equal ``eventTime``: a late START never reverts a COMPLETE. ``started_at`` is the
earliest START/RUNNING ``eventTime``; ``ended_at`` is the ``eventTime`` of the terminal event that set the
state. The rule exists twice with one meaning: :func:`merge` folds events of one batch in Python, and
:func:`upsert_values` applies the same rule in SQL against the stored row, so concurrent writers agree.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from sqlalchemy import and_, case, or_
from sqlalchemy.sql.elements import ColumnElement

from airflow_lineage_provider.consumer.store.schema import tables

#: OpenLineage event type → (run state as Marquez names it, rank).
STATE_OF_EVENT: dict[str, tuple[str, int]] = {
    "OTHER": ("NEW", 0),
    "START": ("RUNNING", 1),
    "RUNNING": ("RUNNING", 1),
    "COMPLETE": ("COMPLETED", 2),
    "FAIL": ("FAILED", 2),
    "ABORT": ("ABORTED", 2),
}
TERMINAL_RANK = 2


@dataclass(frozen=True)
class RunRow:
    """What the events seen so far say about one run (a row of ``lineage_runs``)."""

    run_uuid: str
    job_key: str
    state: str
    state_rank: int
    state_time: datetime
    started_at: datetime | None
    ended_at: datetime | None
    nominal_start_time: datetime | None
    nominal_end_time: datetime | None
    parent_run_uuid: str | None
    facets: str | None
    facets_time: datetime | None
    created_at: datetime
    updated_at: datetime
    job_facets: str | None = None
    job_facets_time: datetime | None = None

    @classmethod
    def from_event(
        cls,
        run_uuid: str,
        job_key: str,
        event_type: str,
        event_time: datetime,
        nominal: tuple[datetime | None, datetime | None],
        parent_run_uuid: str | None,
        facets: str | None,
        job_facets: str | None = None,
    ) -> RunRow:
        state, rank = STATE_OF_EVENT[event_type]
        return cls(
            run_uuid=run_uuid,
            job_key=job_key,
            state=state,
            state_rank=rank,
            state_time=event_time,
            started_at=event_time if rank == 1 else None,
            ended_at=event_time if rank == TERMINAL_RANK else None,
            nominal_start_time=nominal[0],
            nominal_end_time=nominal[1],
            parent_run_uuid=parent_run_uuid,
            facets=facets,
            facets_time=event_time if facets else None,
            created_at=event_time,
            updated_at=event_time,
            job_facets=job_facets,
            job_facets_time=event_time if job_facets else None,
        )


def supersedes(new_rank: int, new_time: datetime, old_rank: int, old_time: datetime) -> bool:
    """Whether a state (rank, time) replaces the stored one."""
    return new_rank > old_rank or (new_rank == old_rank and new_time >= old_time)


def _earliest(a: datetime | None, b: datetime | None) -> datetime | None:
    return b if a is None else a if b is None else min(a, b)


def _newer(a_time: datetime | None, b_time: datetime | None) -> bool:
    return a_time is not None and (b_time is None or a_time >= b_time)


def merge(old: RunRow, new: RunRow) -> RunRow:
    """``old`` updated by ``new`` under the lifecycle rule (order of the two arguments is arrival order)."""
    state = new if supersedes(new.state_rank, new.state_time, old.state_rank, old.state_time) else old
    facets = new if _newer(new.facets_time, old.facets_time) else old
    job_facets = new if _newer(new.job_facets_time, old.job_facets_time) else old
    return replace(
        old,
        state=state.state,
        state_rank=state.state_rank,
        state_time=state.state_time,
        ended_at=state.ended_at,
        started_at=_earliest(old.started_at, new.started_at),
        nominal_start_time=new.nominal_start_time or old.nominal_start_time,
        nominal_end_time=new.nominal_end_time or old.nominal_end_time,
        parent_run_uuid=new.parent_run_uuid or old.parent_run_uuid,
        facets=facets.facets,
        facets_time=facets.facets_time,
        job_facets=job_facets.job_facets,
        job_facets_time=job_facets.job_facets_time,
        created_at=min(old.created_at, new.created_at),
        updated_at=max(old.updated_at, new.updated_at),
    )


def earliest_sql(current: Any, incoming: Any) -> ColumnElement[Any]:
    """SQL for the earlier of two nullable times (None loses)."""
    return case(
        (current.is_(None), incoming), (incoming.is_(None), current), (incoming < current, incoming), else_=current
    )


def latest_sql(current: Any, incoming: Any) -> ColumnElement[Any]:
    """SQL for the later of two nullable times (None loses)."""
    return case(
        (current.is_(None), incoming), (incoming.is_(None), current), (incoming > current, incoming), else_=current
    )


def newer_sql(incoming_time: Any, current_time: Any) -> ColumnElement[bool]:
    """SQL: the incoming value has a time and it is not older than the stored one."""
    return and_(incoming_time.is_not(None), or_(current_time.is_(None), incoming_time >= current_time))


def upsert_values(excluded: Any) -> dict[str, Any]:
    """``ON CONFLICT DO UPDATE SET`` values applying :func:`merge` to the stored run."""
    runs = tables.runs.c
    wins = or_(
        excluded.state_rank > runs.state_rank,
        and_(excluded.state_rank == runs.state_rank, excluded.state_time >= runs.state_time),
    )
    facets_win = newer_sql(excluded.facets_time, runs.facets_time)
    job_facets_win = newer_sql(excluded.job_facets_time, runs.job_facets_time)
    return {
        "state": case((wins, excluded.state), else_=runs.state),
        "state_rank": case((wins, excluded.state_rank), else_=runs.state_rank),
        "state_time": case((wins, excluded.state_time), else_=runs.state_time),
        "ended_at": case((wins, excluded.ended_at), else_=runs.ended_at),
        "started_at": earliest_sql(runs.started_at, excluded.started_at),
        "nominal_start_time": case(
            (excluded.nominal_start_time.is_not(None), excluded.nominal_start_time), else_=runs.nominal_start_time
        ),
        "nominal_end_time": case(
            (excluded.nominal_end_time.is_not(None), excluded.nominal_end_time), else_=runs.nominal_end_time
        ),
        "parent_run_uuid": case(
            (excluded.parent_run_uuid.is_not(None), excluded.parent_run_uuid), else_=runs.parent_run_uuid
        ),
        "facets": case((facets_win, excluded.facets), else_=runs.facets),
        "facets_time": case((facets_win, excluded.facets_time), else_=runs.facets_time),
        "job_facets": case((job_facets_win, excluded.job_facets), else_=runs.job_facets),
        "job_facets_time": case((job_facets_win, excluded.job_facets_time), else_=runs.job_facets_time),
        "created_at": earliest_sql(runs.created_at, excluded.created_at),
        "updated_at": latest_sql(runs.updated_at, excluded.updated_at),
    }
