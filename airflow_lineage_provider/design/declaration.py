"""A ``LineageMixin`` task's declared lineage as it travels in Airflow's serialized DAG, and back.

Airflow serializes only an operator's known fields and its ``template_fields``; the mixin's
``lineage_inputs``, ``lineage_outputs`` and ``lineage_connector`` are neither (they are rendered by the
mixin so that a broken template never fails the task). The mixin therefore adds one more serialized field,
:data:`DECLARATION_FIELD`, whose value :func:`encode_declaration` makes: a JSON document of the
declarations *as written* — templates unrendered, connection ids unresolved — so that publication can read
them from the metadata database (:func:`decode_declaration`) without importing the DAG file.

The document must be the same on every parse of an unchanged DAG, or Airflow would store a new DAG version
each time: it is built only from the declared values (keys sorted), never from object identities. Values
that cannot be written down faithfully (a hook object, a schema-source object) are recorded by type name,
and publication names their datasets without them.

Format (version 1)::

    {"v": 1,
     "inputs":  ["warehouse/orders", {"namespace": "s3://b", "name": "k", "facets": {...}},
                 {"asset": {"name": "orders", "uri": "s3://b/orders", "extra": {}}}],
     "outputs": [...],
     "connector": "warehouse" | {"url": "postgresql://u:***@db:5432/x"} | {"prefix": <connector>, ...}
                  | {"unsupported": "MySchemaSource"} | null}
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_lineage_provider.reporting import warn_once

#: The serialized operator field holding :func:`encode_declaration`'s document.
DECLARATION_FIELD = "lineage_declaration"
FORMAT_VERSION = 1
_UNSUPPORTED = "unsupported"


def _facet_json(facet: Any) -> Any:
    from airflow_lineage_provider.producer.dataset_refs import facet_dict

    return json.loads(json.dumps(facet_dict(facet), sort_keys=True, default=str))


def asset_parts(value: Any) -> tuple[str, str, dict[str, Any]] | None:
    """``(name, uri, extra)`` of an Airflow ``Asset`` or of its serialized form (``SerializedAsset``, as a DAG
    read from the metadata database holds it); ``None`` for anything else (aliases and references included)."""
    from airflow.sdk import Asset

    serialized: tuple[type, ...] = ()
    try:
        from airflow.serialization.definitions.assets import SerializedAsset

        serialized = (SerializedAsset,)
    except ImportError:  # pragma: no cover - the Task SDK without core Airflow
        pass
    if isinstance(value, (Asset, *serialized)):
        asset: Any = value  # an Asset or a SerializedAsset: both have name, uri and extra
        return asset.name, asset.uri, dict(asset.extra or {})
    return None


def encode_dataset(value: Any) -> Any:
    """One declared dataset entry as JSON: strings as written, the other accepted forms as dicts."""
    from openlineage.client.event_v2 import Dataset

    from airflow_lineage_provider.producer.dataset_refs import DatasetRef

    if isinstance(value, str):
        return value
    if isinstance(value, Dataset | DatasetRef):
        facets = {str(k): _facet_json(v) for k, v in (value.facets or {}).items()}
        return {"namespace": value.namespace, "name": value.name, "facets": facets}
    if isinstance(value, Mapping):
        facets = value.get("facets") or {}
        encoded = {str(k): v for k, v in value.items() if k != "facets"}
        if isinstance(facets, Mapping):
            encoded["facets"] = {str(k): _facet_json(v) for k, v in facets.items()}
        return json.loads(json.dumps(encoded, sort_keys=True, default=str))
    if (asset := asset_parts(value)) is not None:
        name, uri, extra = asset
        return {
            "asset": {"name": name, "uri": uri, "extra": json.loads(json.dumps(extra, sort_keys=True, default=str))}
        }
    return {_UNSUPPORTED: type(value).__name__}


def _encode_datasets(values: Any) -> list[Any]:
    if values is None:
        return []
    if isinstance(values, str | Mapping) or not isinstance(values, list | tuple):
        values = [values]
    return [encode_dataset(value) for value in values]


def encode_connector(connector: Any) -> Any:
    """A connector as JSON: a connection id as written, an engine by its URL without password, a hook by its
    connection id, a dict per prefix; anything else by its type name."""
    if connector is None or isinstance(connector, str):
        return connector
    if isinstance(connector, Mapping):
        return {str(prefix): encode_connector(value) for prefix, value in connector.items()}
    try:
        from sqlalchemy.engine import Engine

        if isinstance(connector, Engine):
            return {"url": connector.url.render_as_string(hide_password=True)}
    except ImportError:  # pragma: no cover - SQLAlchemy is a dependency
        pass
    get_conn_id = getattr(connector, "get_conn_id", None)
    if callable(get_conn_id):
        try:
            conn_id = get_conn_id()
        except Exception:
            conn_id = None
        if isinstance(conn_id, str) and conn_id:
            return conn_id
    return {_UNSUPPORTED: type(connector).__name__}


def encode_declaration(inputs: Any, outputs: Any, connector: Any) -> str | None:
    """The :data:`DECLARATION_FIELD` document of a task's declarations; ``None`` when it declares nothing.

    Called by Airflow while it serializes the DAG (in the DAG processor), so it never raises: a failure is
    logged and leaves the declaration out of the serialized DAG.
    """
    if inputs is None and outputs is None:
        return None
    try:
        document = {
            "v": FORMAT_VERSION,
            "inputs": _encode_datasets(inputs),
            "outputs": _encode_datasets(outputs),
            "connector": encode_connector(connector),
        }
        return json.dumps(document, sort_keys=True, separators=(",", ":"))
    except Exception as error:
        warn_once(f"Lineage: the declared lineage could not be serialized for design-time publication: {error}")
        return None


@dataclass
class Declaration:
    """A task's declared lineage read back from its serialized form, in forms ``to_dataset_refs`` accepts."""

    inputs: list[Any] = field(default_factory=list)
    outputs: list[Any] = field(default_factory=list)
    connector: Any = None
    """The connector as :func:`encode_connector` wrote it (turn it into a spec with :func:`connector_spec`)."""
    unsupported: list[str] = field(default_factory=list)
    """Type names of dataset entries that could not be written down."""


def _decode_dataset(entry: Any, declaration: Declaration) -> Any | None:
    if isinstance(entry, str):
        return entry
    if isinstance(entry, Mapping) and isinstance(entry.get("asset"), Mapping):
        from airflow.sdk import Asset

        asset = entry["asset"]
        return Asset(name=asset.get("name") or asset["uri"], uri=asset["uri"], extra=asset.get("extra") or {})
    if isinstance(entry, Mapping) and _UNSUPPORTED in entry:
        declaration.unsupported.append(str(entry[_UNSUPPORTED]))
        return None
    return entry


def connector_spec(value: Any, unsupported: list[str]) -> Any:
    """The connector spec :class:`~airflow_lineage_provider.producer.connectors.Connectors` takes for a connector
    as :func:`encode_connector` wrote it: connection ids as they are, an engine (which names tables from its
    URL and never connects here) for a URL. Connectors that were written down by type only are left out, their
    type names appended to ``unsupported``."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, Mapping) and _UNSUPPORTED in value and len(value) == 1:
        unsupported.append(str(value[_UNSUPPORTED]))
        return None
    if isinstance(value, Mapping) and set(value) == {"url"} and isinstance(value["url"], str):
        import sqlalchemy as sa

        return sa.create_engine(value["url"])
    if isinstance(value, Mapping):
        specs = {str(prefix): connector_spec(each, unsupported) for prefix, each in value.items()}
        return {prefix: spec for prefix, spec in specs.items() if spec is not None} or None
    return None


def decode_declaration(document: str | None) -> Declaration | None:
    """The :class:`Declaration` in a :data:`DECLARATION_FIELD` document (``None`` for none or another format)."""
    if not document:
        return None
    parsed = json.loads(document)
    if not isinstance(parsed, Mapping) or parsed.get("v") != FORMAT_VERSION:
        return None
    declaration = Declaration(connector=parsed.get("connector"))
    declaration.inputs = [d for e in parsed.get("inputs") or [] if (d := _decode_dataset(e, declaration)) is not None]
    declaration.outputs = [d for e in parsed.get("outputs") or [] if (d := _decode_dataset(e, declaration)) is not None]
    return declaration


def declaration_from_partial_kwargs(partial_kwargs: Mapping[str, Any]) -> Declaration | None:
    """The declaration of a mapped task (``.expand()``), whose constructor arguments Airflow keeps as they are."""
    keys = ("lineage_inputs", "lineage_outputs", "lineage_connector")
    if not any(partial_kwargs.get(key) is not None for key in keys):
        return None
    return decode_declaration(
        encode_declaration(
            partial_kwargs.get("lineage_inputs"),
            partial_kwargs.get("lineage_outputs"),
            partial_kwargs.get("lineage_connector"),
        )
    )
