"""Validate answers of the Marquez-compatible API against Marquez's own OpenAPI description.

``../shared/spec/marquez/openapi.yml`` (Marquez 0.51, OpenAPI 3.0) is read in place, never copied. Its
component schemas become JSON Schema (draft 2020-12) with OpenAPI 3.0's dialect translated: ``nullable:
true`` allows ``null``; ``discriminator`` and ``example`` are dropped (documentation only); ``$ref`` to
``#/components/schemas/X`` resolve against the same document. Formats (``date-time``, ``uri``, ...) are
checked. Two slips of Marquez's document are read as OpenAPI means them: an empty ``type:`` (``SearchResult``'s
``name`` and ``updatedAt``) constrains nothing, and a ``oneOf`` with a ``discriminator`` (``GraphNode.data``:
Job or Dataset, picked by the node's ``type``, which JSON Schema cannot read from the parent) is an ``anyOf``
— without the discriminator every object without the other's required members matches both, and ``oneOf``
would refuse them all. Tests check such data against the discriminated schema themselves.

    from support.marquez_spec import assert_marquez
    assert_marquez("Job", answer.json())
"""

from __future__ import annotations

from functools import cache
from typing import Any

from support.olschema import SHARED

MARQUEZ_SPEC = SHARED / "spec" / "marquez" / "openapi.yml"
SKIP_REASON = f"Marquez's OpenAPI description is not at {MARQUEZ_SPEC} (clone the project with ../shared beside it)"


def marquez_spec_available() -> bool:
    return MARQUEZ_SPEC.is_file()


def require_marquez_spec() -> None:
    """Skip without ``../shared`` on a laptop; fail under ``CI=true``, where it is always beside the clone."""
    if marquez_spec_available():
        return
    from support.environment import unavailable

    unavailable(SKIP_REASON)


def _json_schema(node: Any) -> Any:
    """OpenAPI 3.0 schema object → JSON Schema (recursively)."""
    if isinstance(node, list):
        return [_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    converted = {k: _json_schema(v) for k, v in node.items() if k not in ("discriminator", "example", "nullable")}
    if "type" in node and node["type"] is None:  # an empty ``type:`` says nothing
        del converted["type"]
    if "discriminator" in node and "oneOf" in converted:
        converted["anyOf"] = converted.pop("oneOf")
    if node.get("nullable"):
        if "type" in converted:
            kinds = converted["type"] if isinstance(converted["type"], list) else [converted["type"]]
            converted["type"] = [*kinds, "null"]
            if "enum" in converted:
                converted["enum"] = [*converted["enum"], None]
        else:
            converted = {"anyOf": [converted, {"type": "null"}]}
    return converted


@cache
def _document() -> dict[str, Any]:
    import yaml

    spec = yaml.safe_load(MARQUEZ_SPEC.read_text())
    return {"components": {"schemas": _json_schema(spec["components"]["schemas"])}}


@cache
def _validator(name: str) -> Any:
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT202012

    resource = Resource(contents=_document(), specification=DRAFT202012)
    registry = Registry().with_resource("marquez", resource)
    schema = {"$ref": f"marquez#/components/schemas/{name}"}
    return Draft202012Validator(schema, registry=registry, format_checker=Draft202012Validator.FORMAT_CHECKER)


def marquez_errors(name: str, value: Any) -> list[str]:
    """What in ``value`` breaks Marquez's component schema ``name`` (empty: conforms)."""
    require_marquez_spec()
    if name not in _document()["components"]["schemas"]:
        raise KeyError(f"Marquez's OpenAPI description has no component schema {name!r}")
    return [
        f"{'/'.join(str(p) for p in error.absolute_path) or '(root)'}: {error.message}"
        for error in _validator(name).iter_errors(value)
    ]


def assert_marquez(name: str, value: Any) -> None:
    """Fail listing every violation when ``value`` does not conform to Marquez's schema ``name``."""
    errors = marquez_errors(name, value)
    assert not errors, f"not a Marquez {name}:\n" + "\n".join(errors[:20])
