"""Validate OpenLineage events against the JSON schemas in ``../shared/spec``.

The schemas are read in place from the ``shared`` folder beside the repository (``LINEAGE_SHARED_DIR``
overrides where it is); they are never copied into the repository. Core events are checked against
``OpenLineage.json`` (2-0-2) with format checks; each facet against its own schema, found by the
facet's ``_schemaURL`` (or by facet key among the spec's facet schemas), including Egeria's facets and
this package's own facet schemas.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("LINEAGE_SHARED_DIR", REPO.parent / "shared"))
SPEC = SHARED / "spec"
CORE_ID = "https://openlineage.io/spec/2-0-2/OpenLineage.json"
PACKAGE_SCHEMAS = REPO / "airflow_lineage_provider" / "schemas"


SKIP_REASON = f"the OpenLineage spec is not at {SPEC}/openlineage (clone the project with ../shared beside it)"


def shared_available() -> bool:
    """Whether ../shared/spec is there. Under ``CI=true`` its absence fails the test instead: CI must validate
    every event, never skip it (as PostgreSQL and Chromium tests already do)."""
    if (SPEC / "openlineage" / "OpenLineage.json").is_file():
        return True
    from support.environment import IN_CI, unavailable  # environment imports this module

    if IN_CI:
        unavailable(SKIP_REASON)
    return False


def _schema_files() -> Iterable[Path]:
    yield SPEC / "openlineage" / "OpenLineage.json"
    yield from sorted((SPEC / "openlineage" / "facets").glob("*.json"))
    yield from sorted((SPEC / "egeria").glob("*/*.json"))
    if PACKAGE_SCHEMAS.is_dir():
        yield from sorted(PACKAGE_SCHEMAS.rglob("*.json"))


@cache
def _registry() -> tuple[Any, dict[str, dict[str, Any]], dict[str, list[dict[str, Any]]]]:
    from referencing import Registry, Resource

    docs: dict[str, dict[str, Any]] = {}
    by_key: dict[str, list[dict[str, Any]]] = {}
    for path in _schema_files():
        doc = json.loads(path.read_text())
        docs[doc["$id"]] = doc
        if doc["$id"] != CORE_ID:
            for key in doc.get("properties", {}):
                by_key.setdefault(key, []).append(doc)
    registry = Registry().with_resources((i, Resource.from_contents(d)) for i, d in docs.items())
    return registry, docs, by_key


def _validator(schema: dict[str, Any]) -> Any:
    from jsonschema import Draft202012Validator, FormatChecker

    registry, _, _ = _registry()
    return Draft202012Validator(schema, registry=registry, format_checker=FormatChecker())


def _errors(schema: dict[str, Any], instance: Any) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in _validator(schema).iter_errors(instance)]


def _facet_groups(event: dict[str, Any]) -> Iterable[tuple[str, dict[str, Any]]]:
    yield "run", (event.get("run") or {}).get("facets") or {}
    yield "job", (event.get("job") or {}).get("facets") or {}
    if "dataset" in event:
        yield "dataset", event["dataset"].get("facets") or {}
    for kind in ("inputs", "outputs"):
        for i, dataset in enumerate(event.get(kind) or []):
            yield f"{kind}[{i}]", dataset.get("facets") or {}
            yield f"{kind}[{i}].io", dataset.get("inputFacets") or dataset.get("outputFacets") or {}


def event_errors(event: dict[str, Any], require_known_facets: bool = True, ignore: Iterable[str] = ()) -> list[str]:
    """Every schema violation of one event: core first, then each facet against its facet schema.

    A facet whose schema is unknown is an error when ``require_known_facets`` (the default), unless its
    key is in ``ignore`` (facets of other producers, e.g. the stock provider's ``airflow`` facets).
    """
    _, docs, by_key = _registry()
    kind = "RunEvent"
    if "dataset" in event and "run" not in event:
        kind = "DatasetEvent"
    elif "job" in event and "run" not in event:
        kind = "JobEvent"
    errors = [f"core: {e}" for e in _errors({"$ref": f"{CORE_ID}#/$defs/{kind}"}, event)]
    for where, facets in _facet_groups(event):
        for key, facet in facets.items():
            url = facet.get("_schemaURL", "") if isinstance(facet, dict) else ""
            doc = docs.get(url.split("#", 1)[0])
            candidates = [doc] if doc is not None and key in doc.get("properties", {}) else by_key.get(key, [])
            if not candidates:
                if require_known_facets and key not in ignore:
                    errors.append(f"{where}.{key}: no schema known for this facet ({url or 'no _schemaURL'})")
                continue
            found = [_errors(candidate, {key: facet}) for candidate in candidates]
            if all(found):
                errors.extend(f"{where}.{key}: {e}" for e in found[0])
    return errors


def assert_valid_event(event: dict[str, Any], **kwargs: Any) -> None:
    errors = event_errors(event, **kwargs)
    assert not errors, "event does not validate against ../shared/spec:\n  " + "\n  ".join(errors)


#: Facets the stock Airflow provider's listener and adapter add whose schemas live outside ../shared/spec
#: (they are checked against the core RunFacet/JobFacet schema only).
STOCK_PROVIDER_FACETS = frozenset(
    {
        "airflow",
        "airflowDagRun",
        "airflowState",
        "airflowDebug",
        "airflow_mappedTask",
        "airflow_runArgs",
        "debug",
        "unknownSourceAttribute",
        "tags",
    }
)
