"""The lineage a task declares: its inlets and outlets, the assets it emitted at run time, and its SQL.

Shared by :func:`~airflow_lineage_provider.extractors.run_facets` (which needs a task's outputs for the
materialization facet) and the :class:`~airflow_lineage_provider.extractors.DeclaredLineageExtractor`.
Inlets and outlets are translated by the stock provider's own converter (``Asset``, openlineage
``Dataset``, and the legacy ``Table``/``File`` entities), so names match the ones the stock listener uses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_lineage_provider.extractors.sql import sql_lineage
from airflow_lineage_provider.reporting import warn_once

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage
    from airflow.sdk.types import RuntimeTaskInstanceProtocol
    from openlineage.client.event_v2 import Dataset
    from openlineage.client.facet_v2 import JobFacet, RunFacet


def _convert(entity: object) -> Dataset | None:
    from airflow.providers.openlineage.extractors.manager import ExtractorManager

    try:
        return ExtractorManager.convert_to_ol_dataset(entity)
    except Exception as error:
        warn_once(f"Lineage: could not translate {entity!r} to an OpenLineage dataset: {error}")
        return None


def _runtime_outlets(task_instance: RuntimeTaskInstanceProtocol | None) -> list[Dataset]:
    if task_instance is None:
        return []
    from airflow.providers.common.compat.openlineage.utils.utils import translate_airflow_asset
    from airflow.providers.openlineage.utils.utils import get_runtime_outlet_assets

    return [
        d for asset, _alias in get_runtime_outlet_assets(task_instance) if (d := translate_airflow_asset(asset, None))
    ]


def _unique(datasets: list[Dataset | None]) -> list[Dataset]:
    seen: set[tuple[str, str]] = set()
    unique = []
    for dataset in datasets:
        if dataset is not None and (dataset.namespace, dataset.name) not in seen:
            seen.add((dataset.namespace, dataset.name))
            unique.append(dataset)
    return unique


def declared_lineage(
    task: object, task_instance: RuntimeTaskInstanceProtocol | None = None, *, use_connection: bool = False
) -> OperatorLineage:
    """An ``OperatorLineage`` with the task's declared inputs and outputs and its SQL's job facet.

    ``task_instance`` (when given) adds the assets the task attached to outlet events while running.
    ``use_connection`` lets the SQL parser query the database for table schemas.
    """
    from airflow.providers.openlineage.extractors import OperatorLineage

    inputs = [_convert(entity) for entity in getattr(task, "inlets", None) or []]
    outputs = [_convert(entity) for entity in getattr(task, "outlets", None) or []]
    try:
        outputs += _runtime_outlets(task_instance)
    except Exception as error:
        warn_once(f"Lineage: could not read the run-time outlets of task {getattr(task, 'task_id', '?')!r}: {error}")
    job_facets: dict[str, JobFacet] = {}
    run_facets: dict[str, RunFacet] = {}
    try:
        from_sql = sql_lineage(task, use_connection=use_connection)
    except Exception as error:
        warn_once(f"Lineage: could not read the SQL lineage of task {getattr(task, 'task_id', '?')!r}: {error}")
        from_sql = None
    if from_sql is not None:
        inputs += from_sql.inputs
        outputs += from_sql.outputs
        job_facets.update(from_sql.job_facets or {})
        run_facets.update(from_sql.run_facets or {})
    return OperatorLineage(
        inputs=_unique(inputs), outputs=_unique(outputs), run_facets=run_facets, job_facets=job_facets
    )
