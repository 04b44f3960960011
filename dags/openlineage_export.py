"""``openlineage_export``: ships the lineage outbox to the ``[lineage_provider] export_conn_id`` consumer,
exports it to ``[lineage_provider] export_path`` when set, and prunes what every destination has.

Every 5 minutes by default (``[lineage_provider] export_schedule``); see docs/outbox.md.
"""

from airflow_lineage_provider.outbox.dag_factory import build_export_dag

dag = build_export_dag("openlineage_export")
