"""Stored values as the API shows them: times as ISO 8601 UTC text, JSON columns decoded."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, overload


@overload
def iso(value: datetime) -> str: ...
@overload
def iso(value: None) -> None: ...
@overload
def iso(value: datetime | None) -> str | None: ...
def iso(value: datetime | None) -> str | None:
    """A stored time as ISO 8601 UTC with microseconds and a ``Z`` suffix (as :class:`.sqltime.iso_utc`)."""
    # The year padded by hand: strftime's %Y writes year 1 as "1" on glibc, which is not ISO 8601.
    return f"{value.year:04d}-{value:%m-%dT%H:%M:%S.%f}Z" if value is not None else None


def loads(text: str | None, default: Any) -> Any:
    """A JSON column's value, or ``default`` when it is empty."""
    return json.loads(text) if text else default
