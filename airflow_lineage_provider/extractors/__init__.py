"""An OpenLineage extractor for operators that have no lineage of their own.

Register it with the stock provider and name the operator classes it handles::

    [openlineage]
    extractors = airflow_lineage_provider.extractors.DeclaredLineageExtractor

    [lineage_provider]
    extractor_operators = CopyRowsOperator;ExportOperator
"""

from __future__ import annotations

from airflow_lineage_provider.extractors.declared import DeclaredLineageExtractor

__all__ = ["DeclaredLineageExtractor"]
