"""Merging an operator's own ``OperatorLineage`` with the declared one: keep both, never drop."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage
    from openlineage.client.event_v2 import Dataset

_Dataset = TypeVar("_Dataset", bound="Dataset")


def _merge_datasets(own: list[_Dataset], declared: list[_Dataset]) -> list[_Dataset]:
    """Own datasets first; a declared dataset with the same identity adds the facets the own one lacks."""
    merged = list(own)
    index = {(d.namespace, d.name): d for d in merged}
    for dataset in declared:
        existing = index.get((dataset.namespace, dataset.name))
        if existing is None:
            merged.append(dataset)
            index[(dataset.namespace, dataset.name)] = dataset
        else:
            existing.facets = {**(dataset.facets or {}), **(existing.facets or {})}
    return merged


def merge_lineage(own: OperatorLineage | None, declared: OperatorLineage | None) -> OperatorLineage:
    """One ``OperatorLineage`` with the datasets and facets of both (the operator's own win on conflict)."""
    from airflow.providers.openlineage.extractors import OperatorLineage

    if own is None:
        return declared if declared is not None else OperatorLineage()
    if declared is None:
        return own
    return OperatorLineage(
        inputs=_merge_datasets(list(own.inputs or []), list(declared.inputs or [])),
        outputs=_merge_datasets(list(own.outputs or []), list(declared.outputs or [])),
        run_facets={**(declared.run_facets or {}), **(own.run_facets or {})},
        job_facets={**(declared.job_facets or {}), **(own.job_facets or {})},
    )
