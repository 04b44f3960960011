"""``openlineage_export``: ships the lineage outbox to the ``[lineage_provider] export_conn_id`` consumer,
exports it to ``[lineage_provider] export_path`` when set, and prunes what every destination has. With
``[lineage_provider] publish_dags`` (on by default) it first publishes the declared lineage of the DAGs changed
since the last run, as OpenLineage JobEvents (docs/design-time-lineage.md).

Every 5 minutes by default (``[lineage_provider] export_schedule``); see docs/outbox.md.
"""

from airflow_lineage_provider import conf
from airflow_lineage_provider.outbox.dag_factory import build_export_dag

dag = build_export_dag("openlineage_export", publish_dags=conf.publish_dags())
