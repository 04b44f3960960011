"""Operators: :class:`LineageMixin` for declared lineage on any operator."""

from airflow_lineage_provider.operators.mixin import LineageMixin

__all__ = ["LineageMixin"]
