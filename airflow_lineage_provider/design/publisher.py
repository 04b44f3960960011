"""A publication pass: the declared lineage of every changed DAG, appended to the outbox as ``JobEvent``s.

One pass lists the latest serialized version of every DAG (its ``dag_hash``, no DAG data) and compares it
with what :mod:`.publications` remembers. Only DAGs whose version changed are deserialized and published
(all of them with ``republish_all``); jobs that were published before and are gone now — a removed task, a
deleted DAG — get a ``JobEvent`` declaring nothing, so they stop being declared. A DAG's events and its
record are written in one outbox transaction. The events then travel like every other event: the export
DAG (or ``airflow-lineage ship``/``export``) delivers them.

Example::

    from airflow_lineage_provider.design import publish_dags

    report = publish_dags(dag_ids=["sales_orders"])
    print(report.summary())
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from openlineage.client.serde import Serde

from airflow_lineage_provider.design import publications
from airflow_lineage_provider.design.job_events import dag_job_events, retirement_events
from airflow_lineage_provider.design.serialized_dags import (
    DagVersionRow,
    latest_versions,
    load_dags,
    metadata_connection,
    metadata_url,
)
from airflow_lineage_provider.design.task_lineage import ConnectorCache

#: DAGs written per outbox transaction.
DAGS_PER_TRANSACTION = 25


@dataclass
class PublicationReport:
    """What one publication pass did."""

    dags: int = 0
    """DAGs Airflow knows (latest serialized versions, not stale) within the pass's selection."""
    published: int = 0
    """DAGs whose lineage was published (changed, new, or all with ``republish_all``)."""
    unchanged: int = 0
    """DAGs whose serialized version was already published."""
    excluded: int = 0
    """Changed DAGs the stock provider's emission policy keeps out of OpenLineage: nothing of theirs is declared."""
    retired: int = 0
    """DAGs published before that no longer exist: their jobs were retired."""
    events: int = 0
    """``JobEvent``s appended to the outbox."""
    retired_jobs: int = 0
    """Jobs (tasks or DAGs) that got a retiring event."""
    seconds: float = 0.0
    not_found: list[str] = field(default_factory=list)
    """DAG ids asked for (``dag_ids``) that the metadata database does not know and that were never published."""

    def summary(self) -> str:
        """One line for logs and the CLI."""
        return (
            f"{self.published} DAG(s) published, {self.unchanged} unchanged, {self.excluded} excluded by the "
            f"emission policy, {self.retired} retired; "
            f"{self.events} JobEvent(s) in the outbox ({self.retired_jobs} retiring gone jobs) "
            f"in {self.seconds:.2f} s"
        )


def _records(events: Sequence[Any]) -> list[dict[str, Any]]:
    from airflow_lineage_provider.outbox import store

    return [store.record_from_event(event, Serde.to_json(event)) for event in events]


def _job_names(events: Sequence[Any]) -> set[str]:
    return {event.job.name for event in events}


class _Batch:
    """Events and records of several DAGs, written in one outbox transaction."""

    def __init__(self, engine: Any, report: PublicationReport) -> None:
        self.engine = engine
        self.report = report
        self.records: list[dict[str, Any]] = []
        self.recorded: list[tuple[str, str, set[str], int]] = []
        self.forgotten: list[str] = []

    def add(self, dag_id: str, dag_hash: str | None, events: Sequence[Any], jobs: set[str]) -> None:
        self.records += _records(events)
        if dag_hash is None:
            self.forgotten.append(dag_id)
        else:
            self.recorded.append((dag_id, dag_hash, jobs, len(events)))
        self.report.events += len(events)

    def __len__(self) -> int:
        return len(self.recorded) + len(self.forgotten)

    def write(self) -> None:
        from airflow_lineage_provider.outbox import store

        if not len(self):
            return
        with self.engine.begin() as conn:
            for start in range(0, len(self.records), 1000):
                store.append_events(conn, self.records[start : start + 1000])
            for dag_id, dag_hash, jobs, count in self.recorded:
                publications.record(conn, dag_id, dag_hash, jobs, count)
            for dag_id in self.forgotten:
                publications.forget(conn, dag_id)
        self.records, self.recorded, self.forgotten = [], [], []


def _retired(dag_id: str, jobs: Sequence[str] | set[str], now: datetime) -> list[Any]:
    task_ids = [job.removeprefix(f"{dag_id}.") for job in jobs if job != dag_id]
    return retirement_events(dag_id, task_ids, dag_retired=dag_id in jobs, event_time=now)


def publish_dags(
    *,
    outbox_url: str | None = None,
    metadata_db_url: str | None = None,
    dag_ids: Sequence[str] | None = None,
    republish_all: bool = False,
    progress: Callable[[int], None] | None = None,
    on_plan: Callable[[int], None] | None = None,
) -> PublicationReport:
    """Publish the declared lineage of every DAG whose serialized version changed since its last publication.

    :param outbox_url: the outbox (default ``[lineage_provider] outbox_url``).
    :param metadata_db_url: Airflow's metadata database (default :func:`.serialized_dags.metadata_url` of
        ``[lineage_provider] publish_metadata_conn_id``).
    :param dag_ids: only these DAGs (published, unchanged or retired among them).
    :param republish_all: publish every DAG again, changed or not.
    :param progress: called with the number of DAGs done, after each DAG.
    :param on_plan: called once with the number of DAGs the pass will work on (for a progress bar's total).
    :raises MetadataDatabaseError: the metadata database cannot be reached from this process.

    Connections — the metadata database's, and those naming the declared datasets — are looked up by Airflow's
    own ``BaseHook.get_connection``: in a task, through the API server; ``airflow-lineage publish-dags`` runs it
    within :func:`.airflow_lookups.as_airflow_cli`, so connections stored in the metadata database count too
    (a script outside Airflow's processes does the same). The summary is not logged: the caller prints or logs
    :meth:`PublicationReport.summary` once.
    """
    return _publish(outbox_url, metadata_db_url, dag_ids, republish_all, progress, on_plan)


def _publish(
    outbox_url: str | None,
    metadata_db_url: str | None,
    dag_ids: Sequence[str] | None,
    republish_all: bool,
    progress: Callable[[int], None] | None,
    on_plan: Callable[[int], None] | None,
) -> PublicationReport:
    from airflow_lineage_provider import conf
    from airflow_lineage_provider.outbox.database import outbox_engine

    started = time.perf_counter()
    report = PublicationReport()
    engine = outbox_engine(outbox_url or conf.outbox_url())
    publications.ensure_table(engine)
    url = metadata_db_url or metadata_url(conf.publish_metadata_conn_id() or None)
    selection = list(dict.fromkeys(dag_ids)) if dag_ids is not None else None
    with metadata_connection(url) as meta:
        rows = latest_versions(meta, selection)
        with engine.connect() as conn:
            previous = publications.published(conn, selection)
        current = {row.dag_id for row in rows}
        changed: list[DagVersionRow] = []
        for row in rows:
            before = previous.get(row.dag_id)
            if republish_all or before is None or before.dag_hash != row.dag_hash:
                changed.append(row)
            else:
                report.unchanged += 1
        gone = sorted(set(previous) - current)
        report.dags = len(rows)
        report.not_found = [dag_id for dag_id in selection or () if dag_id not in current and dag_id not in previous]
        if on_plan is not None:
            on_plan(len(changed) + len(gone))
        now = datetime.now(timezone.utc)
        batch = _Batch(engine, report)
        cache = ConnectorCache()
        for loaded in load_dags(meta, changed):
            dag_id = loaded.row.dag_id
            events = dag_job_events(loaded.dag, loaded.row, cache, now)
            jobs = _job_names(events)
            if events:
                report.published += 1
            else:
                report.excluded += 1
            before = previous.get(dag_id)
            gone_jobs = set(before.jobs) - jobs if before is not None else set()
            if gone_jobs:
                retiring = _retired(dag_id, gone_jobs, now)
                events += retiring
                report.retired_jobs += len(retiring)
            batch.add(dag_id, loaded.row.dag_hash, events, jobs)
            if len(batch) >= DAGS_PER_TRANSACTION:
                batch.write()
            if progress is not None:
                progress(1)
        for dag_id in gone:
            retiring = _retired(dag_id, previous[dag_id].jobs, now)
            batch.add(dag_id, None, retiring, set())
            report.retired += 1
            report.retired_jobs += len(retiring)
            if progress is not None:
                progress(1)
        batch.write()
    report.seconds = time.perf_counter() - started
    return report
