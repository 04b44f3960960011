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
"""

from __future__ import annotations

from airflow_lineage_provider.facets.egeria import (
    GOVERNANCE_ACTION_KEY,
    INFORMATION_SUPPLY_CHAIN_KEY,
    EgeriaGovernanceActionRunFacet,
    EgeriaInformationSupplyChainRunFacet,
)
from airflow_lineage_provider.facets.materialization import (
    MATERIALIZATION_KEY,
    MaterializationRunFacet,
    MaterializedDataset,
    materialization_facet,
    record_rows_written,
    run_dates,
    schema_document,
)
from airflow_lineage_provider.facets.settings import (
    GOVERNANCE_ACTION_PARAM,
    SUPPLY_CHAIN_PARAM,
    egeria_facets,
    resolve_egeria_settings,
)

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
