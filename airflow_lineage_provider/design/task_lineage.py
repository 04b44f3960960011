"""The datasets a task declares, read from its serialized form without running anything.

Three sources, named as the running task names them so that declared and observed lineage meet:

* ``@task.lineage`` / ``LineageMixin`` declarations (:mod:`.declaration`), normalised by
  :func:`~airflow_lineage_provider.producer.dataset_refs.to_dataset_refs` and named by the task's connector
  (:func:`~airflow_lineage_provider.producer.connectors.name_datasets`), as the mixin does at run time;
* ``inlets``/``outlets`` Assets, translated as every Asset in this package is (the stock provider's
  converter, else the asset's URI);
* the operator's ``sql`` when it holds no template, through :func:`~airflow_lineage_provider.extractors.sql.sql_lineage`
  (the extractor's SQL lineage), with its ``sql`` job facet. Templated SQL or SQL read from a file is left
  out and recorded as incomplete.

Templated dataset names are kept as written and carry the ``airflowLineageProvider_templatedName`` facet.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from openlineage.client.event_v2 import InputDataset, OutputDataset
from openlineage.client.facet_v2 import DatasetFacet, JobFacet

from airflow_lineage_provider.design.declaration import (
    DECLARATION_FIELD,
    Declaration,
    asset_parts,
    connector_spec,
    declaration_from_partial_kwargs,
    decode_declaration,
)
from airflow_lineage_provider.facets.design_time import TEMPLATED_NAME_KEY, TemplatedNameDatasetFacet
from airflow_lineage_provider.name_templates import Protected, is_templated, name_regex, template_variables
from airflow_lineage_provider.producer.dataset_refs import DatasetRef, to_dataset_ref, to_dataset_refs
from airflow_lineage_provider.reporting import warn_once


@dataclass
class TaskLineage:
    """What one task declares: its datasets, job facets (``sql``) and what could not be read."""

    inputs: list[InputDataset] = field(default_factory=list)
    outputs: list[OutputDataset] = field(default_factory=list)
    job_facets: dict[str, JobFacet] = field(default_factory=dict)
    incomplete: list[str] = field(default_factory=list)


class ConnectorCache:
    """The connectors of one publication pass, resolved once per distinct connector (an Airflow connection is
    looked up once, not once per task)."""

    def __init__(self) -> None:
        self._connectors: dict[str, Any] = {}

    def connectors(self, declared: Any, incomplete: list[str]) -> Any:
        """The :class:`~airflow_lineage_provider.producer.connectors.Connectors` of a declared connector."""
        from airflow_lineage_provider.producer.connectors import Connectors

        key = json.dumps(declared, sort_keys=True)
        if key not in self._connectors:
            unsupported: list[str] = []
            self._connectors[key] = (Connectors(connector_spec(declared, unsupported)), unsupported)
        connectors, unsupported = self._connectors[key]
        incomplete.extend(f"connector {name} cannot be used at design time" for name in unsupported)
        return connectors


def declaration_of(task: Any) -> Declaration | None:
    """The ``@task.lineage``/``LineageMixin`` declaration of a serialized task (mapped or not), if any."""
    partial_kwargs = getattr(task, "partial_kwargs", None)
    if getattr(task, "is_mapped", False) and isinstance(partial_kwargs, Mapping):
        return declaration_from_partial_kwargs(partial_kwargs)
    return decode_declaration(getattr(task, DECLARATION_FIELD, None))


def _protected_entry(entry: Any, protected: Protected) -> Any:
    if isinstance(entry, str):
        return protected.protect(entry)
    if isinstance(entry, Mapping):
        copied = dict(entry)
        for key in ("name", "namespace"):
            if isinstance(copied.get(key), str):
                copied[key] = protected.protect(copied[key])
        return copied
    return entry


def templated_name_facet(namespace: str, name: str) -> TemplatedNameDatasetFacet | None:
    """The ``airflowLineageProvider_templatedName`` facet of a dataset whose name or namespace is templated."""
    if not is_templated(name) and not is_templated(namespace):
        return None
    from airflow_lineage_provider import conf

    namespace_templated = is_templated(namespace)
    return TemplatedNameDatasetFacet(
        nameTemplate=name,
        nameRegex=name_regex(name),
        variables=sorted(set(template_variables(name)) | set(template_variables(namespace))),
        namespaceTemplate=namespace if namespace_templated else None,
        namespaceRegex=name_regex(namespace) if namespace_templated else None,
        producer=conf.producer(),
    )


def _declared_refs(
    declaration: Declaration, cache: ConnectorCache, lineage: TaskLineage
) -> tuple[list[DatasetRef], list[DatasetRef]]:
    from airflow_lineage_provider.producer.connectors import name_datasets

    protected = Protected()
    inputs = to_dataset_refs([_protected_entry(e, protected) for e in declaration.inputs], "lineage_inputs")
    outputs = to_dataset_refs([_protected_entry(e, protected) for e in declaration.outputs], "lineage_outputs")
    lineage.incomplete.extend(
        f"dataset given as {name} cannot be read at design time" for name in declaration.unsupported
    )
    connectors = None
    if declaration.connector is not None:
        connectors = cache.connectors(declaration.connector, lineage.incomplete)
        name_datasets(inputs + outputs, connectors)
    for ref in inputs + outputs:
        ref.namespace, ref.name = protected.restore(ref.namespace), protected.restore(ref.name)
        if ref.raw is not None:
            ref.raw = protected.restore(ref.raw)
    if connectors is not None:
        _note_unresolved(declaration.connector, connectors, inputs + outputs, lineage.incomplete)
    return inputs, outputs


def _note_unresolved(declared: Any, connectors: Any, refs: list[DatasetRef], incomplete: list[str]) -> None:
    """Record a connector that could not be resolved here: its datasets keep the default namespace, so they
    would not meet the names the running task gives them."""
    for ref in refs:
        if ref.raw is None or not connectors:
            continue
        prefix = ref.raw.partition("/")[0]
        serves = not isinstance(declared, Mapping) or prefix in declared
        if serves and connectors.source_for(ref.raw) is None:
            incomplete.append(
                f"connector of {ref.raw!r} could not be resolved at design time; it keeps the default namespace"
            )


def asset_refs(assets: Iterable[Any] | None) -> tuple[list[DatasetRef], list[str]]:
    """Datasets for serialized Assets (as every Asset is named in this package), and the asset-like objects
    that name no dataset before a run (aliases, references)."""
    refs, unresolved = [], []
    for value in assets or ():
        parts = asset_parts(value)
        if parts is None:
            unresolved.append(f"{type(value).__name__.removeprefix('Serialized')} {getattr(value, 'name', value)!s}")
            continue
        from airflow.sdk import Asset

        name, uri, extra = parts
        refs.append(to_dataset_ref(Asset(name=name, uri=uri, extra=extra)))
    return refs, unresolved


def _static_sql_lineage(task: Any, lineage: TaskLineage) -> Any | None:
    from airflow_lineage_provider.extractors.sql import sql_lineage, sql_of

    sql = sql_of(task)
    if sql is None:
        return None
    statements = [sql] if isinstance(sql, str) else sql
    if any(is_templated(statement) for statement in statements):
        lineage.incomplete.append("sql is templated: its tables are known only when a run renders it")
        return None
    extensions = tuple(getattr(task, "template_ext", None) or ())
    if extensions and any(statement.strip().endswith(extensions) for statement in statements):
        lineage.incomplete.append("sql is read from a file when the task runs")
        return None
    try:
        return sql_lineage(task, use_connection=False)
    except Exception as error:
        warn_once(f"Lineage: the SQL of task {getattr(task, 'task_id', '?')!r} could not be parsed: {error}")
        lineage.incomplete.append(f"sql could not be parsed: {error}")
        return None


def as_datasets(refs: list[DatasetRef], kind: type) -> list[Any]:
    """``InputDataset``/``OutputDataset`` objects (``kind``) for ``refs``, once per name, templated names marked."""
    from airflow_lineage_provider.producer.dataset_facets import facets_from_mapping

    seen: set[tuple[str, str]] = set()
    datasets = []
    for ref in refs:
        if (ref.namespace, ref.name) in seen:
            continue
        seen.add((ref.namespace, ref.name))
        facets = facets_from_mapping(ref.facets, DatasetFacet)
        if (templated := templated_name_facet(ref.namespace, ref.name)) is not None:
            facets[TEMPLATED_NAME_KEY] = templated
        datasets.append(kind(ref.namespace, ref.name, facets=facets))
    return datasets


def task_lineage(task: Any, cache: ConnectorCache) -> TaskLineage:
    """The declared lineage of one serialized task (a ``SerializedBaseOperator`` or mapped operator)."""
    lineage = TaskLineage()
    inputs: list[DatasetRef] = []
    outputs: list[DatasetRef] = []
    declaration = declaration_of(task)
    if declaration is not None:
        inputs, outputs = _declared_refs(declaration, cache, lineage)
    for role, target in (("inlets", inputs), ("outlets", outputs)):
        refs, unresolved = asset_refs(getattr(task, role, None))
        target.extend(refs)
        lineage.incomplete.extend(f"{role}: {each} is resolved only at run time" for each in unresolved)
    from_sql = _static_sql_lineage(task, lineage)
    if from_sql is not None:
        inputs += [DatasetRef(d.namespace, d.name, dict(d.facets or {})) for d in from_sql.inputs]
        outputs += [DatasetRef(d.namespace, d.name, dict(d.facets or {})) for d in from_sql.outputs]
        lineage.job_facets.update(from_sql.job_facets or {})
    lineage.incomplete = list(dict.fromkeys(lineage.incomplete))
    lineage.inputs = as_datasets(inputs, InputDataset)
    lineage.outputs = as_datasets(outputs, OutputDataset)
    return lineage
