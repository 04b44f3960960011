"""What Marquez's web UI charts (``/api/v1/stats/...``): events per hour or day, and jobs, datasets and sources
over time.

Periods, as Marquez's ``StatsDao`` cuts them: ``DAY`` is 24 one-hour intervals, the last one holding now;
``WEEK`` is 7 calendar days of the asked time zone, the last one today (a day across a daylight-saving change
is 23 or 25 hours long). Ours cuts the hours at the zone's hour marks too (Marquez cuts at UTC's, the same
instants in every zone whose offset is whole hours).

* Lineage events (:func:`lineage_event_metrics`): per interval, how many stored events of each terminal or
  start type have their ``eventTime`` in it — ``start`` (START), ``complete`` (COMPLETE), ``fail`` (FAIL) and
  ``abort`` (ABORT); RUNNING and OTHER events, JobEvents and DatasetEvents are not counted (Marquez's
  metric has no place for them). An event counts once however often it was re-sent (the store keeps one).
* Jobs, datasets and sources (:func:`interval_metrics`): per interval, how many existed by its end — the
  cumulative count of those first seen (the earliest ``eventTime`` naming them) before the interval ended.
  A dataset known under several names (:mod:`.dataset_aliases`) counts once, first seen with the first of its
  (visible) names. A source is what ``GET /api/v1/sources`` lists (:mod:`.sources`: a dataset's ``dataSource``
  facet name, or its namespace, for every name of every dataset), first seen with its first dataset.

Each answer is one statement: the rows of the window are put in their interval by a ``CASE`` over the
interval ends (any length of interval, on both stores) and counted by the database (sources: the sources'
listing, bucketed here). For a key limited to
namespace patterns, nodes and sources count only in visible namespaces, and events only when they name no
hidden namespace (the rule of ``GET /api/v1/events``).
"""

from __future__ import annotations

import sys
from collections.abc import Collection
from datetime import date, datetime, time, timedelta, timezone
from itertools import pairwise
from typing import Any
from zoneinfo import ZoneInfo

from sqlalchemy import Connection, and_, case, func, select

from airflow_lineage_provider.consumer.store.graph import dataset_aliases
from airflow_lineage_provider.consumer.store.read import sources
from airflow_lineage_provider.consumer.store.read.queries import events_visible
from airflow_lineage_provider.consumer.store.read.text import iso
from airflow_lineage_provider.consumer.store.read.visibility import Visible, namespace_in
from airflow_lineage_provider.consumer.store.schema import tables

#: Marquez's periods: how many intervals each answers.
PERIODS = {"DAY": 24, "WEEK": 7}
#: Event types Marquez's lineage metric counts, by the member of the answer counting them.
EVENT_TYPES = {"START": "start", "COMPLETE": "complete", "FAIL": "fail", "ABORT": "abort"}
#: What :func:`interval_metrics` counts.
ASSETS = ("jobs", "datasets", "sources")

Interval = tuple[datetime, datetime]


def intervals(period: str, zone: ZoneInfo, now: datetime) -> list[Interval]:
    """The ``(start, end)`` UTC instants of ``period``'s intervals, oldest first, the last one holding ``now``."""
    local = now.astimezone(zone)
    if period == "DAY":
        hour = local.replace(minute=0, second=0, microsecond=0).astimezone(timezone.utc)
        first = hour - timedelta(hours=PERIODS["DAY"] - 1)
        return [(first + timedelta(hours=i), first + timedelta(hours=i + 1)) for i in range(PERIODS["DAY"])]
    if period != "WEEK":
        raise ValueError(f"period must be one of {sorted(PERIODS)}, got {period!r}")
    today: date = local.date()
    days = [today - timedelta(days=PERIODS["WEEK"] - 1 - i) for i in range(PERIODS["WEEK"] + 1)]
    bounds = [datetime.combine(day, time(0), tzinfo=zone).astimezone(timezone.utc) for day in days]
    return list(pairwise(bounds))


def _bucket(column: Any, spans: list[Interval]) -> Any:
    """The index of the interval ``column`` falls in, -1 before the first; NULL after the last."""
    whens = [(column < spans[0][0], -1)] + [(column < end, i) for i, (_, end) in enumerate(spans)]
    return case(*whens, else_=None)


def lineage_event_metrics(conn: Connection, spans: list[Interval], visible: Visible = None) -> list[dict[str, Any]]:
    """Marquez's ``LineageMetric`` per interval: ``startInterval``, ``endInterval``, ``fail``, ``start``,
    ``complete`` and ``abort`` (see the module docstring)."""
    e = tables.events.c
    conditions = [e.event_time >= spans[0][0], e.event_time < spans[-1][1], e.event_type.in_(list(EVENT_TYPES))]
    if visible is not None:
        conditions.append(events_visible(conn, visible))
    rows = select(_bucket(e.event_time, spans).label("bucket"), e.event_type).where(and_(*conditions)).subquery()
    query = select(rows.c.bucket, rows.c.event_type, func.count()).group_by(rows.c.bucket, rows.c.event_type)
    counts = {(bucket, kind): count for bucket, kind, count in conn.execute(query)}
    return [
        {
            "startInterval": iso(start),
            "endInterval": iso(end),
            **{member: counts.get((i, kind), 0) for kind, member in EVENT_TYPES.items()},
        }
        for i, (start, end) in enumerate(spans)
    ]


def _first_seen(conn: Connection, asset: str, visible: Visible) -> Any:
    """``created_at`` of every job or dataset; a dataset known under several names counts once, first seen
    with the first of its (visible) names (see :mod:`.dataset_aliases`)."""
    n, m = tables.nodes.c, tables.dataset_members.c
    query = select(n.created_at).where(n.kind == ("job" if asset == "jobs" else "dataset"))
    if visible is not None:
        query = query.where(namespace_in(n.namespace, visible, conn.dialect.name))
    if asset == "datasets" and dataset_aliases.has_groups(conn):
        own = and_(m.node_id == n.id, m.member_id == n.id)
        group = func.coalesce(m.canonical_id, n.id)
        query = query.outerjoin(tables.dataset_members, own).group_by(group)
        query = query.with_only_columns(func.min(n.created_at).label("created_at"))
    return query.subquery("first_seen")


def _source_counts(conn: Connection, spans: list[Interval], visible: Visible) -> dict[int, int]:
    """Sources first seen before the first interval (-1) and in each interval (its index)."""
    every, _ = sources.list_sources(conn, sys.maxsize, 0, visible)
    counts: dict[int, int] = {}
    for source in every:
        created = datetime.fromisoformat(source["createdAt"])
        if created >= spans[-1][1]:
            continue
        bucket = -1 if created < spans[0][0] else next(i for i, (_, end) in enumerate(spans) if created < end)
        counts[bucket] = counts.get(bucket, 0) + 1
    return counts


def interval_metrics(
    conn: Connection, asset: str, spans: list[Interval], visible: Collection[str] | None = None
) -> list[dict[str, Any]]:
    """Marquez's ``IntervalMetric`` per interval: ``startInterval``, ``endInterval`` and ``count``, the jobs,
    datasets or sources (``asset``) first seen before the interval's end."""
    if asset not in ASSETS:
        raise ValueError(f"asset must be one of {ASSETS}, got {asset!r}")
    if asset == "sources":  # the sources' own rule, read once per source (there are few)
        counts = _source_counts(conn, spans, visible)
    else:
        seen = _first_seen(conn, asset, visible)
        rows = select(_bucket(seen.c.created_at, spans).label("bucket")).subquery()
        query = select(rows.c.bucket, func.count()).where(rows.c.bucket.is_not(None)).group_by(rows.c.bucket)
        counts = dict(conn.execute(query).all())
    total = counts.get(-1, 0)
    answer = []
    for i, (start, end) in enumerate(spans):
        total += counts.get(i, 0)
        answer.append({"startInterval": iso(start), "endInterval": iso(end), "count": total})
    return answer
