"""Run facets this package adds to task events: Egeria's supply chain and governance action, and its own
materialization facet.

* :func:`egeria_facets` - the Egeria facets a task's ``information_supply_chain`` /
  ``egeria_governance_action`` params (or the ``[lineage_provider]`` defaults) ask for;
* :func:`materialization_facet` - the ``airflowLineageProvider_materialization`` facet (with
  :func:`run_dates` for the DAG run's data interval and logical date);
* :func:`record_rows_written` - for task code to report how many rows it wrote.

They reach every task's events through :func:`airflow_lineage_provider.extractors.run_facets` (the stock
listener's ``custom_run_facets``; ``task_run_facets`` there for code building a task's events itself).
Example ``airflow.cfg``::

    [openlineage]
    custom_run_facets = airflow_lineage_provider.extractors.run_facets

    [lineage_provider]
    information_supply_chain = InformationSupplyChain::sales-orders

``airflow_lineage_provider.facets.run_facets`` and ``.task_run_facets`` are aliases of the extractor's (with a
warning logged once), so an ``airflow.cfg`` naming them keeps its facets instead of the listener dropping them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_lineage_provider.facets.egeria import (
    GOVERNANCE_ACTION_KEY,
    INFORMATION_SUPPLY_CHAIN_KEY,
    EgeriaGovernanceActionRunFacet,
    EgeriaInformationSupplyChainRunFacet,
)
from airflow_lineage_provider.facets.egeria_params import (
    GOVERNANCE_ACTION_PARAM,
    SUPPLY_CHAIN_PARAM,
    egeria_facets,
    resolve_egeria_settings,
)
from airflow_lineage_provider.facets.materialization import (
    MATERIALIZATION_KEY,
    MaterializationRunFacet,
    MaterializedDataset,
    materialization_facet,
    schema_document,
)
from airflow_lineage_provider.producer.rows_written import record_rows_written
from airflow_lineage_provider.task_context import run_dates

__all__ = [
    "GOVERNANCE_ACTION_KEY",
    "GOVERNANCE_ACTION_PARAM",
    "INFORMATION_SUPPLY_CHAIN_KEY",
    "MATERIALIZATION_KEY",
    "SUPPLY_CHAIN_PARAM",
    "EgeriaGovernanceActionRunFacet",
    "EgeriaInformationSupplyChainRunFacet",
    "MaterializationRunFacet",
    "MaterializedDataset",
    "egeria_facets",
    "materialization_facet",
    "record_rows_written",
    "resolve_egeria_settings",
    "run_dates",
    "schema_document",
]

#: Names this package exported here before they moved to :mod:`airflow_lineage_provider.extractors`.
_MOVED_TO_EXTRACTORS = frozenset({"run_facets", "task_run_facets"})


if not TYPE_CHECKING:  # for type checkers the old names do not exist: code should import the new ones

    def __getattr__(name: str) -> Any:
        """``run_facets`` / ``task_run_facets`` from their former place (``[openlineage] custom_run_facets =
        airflow_lineage_provider.facets.run_facets`` in an existing ``airflow.cfg``), with a warning logged once."""
        if name not in _MOVED_TO_EXTRACTORS:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        from airflow_lineage_provider import extractors
        from airflow_lineage_provider.reporting import warn_once

        warn_once(
            f"airflow_lineage_provider.facets.{name} has moved to airflow_lineage_provider.extractors.{name}: "
            "update [openlineage] custom_run_facets (or your import); the old name will be removed in a later "
            "release"
        )
        return getattr(extractors, name)
