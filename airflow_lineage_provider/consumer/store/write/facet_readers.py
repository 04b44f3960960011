"""Reading the facets the store keeps structured: schema, column lineage, symlinks, parent, nominal time.

Facets are read leniently: a facet of the wrong shape contributes nothing (the event is still stored,
with the facet kept verbatim), so one producer's quirk never costs the rest of its lineage.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from airflow_lineage_provider.consumer.validation import UUID_RE, EventError, parse_time


@dataclass(frozen=True)
class ColumnLink:
    """One column-lineage edge: ``source_namespace/source_name.source_field`` → ``target_field``."""

    source_namespace: str
    source_name: str
    source_field: str
    target_field: str
    transformation: str | None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value and "\x00" not in value and _encodable(value) else None


def _encodable(value: str) -> bool:
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True


def schema_fields(facets: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The ``schema`` facet's fields in Marquez's shape (``{name, type, tags, description, fields?}``), or None."""
    facet = facets.get("schema")
    if not isinstance(facet, dict) or not isinstance(facet.get("fields"), list):
        return None
    return _fields(facet["fields"])


def _fields(items: list[Any]) -> list[dict[str, Any]]:
    result = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            continue
        entry: dict[str, Any] = {
            "name": item["name"],
            "type": item.get("type") if isinstance(item.get("type"), str) else None,
            "tags": [],
            "description": item.get("description") if isinstance(item.get("description"), str) else None,
        }
        if isinstance(item.get("fields"), list) and item["fields"]:
            entry["fields"] = _fields(item["fields"])
        result.append(entry)
    return result


def column_links(facets: dict[str, Any]) -> list[ColumnLink]:
    """Edges of a ``columnLineage`` facet (field-level ``fields`` mappings)."""
    facet = facets.get("columnLineage")
    if not isinstance(facet, dict) or not isinstance(facet.get("fields"), dict):
        return []
    links = []
    for target_field, mapping in facet["fields"].items():
        if not _str(target_field) or not isinstance(mapping, dict) or not isinstance(mapping.get("inputFields"), list):
            continue
        for source in mapping["inputFields"]:
            if not isinstance(source, dict):
                continue
            namespace, name, field = _str(source.get("namespace")), _str(source.get("name")), _str(source.get("field"))
            if namespace and name and field:
                links.append(ColumnLink(namespace, name, field, target_field, _transformation(source, mapping)))
    return links


def _transformation(source: dict[str, Any], mapping: dict[str, Any]) -> str | None:
    found = source.get("transformations")
    if isinstance(found, list) and found:
        return json.dumps(found, sort_keys=True)
    legacy = {
        k: mapping[k] for k in ("transformationType", "transformationDescription") if isinstance(mapping.get(k), str)
    }
    return json.dumps(legacy, sort_keys=True) if legacy else None


def symlinks(facets: dict[str, Any]) -> list[tuple[str, str, str | None]]:
    """``(namespace, name, type)`` of each identifier in a ``symlinks`` facet."""
    facet = facets.get("symlinks")
    if not isinstance(facet, dict) or not isinstance(facet.get("identifiers"), list):
        return []
    found = []
    for item in facet["identifiers"]:
        if isinstance(item, dict) and _str(item.get("namespace")) and _str(item.get("name")):
            found.append((item["namespace"], item["name"], _str(item.get("type"))))
    return found


def parent_run_id(run_facets: dict[str, Any]) -> str | None:
    """The ``parent`` facet's run id (lower case), when it is a UUID (anything else is ignored, not stored)."""
    facet = run_facets.get("parent")
    run = facet.get("run") if isinstance(facet, dict) else None
    run_id = run.get("runId") if isinstance(run, dict) else None
    return run_id.lower() if isinstance(run_id, str) and UUID_RE.fullmatch(run_id) else None


def nominal_times(run_facets: dict[str, Any]) -> tuple[datetime | None, datetime | None]:
    """``(nominalStartTime, nominalEndTime)`` of a ``nominalTime`` facet; unreadable values are None."""
    facet = run_facets.get("nominalTime")
    if not isinstance(facet, dict):
        return None, None
    return _time(facet.get("nominalStartTime")), _time(facet.get("nominalEndTime"))


def _time(value: Any) -> datetime | None:
    try:
        return parse_time(value, "time")
    except EventError:
        return None
