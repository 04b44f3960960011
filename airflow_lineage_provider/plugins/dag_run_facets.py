"""Egeria's facets on DAG runs when the transport does not add them: one more event beside the stock listener's.

The stock OpenLineage provider (2.x) applies ``[openlineage] custom_run_facets`` to task events only: its
DAG-run events (``dag_started``/``dag_success``/``dag_failed``) take their run facets from fixed functions
(``get_airflow_dag_run_facet``, the parent facet) and offer no hook to add one. Wrapping the transport in
:class:`~airflow_lineage_provider.design.dag_run_transformer.EgeriaDagRunTransport` (openlineage-python's
``transform`` transport with ``EgeriaDagRunTransformer``) puts the facets on those events themselves (``START``,
``COMPLETE``, ``FAIL``); when ``[openlineage]`` configures that, this listener sends nothing.

Otherwise this Airflow listener, registered by :class:`LineageDagRunFacetsPlugin`, sends one more event per DAG
run, so that deployments whose transport is not wrapped still see the facets on the run: a ``RUNNING`` event of
the same job (``<dag_id>`` in ``[openlineage] namespace``) and the same run id the stock listener gives the DAG
run, carrying ``egeria_informationSupplyChain`` / ``egeria_governanceAction`` as the DAG's params (overridden
by the run's ``conf``) or the ``[lineage_provider]`` defaults ask. ``RUNNING`` is the spec's event for
"additional information about a run"; consumers that gather a run's facets from all its events (Marquez, this
package's consumer) then see them on the DAG run; one that reads only a run's terminal event needs the
transformer.

It is sent when the scheduler starts the run, or — for runs that never pass through that notification, such
as ``airflow dags test`` — when the run ends; either way its ``eventTime`` is just after the run's start, so
a consumer ordering by event time never takes it for a state after the run's end.

Sent only when the DAG has Egeria settings, OpenLineage is active, the transformer is not configured and the
stock provider's emission policy lets the DAG's runs be emitted; never when ``[lineage_provider]
dag_run_egeria_facets`` is off. The listener runs in the scheduler: the event is handed to the stock listener's
process pool, as its own DAG-run events are, so a slow transport never holds the scheduler up; every failure is
logged and swallowed.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from datetime import datetime, timedelta, timezone
from typing import Any

from airflow.listeners import hookimpl
from airflow.plugins_manager import AirflowPlugin

from airflow_lineage_provider.reporting import warn_once

# DAG runs whose event this process sent, so that the end of a run it saw start sends nothing more.
_sent: OrderedDict[tuple[str, str], None] = OrderedDict()
_sent_lock = threading.Lock()
_SENT_MAX = 10_000


def _first_time(dag_run: Any) -> bool:
    key = (str(dag_run.dag_id), str(dag_run.run_id))
    with _sent_lock:
        if key in _sent:
            return False
        _sent[key] = None
        while len(_sent) > _SENT_MAX:
            _sent.popitem(last=False)
    return True


def _submit(event: Any) -> None:
    """Send ``event`` the way the stock listener sends its DAG-run events: in its process pool.

    Not on a thread of our own: the listener forks that pool from this process, and a fork while another
    thread holds a lock (the logging handlers', the transport's) leaves the child waiting on it forever.
    """
    from airflow.providers.openlineage.plugins.listener import get_openlineage_listener

    get_openlineage_listener().submit_callable(_send, event)


def _send(event: Any) -> None:
    """Runs in the stock listener's pool process (module-level, so it can be pickled there)."""
    from airflow_lineage_provider.producer import client

    client.send(event)


def _emits(dag_run: Any) -> bool:
    from airflow.providers.openlineage.api import is_openlineage_active

    if not is_openlineage_active():
        return False
    try:
        from airflow.providers.openlineage.utils.emission_policy import resolve_dag_emission_policy
    except ImportError:  # an older provider without emission policies
        return True
    return bool(resolve_dag_emission_policy(dag_run.dag_id, dag=dag_run.dag).emit)


@functools.cache
def transformer_wired() -> bool:
    """``[openlineage]`` passes events through the Egeria transformer, which puts the facets on the stock
    listener's DAG-run events (read once per process: a scheduler reads its configuration when it starts).
    ``False`` when the configuration cannot be read: then the extra event still carries the facets."""
    try:
        from airflow.providers.openlineage.plugins.adapter import OpenLineageAdapter

        from airflow_lineage_provider.design.dag_run_transformer import transformer_configured

        return transformer_configured(OpenLineageAdapter().get_openlineage_config())
    except Exception as error:
        warn_once(f"Lineage: could not read the OpenLineage configuration to look for the Egeria transformer: {error}")
        return False


def dag_run_event(dag_run: Any) -> Any | None:
    """The ``RUNNING`` event carrying the Egeria facets of ``dag_run``, or ``None`` when it asks for none."""
    from airflow.providers.openlineage.plugins.adapter import OpenLineageAdapter
    from openlineage.client.event_v2 import RunState
    from openlineage.client.facet_v2 import job_type_job

    from airflow_lineage_provider import conf
    from airflow_lineage_provider.design.egeria_settings import dag_run_egeria_facets
    from airflow_lineage_provider.producer.emit import build_run_event, job_namespace

    facets = dag_run_egeria_facets(dag_run.dag, getattr(dag_run, "conf", None))
    if not facets:
        return None
    # The stock listener's DAG-run id: the logical date, or when a run has none, its run_after.
    logical_date = dag_run.logical_date or dag_run.run_after
    run_id = OpenLineageAdapter.build_dag_run_id(
        dag_id=dag_run.dag_id, logical_date=logical_date, clear_number=dag_run.clear_number
    )
    producer = conf.producer()
    job_type = job_type_job.JobTypeJobFacet(
        processingType="BATCH", integration="AIRFLOW", jobType="DAG", producer=producer
    )
    started = getattr(dag_run, "start_date", None)
    # Just after the stock listener's START (whose eventTime is the run's start): never after its end.
    event_time = started + timedelta(milliseconds=1) if started is not None else datetime.now(timezone.utc)
    return build_run_event(
        RunState.RUNNING,
        job_namespace=job_namespace(),
        job_name=dag_run.dag_id,
        run_id=run_id,
        inputs=[],
        outputs=[],
        job_facets={"jobType": job_type},  # a DAG's job, not the task job build_run_event would say
        run_facets=facets,
        event_time=event_time,
        producer=producer,
    )


class DagRunEgeriaListener:
    """Airflow listener: the Egeria facets of a DAG run, sent once per run unless the transport's transformer
    adds them (see the module docstring)."""

    @staticmethod
    def _send_for(dag_run: Any) -> None:
        try:
            from airflow_lineage_provider import conf

            if not conf.dag_run_egeria_facets() or getattr(dag_run, "dag", None) is None or not _emits(dag_run):
                return
            if transformer_wired():  # the stock listener's own events of the run carry the facets
                return
            event = dag_run_event(dag_run)
            if event is not None and _first_time(dag_run):
                _submit(event)
        except Exception as error:
            run_id = getattr(dag_run, "run_id", "?")
            warn_once(f"Lineage: the Egeria facets of DAG run {run_id!r} were not sent: {error}")

    @hookimpl
    def on_dag_run_running(self, dag_run: Any, msg: str) -> None:
        """The run started: send its Egeria facets. Never raises."""
        self._send_for(dag_run)

    @hookimpl
    def on_dag_run_success(self, dag_run: Any, msg: str) -> None:
        """The run succeeded: send its Egeria facets unless they went out when it started. Never raises."""
        self._send_for(dag_run)

    @hookimpl
    def on_dag_run_failed(self, dag_run: Any, msg: str) -> None:
        """The run failed: send its Egeria facets unless they went out when it started. Never raises."""
        self._send_for(dag_run)


class LineageDagRunFacetsPlugin(AirflowPlugin):
    """Registers :class:`DagRunEgeriaListener` (Egeria facets on DAG runs)."""

    name = "lineage_dag_run_facets"
    listeners = [DagRunEgeriaListener()]
