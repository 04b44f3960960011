"""Events of an Airflow task containing two ``lineage_run`` jobs, as the stock provider and ``lineage_run`` emit
them: the task's run (``example_task_lineage.build_customer_totals``) points at its DAG run and carries the
stock ``airflow`` run facet; the two children (``….join`` and ``….aggregate``) are built by the producer's own
``build_run_event`` with the parent link ``lineage_run`` takes from the task (:class:`~airflow_lineage_provider.
parent_run.RunLink`). ``join`` reads ``orders`` and ``customers`` into ``customer_orders``; ``aggregate`` reads
that into ``customer_totals``. ``copy_totals`` runs inside ``lake_loader``'s run, a job of the ``lake`` namespace
(one a limited key may not see), and ``report.refresh`` names a parent run the store never received.
:func:`mapped_task_events`: two instances of a mapped task (``….load_partition``, map indexes 0 and 1, 1 the later)
and a ``lineage_run`` job inside instance 0.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

from airflow.providers.openlineage.plugins.facets import AirflowRunFacet
from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.facet_v2 import job_type_job, parent_run
from openlineage.client.serde import Serde

from airflow_lineage_provider.parent_run import RunLink
from airflow_lineage_provider.producer.emit import build_run_event
from support.consumer_helpers import PRODUCER
from support.olschema import STOCK_PROVIDER_FACETS, assert_valid_event, shared_available

AIRFLOW, WAREHOUSE, LAKE = "airflow", "warehouse", "lake"
DAG_ID, TASK_ID = "example_task_lineage", "build_customer_totals"
RUN_ID = "scheduled__2026-10-01T00:00:00+00:00"
TASK = f"{DAG_ID}.{TASK_ID}"
TASK_NODE = f"job:{AIRFLOW}:{TASK}"
JOIN, AGGREGATE = f"{TASK}.join", f"{TASK}.aggregate"
JOIN_NODE, AGGREGATE_NODE = f"job:{AIRFLOW}:{JOIN}", f"job:{AIRFLOW}:{AGGREGATE}"
LOADER, COPY = "lake_loader", "copy_totals"
COPY_NODE = f"job:{AIRFLOW}:{COPY}"
LOADER_RUN = str(uuid.UUID(int=4))
ORPHAN, ORPHAN_PARENT = "report.refresh", "report"
ORPHAN_NODE = f"job:{AIRFLOW}:{ORPHAN}"
DAG_RUN = str(uuid.UUID(int=1))
TASK_RUN = str(uuid.UUID(int=2))
START = datetime(2026, 10, 2, 3, 0, tzinfo=timezone.utc)
MAPPED_TASK_ID = "load_partition"
MAPPED_TASK = f"{DAG_ID}.{MAPPED_TASK_ID}"
MAPPED_TASK_NODE = f"job:{AIRFLOW}:{MAPPED_TASK}"
MAPPED_COPY = f"{MAPPED_TASK}.copy"
MAPPED_COPY_NODE = f"job:{AIRFLOW}:{MAPPED_COPY}"
#: Run ids of the mapped task's instances, by map index.
MAPPED_RUNS = (str(uuid.UUID(int=5)), str(uuid.UUID(int=6)))


def _checked(event: Any) -> dict[str, Any]:
    data = json.loads(Serde.to_json(event))
    if shared_available():
        assert_valid_event(data, ignore=STOCK_PROVIDER_FACETS)  # the stock ``airflow`` facet has no schema
    return data


def _when(minutes: int) -> str:
    return (START + timedelta(minutes=minutes)).isoformat()


def _task_run(
    state: RunState, minutes: int, task_id: str = TASK_ID, run_id: str = TASK_RUN, map_index: int | None = None
) -> RunEvent:
    """The stock provider's event of a task's run (``map_index``: a mapped task's instance, None for a task not
    mapped, as the stock facet says): parent and root the DAG run, the ``airflow`` facet."""
    dag_run = parent_run.ParentRunFacet(
        run=parent_run.Run(runId=DAG_RUN),
        job=parent_run.Job(namespace=AIRFLOW, name=DAG_ID),
        root=parent_run.Root(
            run=parent_run.RootRun(runId=DAG_RUN), job=parent_run.RootJob(namespace=AIRFLOW, name=DAG_ID)
        ),
        producer=PRODUCER,
    )
    airflow = AirflowRunFacet(
        dag={"dag_id": DAG_ID, "owner": "airflow"},
        dagRun={"dag_id": DAG_ID, "run_id": RUN_ID, "run_type": "scheduled"},
        task={"task_id": task_id, "operator_class": "PythonOperator"},
        taskInstance={"try_number": 1, "map_index": map_index},
        taskUuid=run_id,
    )
    job_type = job_type_job.JobTypeJobFacet(processingType="BATCH", integration="AIRFLOW", jobType="TASK")
    return RunEvent(
        eventType=state,
        eventTime=_when(minutes),
        run=Run(runId=run_id, facets={"parent": dag_run, "airflow": airflow}),
        job=Job(namespace=AIRFLOW, name=f"{DAG_ID}.{task_id}", facets={"jobType": job_type}),
        producer=PRODUCER,
    )


def _child(
    namespace: str, name: str, parent: RunLink, inputs: list[tuple[str, str]], outputs: list[tuple[str, str]], at: int
) -> list[dict[str, Any]]:
    """START and COMPLETE of a ``lineage_run`` job inside ``parent``, built as ``lineage_run`` builds them."""
    run_id = str(uuid.uuid4())
    return [
        _checked(
            build_run_event(
                state,
                job_namespace=namespace,
                job_name=name,
                run_id=run_id,
                inputs=[InputDataset(namespace=ns, name=dataset) for ns, dataset in inputs],
                outputs=[OutputDataset(namespace=ns, name=dataset) for ns, dataset in outputs],
                parent=parent,
                event_time=_when(at + offset),
                producer=PRODUCER,
            )
        )
        for offset, state in ((0, RunState.START), (1, RunState.COMPLETE))
    ]


def task_job_events() -> list[dict[str, Any]]:
    """The task's run, its two ``lineage_run`` jobs, one in the ``lake`` namespace, and a job whose parent run
    was never received (see the module)."""
    dag = RunLink(namespace=AIRFLOW, name=DAG_ID, run_id=DAG_RUN)
    task = RunLink(namespace=AIRFLOW, name=TASK, run_id=TASK_RUN, root=dag)
    orders, customers = (WAREHOUSE, "orders"), (WAREHOUSE, "customers")
    joined, totals = (WAREHOUSE, "customer_orders"), (WAREHOUSE, "customer_totals")
    lost = RunLink(namespace=AIRFLOW, name=ORPHAN_PARENT, run_id=str(uuid.UUID(int=3)))
    loader = RunLink(namespace=LAKE, name=LOADER, run_id=LOADER_RUN)
    loaded = RunEvent(
        eventType=RunState.COMPLETE,
        eventTime=_when(4),
        run=Run(runId=LOADER_RUN),
        job=Job(namespace=LAKE, name=LOADER),
        producer=PRODUCER,
        outputs=[OutputDataset(namespace=LAKE, name="raw_totals")],
    )
    return [
        _checked(_task_run(RunState.START, 0)),
        *_child(AIRFLOW, JOIN, task, [orders, customers], [joined], 1),
        *_child(AIRFLOW, AGGREGATE, task, [joined], [totals], 3),
        _checked(loaded),
        *_child(AIRFLOW, COPY, loader, [totals], [(WAREHOUSE, "totals_copy")], 5),
        *_child(AIRFLOW, ORPHAN, lost, [totals], [(WAREHOUSE, "report")], 7),
        _checked(_task_run(RunState.COMPLETE, 9)),
    ]


def mapped_task_events() -> list[dict[str, Any]]:
    """Instances 0 and 1 of the mapped task, 1 the later (the job's latest run), and ``….load_partition.copy``
    inside instance 0 (reads ``partitions``, writes ``partition_copy``): nothing shared with
    :func:`task_job_events`."""
    dag = RunLink(namespace=AIRFLOW, name=DAG_ID, run_id=DAG_RUN)
    first = RunLink(namespace=AIRFLOW, name=MAPPED_TASK, run_id=MAPPED_RUNS[0], root=dag)
    instances = [
        _checked(_task_run(state, at, MAPPED_TASK_ID, MAPPED_RUNS[index], index))
        for index, state, at in ((0, RunState.START, 10), (1, RunState.START, 11))
    ]
    done = [
        _checked(_task_run(RunState.COMPLETE, at, MAPPED_TASK_ID, MAPPED_RUNS[index], index))
        for index, at in ((0, 14), (1, 15))
    ]
    copy = _child(AIRFLOW, MAPPED_COPY, first, [(WAREHOUSE, "partitions")], [(WAREHOUSE, "partition_copy")], 12)
    return [*instances, *copy, *done]
