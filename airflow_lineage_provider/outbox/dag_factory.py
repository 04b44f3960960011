"""The export DAG: ship the outbox to a consumer, export it to files, prune it — on a schedule.

``build_export_dag()`` makes the ``openlineage_export`` DAG from ``[lineage_provider]`` settings; call it
with other arguments for DAGs of your own (another consumer, another folder, another schedule)::

    from airflow_lineage_provider.outbox.dag_factory import build_export_dag

    marquez = build_export_dag("ship_to_marquez", conn_id="marquez", export_path="", schedule="*/2 * * * *")

With ``publish_dags=True`` (the ``openlineage_export`` DAG in ``dags/`` follows ``[lineage_provider]
publish_dags``), a first task publishes the declared lineage of every DAG whose serialized version changed
since its last publication into the outbox, so it ships in the same run (docs/design-time-lineage.md).

Runs never overlap and never catch up. A run ships everything pending within its time budget and fails
(so Airflow retries and alerts) only when the consumer stayed unreachable or refused the API key. Its
own tasks emit no lineage unless ``emit_lineage`` (``[lineage_provider] export_dag_lineage``) is on, so
shipping lineage does not feed new events into the outbox.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta, timezone
from typing import Any

from airflow_lineage_provider import conf

log = logging.getLogger(__name__)


def _writer(outbox_url: str | None) -> Any:
    from airflow_lineage_provider.outbox.writer import OutboxWriter

    return OutboxWriter(outbox_url or conf.outbox_url(), spill_dir=conf.outbox_spill_dir() or None)


def ship_pending(outbox_url: str | None, conn_id: str, time_budget: float, batch_size: int) -> dict[str, Any]:
    """Task body: ship to the ``openlineage`` connection ``conn_id``; raise when the consumer stayed away."""
    from airflow.sdk import BaseHook

    from airflow_lineage_provider.airflow_compat import AirflowSkipException
    from airflow_lineage_provider.hooks.openlineage import consumer_config_from_connection
    from airflow_lineage_provider.outbox.shipper import DeliveryPolicy, Shipper, default_destination_name

    try:
        connection = BaseHook.get_connection(conn_id)
    except Exception as error:
        raise AirflowSkipException(
            f"connection {conn_id!r} is not defined ({error}); nothing shipped. Create it (type openlineage) or "
            "set [lineage_provider] export_conn_id to an existing one (empty: do not ship)"
        ) from None
    consumer = consumer_config_from_connection(connection)
    lease = max(300.0, consumer.timeout * 40)
    shipper = Shipper(
        _writer(outbox_url),
        default_destination_name(consumer.url, consumer.endpoint),
        consumer,
        DeliveryPolicy(batch_size=batch_size, lease_seconds=lease),
    )
    report = shipper.ship(budget=time_budget, wait_for_backoff=True)
    log.info(
        "Shipped to %s: %d delivered, %d dead-lettered, %d retried, %d still pending (%d requests)",
        shipper.name, report.delivered, report.dead, report.retried, report.pending, report.requests,
    )  # fmt: skip
    for dead in report.dead_letters[:20]:
        log.warning("Dead-lettered (see `airflow-lineage status`, replay with `airflow-lineage replay`): %s", dead)
    if report.refused:
        raise RuntimeError(f"the consumer refused the events: {report.refused}")
    if report.failed:
        raise RuntimeError(
            f"the consumer at {consumer.url} stayed unreachable ({report.last_error}); {report.pending} events stay "
            "pending in the outbox and are shipped by the next run"
        )
    return {"delivered": report.delivered, "dead": report.dead, "pending": report.pending}


def export_pending(outbox_url: str | None, export_path: str, compress: bool, time_budget: float) -> dict[str, Any]:
    """Task body: export every pending event to NDJSON files under ``export_path``."""
    from airflow_lineage_provider.outbox.export import Exporter

    exporter = Exporter(_writer(outbox_url), export_path, compress=compress)
    report = exporter.export(budget=time_budget)
    log.info("Exported %d events in %d files to %s", report.exported, report.files, exporter.root)
    return {"exported": report.exported, "files": report.files, "pending": report.pending}


def publish_changed_dags(outbox_url: str | None) -> dict[str, Any]:
    """Task body: publish the declared lineage of the DAGs changed since their last publication (JobEvents).

    Skipped, with the reason, when the metadata database cannot be reached from the task (Airflow 3 tasks
    need ``[lineage_provider] publish_metadata_conn_id``).
    """
    from airflow_lineage_provider.airflow_compat import AirflowSkipException
    from airflow_lineage_provider.design.publisher import publish_dags
    from airflow_lineage_provider.design.serialized_dags import MetadataDatabaseError

    try:
        report = publish_dags(outbox_url=outbox_url)
    except MetadataDatabaseError as error:
        raise AirflowSkipException(f"design-time lineage not published: {error}") from None
    log.info("Design-time lineage: %s", report.summary())
    return {
        "published": report.published,
        "unchanged": report.unchanged,
        "retired": report.retired,
        "events": report.events,
    }


def prune_delivered(outbox_url: str | None, retention_days: float) -> int:
    """Task body: prune events every destination has, older than ``retention_days``."""
    from airflow_lineage_provider.outbox.retention import prune

    removed = prune(_writer(outbox_url).engine(), retention_days)
    log.info("Pruned %d events delivered to every destination over %s days ago", removed, retention_days)
    return removed


def _disable_lineage(dag: Any) -> None:
    """Keep the DAG's task and DAG-run events out of OpenLineage (the stock provider's authoring API)."""
    try:
        from airflow.providers.openlineage.api.emission_policy import extend_global_openlineage_emission_policy
    except ImportError:  # providers-openlineage before the emission policy API
        from airflow.providers.openlineage.utils.selective_enable import disable_lineage

        disable_lineage(dag)
        return
    extend_global_openlineage_emission_policy(dag, emit=False)


def build_export_dag(
    dag_id: str = "openlineage_export",
    *,
    schedule: Any = None,
    outbox_url: str | None = None,
    conn_id: str | None = None,
    export_path: str | None = None,
    export_compress: bool | None = None,
    retention_days: float | None = None,
    time_budget: float | None = None,
    batch_size: int | None = None,
    emit_lineage: bool | None = None,
    publish_dags: bool = False,
    **dag_kwargs: Any,
) -> Any:
    """A DAG shipping, exporting and pruning one outbox; ``None`` arguments come from ``[lineage_provider]``.

    ``conn_id=""`` leaves out shipping, ``export_path=""`` the file export. The outbox URL, when not
    given, is read when the tasks run (``[lineage_provider] outbox_url``). ``publish_dags`` adds a first task
    publishing design-time lineage into the outbox; shipping and export run whether it succeeds or not.
    """
    from airflow.sdk import DAG, task

    conn_id = conf.export_conn_id() if conn_id is None else conn_id
    export_path = conf.export_path() if export_path is None else export_path
    compress = conf.export_compress() if export_compress is None else export_compress
    keep_days = conf.retention_days() if retention_days is None else retention_days
    budget = conf.export_time_budget() if time_budget is None else time_budget
    batch = conf.export_batch_size() if batch_size is None else batch_size
    lineage = conf.export_dag_lineage() if emit_lineage is None else emit_lineage
    dag_kwargs.setdefault("start_date", datetime(2024, 1, 1, tzinfo=timezone.utc))
    dag_kwargs.setdefault("tags", ["openlineage", "lineage-outbox"])
    dag_kwargs.setdefault("dagrun_timeout", timedelta(seconds=max(600.0, budget * 3)))
    dag_kwargs.setdefault("doc_md", __doc__)

    with DAG(
        dag_id,
        schedule=conf.export_schedule() if schedule is None else schedule,
        catchup=False,
        max_active_runs=1,
        **dag_kwargs,
    ) as dag:
        steps = []
        # After a publication task, shipping and export run whatever became of it.
        after_publish: dict[str, Any] = {"trigger_rule": "all_done"} if publish_dags else {}
        if conn_id:
            ship = task(task_id="ship", retries=2, retry_delay=timedelta(minutes=1), **after_publish)(ship_pending)
            steps.append(ship(outbox_url, conn_id, budget, batch))
        if export_path:
            export = task(task_id="export_files", retries=2, retry_delay=timedelta(minutes=1), **after_publish)(
                export_pending
            )
            steps.append(export(outbox_url, export_path, compress, budget))
        prune = task(task_id="prune", trigger_rule="all_done")(prune_delivered)
        pruned = prune(outbox_url, keep_days)
        for step in steps:
            step >> pruned
        if publish_dags:
            publish = task(task_id="publish_dags", retries=1, retry_delay=timedelta(minutes=1))(publish_changed_dags)
            published = publish(outbox_url)
            for step in steps or [pruned]:
                published >> step
    if not lineage:
        _disable_lineage(dag)
    return dag
