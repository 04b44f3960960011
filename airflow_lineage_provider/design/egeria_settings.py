"""The Egeria settings of a DAG or task read from Airflow's serialized form (no DAG file imported).

:func:`~airflow_lineage_provider.facets.egeria_params.resolve_egeria_settings` reads an operator's ``params``; a
serialized DAG holds them as ``SerializedParam`` objects, so they are handed over as plain values, with the
same precedence: the run's params (when there is a run), the task's params (which Airflow merges with the
DAG's), the DAG's, then the ``[lineage_provider]`` defaults.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from openlineage.client.facet_v2 import JobFacet, RunFacet

from airflow_lineage_provider.facets.design_time import SUPPLY_CHAIN_JOB_KEY, supply_chain_job_facet
from airflow_lineage_provider.reporting import warn_once


@dataclass(frozen=True)
class ParamsView:
    """A DAG or task in the shape the Egeria settings resolver reads: plain ``params``, ``dag``, ids."""

    params: dict[str, Any]
    dag: Any
    dag_id: str
    task_id: str


def plain_params(params: Any) -> dict[str, Any]:
    """The values set in a (serialized or SDK) params dict, ``None`` included; params without a value are left out."""
    from airflow_lineage_provider.airflow_compat import param_is_set

    plain: dict[str, Any] = {}
    getter = getattr(params, "get_param", None)
    for key in list(params or {}):
        if not callable(getter):
            plain[key] = params[key]
        elif param_is_set(param := getter(key)):
            plain[key] = param.value
    return plain


def params_view(dag: Any, task: Any | None = None) -> ParamsView:
    """``task`` of ``dag`` (or the DAG itself, ``task=None``) as the Egeria settings resolver reads it."""
    dag_view = ParamsView(plain_params(dag.params), None, dag.dag_id, "(the DAG itself)")
    if task is None:
        return dag_view
    return ParamsView(plain_params(getattr(task, "params", None)), dag_view, dag.dag_id, task.task_id)


def supply_chain_job_facets(dag: Any, task: Any | None = None) -> dict[str, JobFacet]:
    """``{"airflowLineageProvider_informationSupplyChain": ...}`` for a serialized DAG or task, or ``{}``."""
    from airflow_lineage_provider.facets.egeria_params import resolve_egeria_settings

    try:
        settings = resolve_egeria_settings(params_view(dag, task))
    except Exception as error:
        where = f"task {task.task_id!r} of DAG {dag.dag_id!r}" if task is not None else f"DAG {dag.dag_id!r}"
        warn_once(f"Lineage: the Egeria settings of {where} could not be read: {error}")
        return {}
    facet = supply_chain_job_facet(settings.information_supply_chain, settings.governance_action)
    return {SUPPLY_CHAIN_JOB_KEY: facet} if facet is not None else {}


def dag_run_egeria_facets(dag: Any, run_conf: Mapping[str, Any] | None = None) -> dict[str, RunFacet]:
    """Egeria's run facets for a run of ``dag``: its params, overridden by the run's ``conf`` as Airflow does
    when ``[core] dag_run_conf_overrides_params`` is on."""
    from airflow.configuration import conf

    from airflow_lineage_provider.facets.egeria_params import egeria_facets

    params = plain_params(dag.params)
    if run_conf and conf.getboolean("core", "dag_run_conf_overrides_params", fallback=True):
        params.update(run_conf)
    return egeria_facets(params_view(dag), params)
