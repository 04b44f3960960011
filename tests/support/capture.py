"""Capture the events a process emits, through openlineage-python's real file transport."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def read_events(path: Path) -> list[dict[str, Any]]:
    """Every event the file transport appended to ``path`` (one JSON document per line)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def file_transport_env(path: Path) -> dict[str, str]:
    """Environment selecting the file transport in append mode (works in and outside Airflow)."""
    return {
        "OPENLINEAGE__TRANSPORT__TYPE": "file",
        "OPENLINEAGE__TRANSPORT__LOG_FILE_PATH": str(path),
        "OPENLINEAGE__TRANSPORT__APPEND": "true",
    }
