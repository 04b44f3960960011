"""Dataset facet helpers: ``schema_facet``, ``column_lineage_facet`` and facet conversion.

The helpers return plain dataset dicts (``{"name": ..., "facets": {...}}``) that can be printed,
compared and passed anywhere a dataset is accepted. Facets carry ``_producer`` and the ``_schemaURL`` of
the OpenLineage facet class that openlineage-python builds for them, so they validate against the spec.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from openlineage.client.facet_v2 import (
    BaseFacet,
    column_lineage_dataset,
    schema_dataset,
)
from openlineage.client.serde import Serde

from airflow_lineage_provider import conf
from airflow_lineage_provider.reporting import report_misuse

#: Operations that describe how rows are selected or combined rather than how a value is computed:
#: recorded as INDIRECT transformations with the operation as subtype.
INDIRECT_OPERATIONS = frozenset({"JOIN", "FILTER", "GROUP_BY", "SORT", "WINDOW", "CONDITIONAL"})
#: Aggregate functions: recorded as DIRECT/AGGREGATION with the function as description.
AGGREGATIONS = frozenset({"SUM", "COUNT", "AVG", "MIN", "MAX", "MEAN", "MEDIAN", "STDDEV", "COUNT_DISTINCT"})

FieldsSpec = Mapping[str, Any] | Iterable[Any]


def schema_fields(fields: FieldsSpec) -> list[schema_dataset.SchemaDatasetFacetFields]:
    """Turn the accepted field forms into schema facet fields.

    Accepted: a mapping ``{"id": "INTEGER", ...}``; a list of ``(name, type)`` pairs; a list of dicts
    with ``name`` and optional ``type``/``description``; a list of bare names; or
    ``SchemaDatasetFacetFields`` objects. Raises ``TypeError``/``ValueError`` naming the bad entry.
    """
    if isinstance(fields, Mapping):
        items: Iterable[Any] = [{"name": k, "type": v} for k, v in fields.items()]
    elif isinstance(fields, str | bytes) or not isinstance(fields, Iterable):
        raise TypeError(
            f"schema fields {fields!r} are not a list or a mapping; pass {{'column': 'TYPE'}}, "
            "[('column', 'TYPE')] or [{'name': 'column', 'type': 'TYPE'}]"
        )
    else:
        items = fields
    result = []
    for position, item in enumerate(items, start=1):
        if isinstance(item, schema_dataset.SchemaDatasetFacetFields):
            result.append(item)
            continue
        if isinstance(item, str):
            item = {"name": item}
        elif isinstance(item, tuple | list) and len(item) == 2:
            item = {"name": item[0], "type": item[1]}
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str) or not item["name"]:
            raise TypeError(
                f"schema field {item!r} (position {position}) has no name; pass 'column', "
                "('column', 'TYPE') or {'name': 'column', 'type': 'TYPE'}"
            )
        type_ = item.get("type")
        result.append(
            schema_dataset.SchemaDatasetFacetFields(
                name=item["name"],
                type=None if type_ is None else str(type_),
                description=item.get("description"),
                ordinal_position=item.get("ordinal_position"),
                fields=None,  # flat columns: no empty nested "fields" list in the JSON
            )
        )
    return result


def schema_facet(name: str, fields: FieldsSpec) -> dict[str, Any]:
    """A dataset with an explicit ``schema`` facet.

    Example::

        schema_facet("main/orders", {"id": "INTEGER", "amount": "NUMERIC(10,2)"})
        # {"name": "main/orders", "facets": {"schema": {"_producer": ..., "_schemaURL": ...,
        #   "fields": [{"name": "id", "type": "INTEGER"}, {"name": "amount", "type": "NUMERIC(10,2)"}]}}}

    A dataset passed with a ``schema`` facet keeps it: schema enrichment never overwrites it.

    ``fields`` that cannot be a schema are misuse: logged once, and the dataset is returned without the facet
    (with ``[lineage_provider] strict`` on, the ``TypeError`` naming the bad entry is raised instead).
    """
    try:
        parsed = schema_fields(fields)
    except (TypeError, ValueError) as error:
        report_misuse(error)
        return {"name": name}
    facet = schema_dataset.SchemaDatasetFacet(fields=parsed, producer=conf.producer())
    return {"name": name, "facets": {"schema": Serde.to_dict(facet)}}


def _transformation(operation: str | None) -> column_lineage_dataset.Transformation:
    if not operation:
        return column_lineage_dataset.Transformation(type="DIRECT", subtype="IDENTITY")
    op = operation.strip().upper().replace(" ", "_")
    if op in INDIRECT_OPERATIONS:
        return column_lineage_dataset.Transformation(type="INDIRECT", subtype=op, description=operation)
    if op in AGGREGATIONS:
        return column_lineage_dataset.Transformation(type="DIRECT", subtype="AGGREGATION", description=operation)
    return column_lineage_dataset.Transformation(type="DIRECT", subtype="TRANSFORMATION", description=operation)


def _source_ref(source: Any) -> tuple[str, str]:
    """(namespace, name) of a column-lineage source; plain strings are named like datasets."""
    from airflow_lineage_provider.producer.dataset_refs import to_dataset_ref

    ref = to_dataset_ref(source)
    return ref.namespace, ref.name


def column_lineage_facet(name: str, mappings: Mapping[str, Any]) -> dict[str, Any]:
    """A dataset with a ``columnLineage`` facet mapping each output field to its sources.

    ``mappings`` maps an output field to one source or a list of sources, each a dict with ``source``
    (a dataset in any accepted form, e.g. ``"main/orders"``), ``field`` and optional ``operation``
    (``"JOIN"``, ``"SUM"``, ``"FILTER"``, any description). The operation becomes the field's
    transformation: JOIN/FILTER/GROUP_BY/SORT/WINDOW/CONDITIONAL are INDIRECT with that subtype,
    aggregates are DIRECT/AGGREGATION, anything else DIRECT/TRANSFORMATION; no operation is
    DIRECT/IDENTITY.

    Example::

        column_lineage_facet("main/order_totals", {
            "customer_id": {"source": "main/orders", "field": "customer_id"},
            "total": {"source": "main/orders", "field": "amount", "operation": "SUM"},
        })

    Sources named by plain strings are renamed by the same connectors as the run's datasets, so the
    facet points at the datasets the event actually carries.

    ``mappings`` that cannot be column lineage are misuse: logged once, and the dataset is returned without the
    facet (with ``[lineage_provider] strict`` on, the ``TypeError`` naming the bad entry is raised instead).
    """
    try:
        fields = _column_fields(mappings)
    except (TypeError, ValueError) as error:
        report_misuse(error)
        return {"name": name}
    facet = column_lineage_dataset.ColumnLineageDatasetFacet(fields=fields, producer=conf.producer())
    return {"name": name, "facets": {"columnLineage": Serde.to_dict(facet)}}


def _column_fields(mappings: Mapping[str, Any]) -> dict[str, column_lineage_dataset.Fields]:
    """The column lineage facet's fields; raises ``TypeError`` naming the first entry that cannot be one."""
    if not isinstance(mappings, Mapping):
        raise TypeError(
            f"column lineage mappings {mappings!r} are not a mapping; pass "
            "{'output_field': {'source': 'db/table', 'field': 'input_field', 'operation': 'SUM'}}"
        )
    fields: dict[str, column_lineage_dataset.Fields] = {}
    for output_field, spec in mappings.items():
        sources = spec if isinstance(spec, list | tuple) else [spec]
        input_fields = []
        for source in sources:
            if not isinstance(source, Mapping) or "source" not in source or "field" not in source:
                raise TypeError(
                    f"column lineage source {source!r} for field {output_field!r} needs 'source' and "
                    "'field' keys (and optionally 'operation'), e.g. "
                    "{'source': 'main/orders', 'field': 'amount', 'operation': 'SUM'}"
                )
            namespace, dataset_name = _source_ref(source["source"])
            input_fields.append(
                column_lineage_dataset.InputField(
                    namespace=namespace,
                    name=dataset_name,
                    field=str(source["field"]),
                    transformations=[_transformation(source.get("operation"))],
                )
            )
        fields[str(output_field)] = column_lineage_dataset.Fields(inputFields=input_fields)
    return fields


def facet_from_value(value: Any, base: type[BaseFacet], key: str) -> BaseFacet:
    """An openlineage facet object from a facet object or a facet dict (``_producer``/``_schemaURL`` kept).

    Dict facets become instances of ``base`` (``DatasetFacet``, ``RunFacet`` or ``JobFacet``) with the
    dict's properties; a dict without ``_schemaURL`` gets the base facet's schema URL.
    """
    if isinstance(value, BaseFacet):
        return value
    if not isinstance(value, Mapping):
        raise TypeError(
            f"facet {key!r} is {value!r} ({type(value).__name__}); pass an openlineage facet object "
            "(openlineage.client.facet_v2) or a dict of its JSON properties"
        )
    props = dict(value)
    try:
        json.dumps(props)
    except (TypeError, ValueError) as error:
        raise TypeError(
            f"facet {key!r} is not JSON-serializable ({error}); use only JSON values in facet dicts"
        ) from None
    producer = props.pop("_producer", None) or conf.producer()
    schema_url = props.pop("_schemaURL", None)
    facet = (_facet_class(base, str(schema_url)) if schema_url else base)(producer=producer)
    if props:
        facet = facet.with_additional_properties(**props)
    return facet


_facet_classes: dict[tuple[type[BaseFacet], str], type[BaseFacet]] = {}


def _facet_class(base: type[BaseFacet], schema_url: str) -> type[BaseFacet]:
    """A subclass of ``base`` naming ``schema_url`` as its schema: openlineage-python's documented way for a
    custom facet to set its ``_schemaURL`` (overriding ``_get_schema``), one class per base and URL.

    Each class is bound in this module under its own name, so that copying or pickling a facet (the stock
    redactor is given a copy of each event) finds the class and keeps the schema URL."""
    found = _facet_classes.get((base, schema_url))
    if found is None:
        digest = hashlib.sha1(f"{base.__module__}.{base.__qualname__} {schema_url}".encode()).hexdigest()[:16]
        name = f"_{base.__name__}_{digest}"

        def get_schema() -> str:
            return schema_url

        found = type(name, (base,), {"_get_schema": staticmethod(get_schema), "__module__": __name__})
        found.__qualname__ = name
        globals()[name] = _facet_classes[(base, schema_url)] = found
    return found


def facets_from_mapping(facets: Mapping[str, Any] | None, base: type[BaseFacet]) -> dict[str, Any]:
    """Convert every value of a facet mapping with :func:`facet_from_value`.

    A facet that cannot be used is reported as misuse (raised in strict mode) and left out, so the event
    still goes out with the other facets.
    """
    if not facets:
        return {}
    if not isinstance(facets, Mapping):
        report_misuse(TypeError(f"facets {facets!r} are not a mapping of facet name to facet"))
        return {}
    converted = {}
    for key, value in facets.items():
        try:
            converted[str(key)] = facet_from_value(value, base, str(key))
        except TypeError as error:
            report_misuse(error)
    return converted


__all__ = [
    "column_lineage_facet",
    "facet_from_value",
    "facets_from_mapping",
    "schema_facet",
    "schema_fields",
]
