"""Strict mode: validate events against the OpenLineage spec's JSON schemas (core and facets).

The schemas are not shipped with openlineage-python, so strict mode reads them from a folder laid out like
the ``spec/`` folder of the OpenLineage repository (``OpenLineage.json`` and ``facets/*.json``), given as
``spec_dir``. Facets are checked against their own schema when one is known by ``_schemaURL`` or by key;
custom facets only against the core schema's generic facet shape.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

CORE = "OpenLineage.json"
_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")


class SpecValidator:
    """Validates one event against the OpenLineage JSON schemas found in ``spec_dir``."""

    def __init__(self, spec_dir: str | Path) -> None:
        from jsonschema import Draft202012Validator, FormatChecker
        from referencing import Registry, Resource

        folder = Path(spec_dir).expanduser()
        core_path = folder / CORE
        if not core_path.is_file():
            raise ValueError(
                f"strict mode needs the OpenLineage spec: {core_path} does not exist (point spec_dir at the "
                "folder with OpenLineage.json and facets/, the spec/ folder of the OpenLineage repository)"
            )
        docs = [json.loads(core_path.read_text())]
        docs += [json.loads(p.read_text()) for p in sorted((folder / "facets").glob("*.json"))]
        self._core_id: str = docs[0]["$id"]
        self._by_url = {doc["$id"]: doc for doc in docs[1:]}
        self._by_key: dict[str, list[dict[str, Any]]] = {}
        for doc in docs[1:]:
            for key in doc.get("properties", {}):
                self._by_key.setdefault(key, []).append(doc)
        registry = Registry().with_resources((doc["$id"], Resource.from_contents(doc)) for doc in docs)
        # Only the formats lineage depends on, checked the same whatever optional format packages are
        # installed: uuid (built in) and RFC 3339 date-time (below).
        checker = FormatChecker(formats=("uuid",))
        checker.checks("date-time")(lambda value: not isinstance(value, str) or bool(_RFC3339.match(value)))
        self._validator_class = Draft202012Validator
        self._registry = registry
        self._checker = checker

    def _errors(self, schema: dict[str, Any], instance: Any) -> list[str]:
        validator = self._validator_class(schema, registry=self._registry, format_checker=self._checker)
        return [
            f"{'/'.join(map(str, e.absolute_path)) or '(event)'}: {e.message}" for e in validator.iter_errors(instance)
        ]

    def errors(self, event: dict[str, Any]) -> list[str]:
        """Every violation of ``event``: core schema first, then each known facet's schema."""
        kind = "RunEvent" if "run" in event else "DatasetEvent" if "dataset" in event else "JobEvent"
        found = self._errors({"$ref": f"{self._core_id}#/$defs/{kind}"}, event)
        for where, facets in _facet_groups(event):
            for key, facet in facets.items():
                url = facet.get("_schemaURL", "") if isinstance(facet, dict) else ""
                doc = self._by_url.get(str(url).split("#", 1)[0])
                candidates = (
                    [doc] if doc is not None and key in doc.get("properties", {}) else self._by_key.get(key, [])
                )
                results = [self._errors(candidate, {key: facet}) for candidate in candidates]
                if results and all(results):
                    found += [f"{where}.{key}: {error}" for error in results[0]]
        return found


def _facet_groups(event: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    groups = []
    for section in ("run", "job", "dataset"):
        value = event.get(section)
        if isinstance(value, dict) and isinstance(value.get("facets"), dict):
            groups.append((section, value["facets"]))
    for kind in ("inputs", "outputs"):
        items = event.get(kind)
        for i, dataset in enumerate(items if isinstance(items, list) else []):
            if isinstance(dataset, dict):
                for group in ("facets", "inputFacets", "outputFacets"):
                    if isinstance(dataset.get(group), dict):
                        groups.append((f"{kind}[{i}].{group}", dataset[group]))
    return groups
