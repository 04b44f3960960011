"""Exporting the outbox as newline-delimited JSON files, partitioned by event date and hour.

Files go under a local folder or any Airflow ``ObjectStoragePath`` (``s3://``, ``gs://``, ... where the
provider for it is installed): ``<root>/date=YYYY-MM-DD/hour=HH/events-<seq>-<claim>.ndjson[.gz]``.
Each file appears whole: it is written under a hidden temporary name, then renamed while the database
rows it holds are marked exported in the same transaction. A run that dies between the rename and the
commit leaves the file and its planned name in the database; the next run finds the file and marks its
events exported instead of writing them again. So each event is exported exactly once per destination,
even when runs overlap (claims are exclusive) or crash.
"""

from __future__ import annotations

import contextlib
import gzip
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from airflow_lineage_provider.outbox import store
from airflow_lineage_provider.outbox.shipper import pending_count, prepare_destination
from airflow_lineage_provider.outbox.writer import OutboxWriter


def export_root(path: str, conn_id: str | None = None) -> Any:
    """``path`` (a local folder or an object-storage URL) as an Airflow ``ObjectStoragePath``."""
    from airflow.sdk import ObjectStoragePath

    if "://" not in path:
        path = Path(path).expanduser().resolve().as_uri()
    return ObjectStoragePath(path, conn_id=conn_id) if conn_id else ObjectStoragePath(path)


def default_export_name(path: str) -> str:
    """A destination name from the export path: its URL (``file:///...`` for a local folder)."""
    return path if "://" in path else Path(path).expanduser().resolve().as_uri()


def partition_of(event_time: str | None, by_hour: bool = True) -> str:
    """``date=YYYY-MM-DD/hour=HH`` of an event time in UTC (``date=unknown`` when it cannot be read)."""
    try:
        moment = datetime.fromisoformat(str(event_time).replace("Z", "+00:00"))
    except ValueError:
        return "date=unknown"
    if moment.tzinfo is not None:
        moment = moment.astimezone(timezone.utc)
    return moment.strftime("date=%Y-%m-%d/hour=%H" if by_hour else "date=%Y-%m-%d")


@dataclass
class ExportReport:
    """What one :meth:`Exporter.export` call did."""

    exported: int = 0
    files: int = 0
    recovered: int = 0
    """Events found already in a file from an earlier run that died before recording it."""
    pending: int = 0


class Exporter:
    """Exports one outbox to files under ``root``, as destination ``name``."""

    def __init__(
        self,
        writer: OutboxWriter,
        path: str,
        name: str | None = None,
        compress: bool = False,
        by_hour: bool = True,
        batch_size: int = 10_000,
        lease_seconds: float = 600.0,
        conn_id: str | None = None,
    ) -> None:
        self.writer = writer
        self.path = path
        self.root = export_root(path, conn_id)
        self.name = name or default_export_name(path)
        self.compress = compress
        self.by_hour = by_hour
        self.batch_size = batch_size
        self.lease_seconds = lease_seconds

    @property
    def suffix(self) -> str:
        return ".ndjson.gz" if self.compress else ".ndjson"

    def export(self, budget: float | None = None, progress: Callable[[int], None] | None = None) -> ExportReport:
        """Write every pending event to files; stop early after ``budget`` seconds."""
        started = time.monotonic()
        report = ExportReport()
        engine = self.writer.engine()
        with contextlib.suppress(Exception):  # the outbox's events still get exported; the spill waits
            self.writer.drain_spill()
        destination = prepare_destination(engine, self.name, "files", str(self.root))
        while budget is None or time.monotonic() - started < budget:
            with engine.begin() as conn:
                claim = store.claim_batch(
                    conn, destination, self.batch_size, self.lease_seconds, start_before_terminal=False
                )
            if not claim.events:
                break
            self._export_claim(engine, claim, report)
            if progress is not None:
                progress(len(claim.events))
        report.pending = pending_count(engine, self.name)
        return report

    def _export_claim(self, engine: Any, claim: store.Claim, report: ExportReport) -> None:
        planned = {e.export_file for e in claim.events if e.export_file}
        existing = {relative for relative in planned if (self.root / relative).exists()}
        written_before = [e for e in claim.events if e.export_file in existing]
        if written_before:
            with engine.begin() as conn:
                report.recovered += store.mark_delivered(conn, claim.token, [e.delivery_id for e in written_before])
        partitions: dict[str, list[store.ClaimedEvent]] = {}
        recovered = {e.delivery_id for e in written_before}
        for event in claim.events:
            if event.delivery_id not in recovered:
                partitions.setdefault(partition_of(event.event_time, self.by_hour), []).append(event)
        files = {
            partition: f"{partition}/events-{group[0].seq:015d}-{claim.token[:10]}{self.suffix}"
            for partition, group in partitions.items()
        }
        with engine.begin() as conn:
            store.plan_export_files(
                conn, claim.token, {e.delivery_id: files[p] for p, group in partitions.items() for e in group}
            )
        for partition, group in partitions.items():
            self._write_file(engine, claim.token, files[partition], group)
            report.exported += len(group)
            report.files += 1

    def _write_file(self, engine: Any, token: str, relative: str, group: list[store.ClaimedEvent]) -> None:
        final = self.root / relative
        temporary = final.parent / f".{final.name}.tmp"
        final.parent.mkdir(parents=True, exist_ok=True)
        body = "".join(event.payload + "\n" for event in group).encode("utf-8")
        with temporary.open("wb") as out:
            out.write(gzip.compress(body, compresslevel=6) if self.compress else body)
        try:
            with engine.begin() as conn:
                marked = store.mark_delivered(conn, token, [e.delivery_id for e in group])
                if marked != len(group):
                    raise ClaimLost(f"the claim on {relative} ran out before the file was written")
                temporary.rename(final)  # under the rows' lock: nobody can claim them meanwhile
        finally:
            if temporary.exists():
                temporary.unlink()


class ClaimLost(RuntimeError):
    """Another exporter took over this claim (its lease ran out); this one's file is discarded."""
