"""Stored events as Feast's consumer lists them: each with the names it carries, its times in epoch milliseconds."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec

from airflow_lineage_provider.consumer.validation import event_key


def event_type(event: dict[str, Any]) -> str:
    """A RunEvent's ``eventType``; ``DATASET`` or ``JOB`` for the other kinds (Feast's classification)."""
    if "eventType" in event:
        return str(event["eventType"])
    if "dataset" in event and "run" not in event and "job" not in event:
        return "DATASET"
    if "job" in event and "run" not in event:
        return "JOB"
    return "UNKNOWN"


def _epoch_ms(text: Any) -> int | None:
    try:
        return int(datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return None


def event_row(payload: msgspec.Raw, received: dict[str, int | None]) -> dict[str, Any]:
    """One stored event (its stored text) as Feast's row: the job's names, or a DatasetEvent's dataset's."""
    text = bytes(payload).decode()
    event = msgspec.json.decode(text)
    named = event.get("job") or event.get("dataset") or {}
    run = event.get("run") or {}
    key = event_key(text)
    return {
        "event_id": key,
        "event_type": event_type(event),
        "event_time": _epoch_ms(event.get("eventTime")),
        "producer": event.get("producer"),
        "job_namespace": named.get("namespace", ""),
        "job_name": named.get("name", ""),
        "run_id": run.get("runId"),
        "event_json": text,
        "created_at": received.get(key),
    }
