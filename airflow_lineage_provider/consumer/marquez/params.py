"""Query parameters of Marquez's routes: times, dates, choices and run states, read as Marquez reads them.

A bad value answers 400 naming the parameter and the value (:func:`bad_parameter`).
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Annotated, Literal

from fastapi import Depends, HTTPException, Path, Query, status

from airflow_lineage_provider.consumer.deps import utc_bound

#: A time parameter as received (parsed by :func:`query_time`, so a bad one is a 400 naming it).
TimeText = Annotated[str | None, Query(max_length=64, description="ISO 8601 date-time; without a zone: UTC.")]


def bad_parameter(name: str, value: str, expected: str) -> HTTPException:
    """A 400 naming the parameter, the value received (cut to 100 characters) and what is accepted."""
    return HTTPException(status.HTTP_400_BAD_REQUEST, detail=f"{name}: {value[:100]!r} is not {expected}")


def query_time(value: str | None, name: str) -> datetime | None:
    """A date-time query parameter in UTC (``2022-09-15T07:47:19Z``; a naive one is UTC); None when absent
    or empty; 400 naming it when it is not ISO 8601 or UTC cannot represent it."""
    if value is None or not value.strip():
        return None
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        raise bad_parameter(name, value, "an ISO 8601 date-time such as 2022-09-15T07:47:19Z") from None
    return utc_bound(parsed, name)


def query_date(value: str | None, name: str) -> date | None:
    """A ``YYYY-MM-DD`` query parameter; None when absent or empty; 400 naming it otherwise."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        if len(text) != 10:
            raise ValueError(text)
        return date.fromisoformat(text)
    except ValueError:
        raise bad_parameter(name, value, "a date YYYY-MM-DD such as 2022-09-15") from None


def query_choice(value: str | None, name: str, choices: dict[str, str], default: str | None) -> str | None:
    """``value`` looked up in ``choices`` (keys upper case; the value is matched in any case); ``default``
    when absent or empty; 400 naming the value and the accepted ones otherwise."""
    if value is None or not value.strip():
        return default
    found = choices.get(value.strip().upper())
    if found is None:
        raise bad_parameter(name, value, "one of " + ", ".join(sorted(choices)))
    return found


#: ``sortDirection``'s values.
SORT_DIRECTIONS = {"ASC": "asc", "DESC": "desc"}


State = Literal["NEW", "RUNNING", "COMPLETED", "ABORTED", "FAILED"]
#: A run id as Marquez's paths carry it (anything else is a run that does not exist: 404).
RunId = Annotated[str, Path(alias="id", max_length=100, description="The run's UUID.")]


def run_states(
    run_state: Annotated[
        list[State] | None, Query(alias="runState", description="Only jobs whose latest run is in this state.")
    ] = None,
    last_run_states: Annotated[
        list[State] | None, Query(alias="lastRunStates", description="The same, as Marquez's web UI names it.")
    ] = None,
) -> list[str] | None:
    """The run states asked for with ``runState`` or ``lastRunStates`` (repeatable), or None for any."""
    return [*(run_state or ()), *(last_run_states or ())] or None


RunStates = Annotated[list[str] | None, Depends(run_states)]
