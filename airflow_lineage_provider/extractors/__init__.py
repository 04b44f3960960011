"""The stock OpenLineage listener's two ways in: an extractor for operators that have no lineage of their own,
and the ``custom_run_facets`` function adding this package's run facets to every other task's events.

Register them with the stock provider and name the operator classes the extractor handles::

    [openlineage]
    extractors = airflow_lineage_provider.extractors.DeclaredLineageExtractor
    custom_run_facets = airflow_lineage_provider.extractors.run_facets

    [lineage_provider]
    extractor_operators = CopyRowsOperator;ExportOperator

Modules: :mod:`.declared` (the extractor), :mod:`.task_facets` (``run_facets`` and ``task_run_facets``),
:mod:`.declared_lineage` (a task's inlets, outlets, run-time assets and SQL) and :mod:`.sql` (what an
operator's SQL reads and writes, and the rows it wrote).
"""

from __future__ import annotations

from airflow_lineage_provider.extractors.declared import DeclaredLineageExtractor
from airflow_lineage_provider.extractors.task_facets import OWN_FACETS_ATTRIBUTE, run_facets, task_run_facets

__all__ = ["OWN_FACETS_ATTRIBUTE", "DeclaredLineageExtractor", "run_facets", "task_run_facets"]
