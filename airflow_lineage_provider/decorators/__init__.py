"""TaskFlow decorators: ``@task.lineage``."""

from airflow_lineage_provider.decorators.lineage import lineage_task

__all__ = ["lineage_task"]
