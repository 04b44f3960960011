"""What naming each job's containing job costs a graph answer: the depth-10 walk before and after it.

Graph answers tell, for each job node whose latest run has a parent run, the job containing it
(``data.parentJob``) and the Airflow task instance a job is (``data.airflowTask``), read by one statement over
the answer's job nodes (``consumer/store/graph/job_parents.py``). This benchmark serves one store from checkout BEFORE
(without that statement) and checkout AFTER, side by side, and asks each in turn for the consumer
benchmark's depth-10 upstream walk (N = 5,000 jobs: 2,955 nodes, graph cards warm), on two stores loaded with:

* ``no parents``: the consumer benchmark's workload as it is (no run has a parent);
* ``parents``: the same runs, each with a ``parent`` facet naming an Airflow task's run (one task per five
  jobs, as ``lineage_run`` builds it), and those tasks' runs as the stock provider emits them (``airflow`` run
  facet, parent the DAG run): every job of the walk has a parent, and the answer names them all.

Each request interleaved with its alternative (``--repeat`` pairs, each first in every other pair); medians
and the median of the per-pair ratios (after / before). Every request is timed to the last byte.

    git worktree add --detach /tmp/parents-after HEAD
    git worktree add --detach /tmp/parents-before HEAD   # then delete the containment() loops in its
    # consumer/routers/graph/graph_walks.py and consumer/store/graph/listing.py: the same code without the statement
    .venv/bin/python bench/job_parents_walk.py --before /tmp/parents-before --after /tmp/parents-after
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from airflow.providers.openlineage.plugins.facets import AirflowRunFacet  # noqa: E402
from consumer_bench import Ours, serve_ours  # noqa: E402
from consumer_workload import PRODUCER, workload  # noqa: E402
from graph_cards import elapsed_ms, fresh_store, load_batches  # noqa: E402
from openlineage.client.event_v2 import Job, Run, RunEvent, RunState  # noqa: E402
from openlineage.client.facet_v2 import parent_run  # noqa: E402
from openlineage.client.serde import Serde  # noqa: E402

from airflow_lineage_provider.parent_run import RunLink  # noqa: E402

AIRFLOW, DAG_ID, JOBS_PER_TASK = "airflow", "bench_dag", 5


def _json(event: Any) -> dict[str, Any]:
    return json.loads(Serde.to_json(event))


def with_parents(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``events`` with each run inside an Airflow task's run (see the module), and the tasks' runs first."""
    dag = RunLink(namespace=AIRFLOW, name=DAG_ID, run_id=str(uuid.UUID(int=1)))
    tasks: dict[str, RunLink] = {}
    ordinals: dict[str, int] = {}
    inside: list[dict[str, Any]] = []
    for event in events:
        task_id = f"task_{ordinals.setdefault(event['job']['name'], len(ordinals)) // JOBS_PER_TASK}"
        if task_id not in tasks:
            tasks[task_id] = RunLink(AIRFLOW, f"{DAG_ID}.{task_id}", str(uuid.UUID(int=len(tasks) + 2)), dag)
        facet = json.loads(Serde.to_json(tasks[task_id].parent_facet(PRODUCER)))
        facets = {**event["run"].get("facets", {}), "parent": facet}
        inside.append({**event, "run": {**event["run"], "facets": facets}})
    stock = []
    for task_id, link in tasks.items():
        airflow = AirflowRunFacet(
            dag={"dag_id": DAG_ID},
            dagRun={"dag_id": DAG_ID, "run_id": "scheduled__2026-01-01T00:00:00+00:00"},
            task={"task_id": task_id},
            taskInstance={"try_number": 1, "map_index": None},
            taskUuid=link.run_id,
        )
        to_dag = parent_run.ParentRunFacet(
            run=parent_run.Run(runId=dag.run_id), job=parent_run.Job(namespace=AIRFLOW, name=DAG_ID), producer=PRODUCER
        )
        run = Run(runId=link.run_id, facets={"parent": to_dag, "airflow": airflow})
        stock.append(
            _json(
                RunEvent(
                    eventType=RunState.COMPLETE,
                    eventTime="2026-01-01T00:00:00+00:00",
                    run=run,
                    job=Job(namespace=AIRFLOW, name=link.name),
                    producer=PRODUCER,
                )
            )
        )
    return stock + inside


def compare(store: str, folder: Path, trees: dict[str, Path], repeat: int) -> dict[str, Any]:
    """Medians of the depth-10 walk from the BEFORE and AFTER servers, interleaved, and the median ratio."""
    with (
        serve_ours(store, folder / "before", tree=trees["before"]) as before,
        serve_ours(store, folder / "after", tree=trees["after"]) as after,
    ):
        body = json.loads(after.walk(10))["graph"]
        named = sum("parentJob" in node["data"] for node in body)
        assert before.count(before.walk(10)) == len(body), "both servers must walk the same nodes"
        for _ in range(3):
            before.walk(10), after.walk(10)
        times: dict[str, list[float]] = {"before": [], "after": []}
        order = [("before", before), ("after", after)]
        for _ in range(repeat):
            order.reverse()
            for name, server in order:

                def walk(s: Ours = server) -> bytes:
                    return s.walk(10)

                times[name].append(elapsed_ms(walk))
    ratios = [a / b for a, b in zip(times["after"], times["before"], strict=True)]
    return {
        "nodes": len(body),
        "named": named,
        "before_ms": statistics.median(times["before"]),
        "after_ms": statistics.median(times["after"]),
        "ratio": statistics.median(ratios),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", type=Path, required=True, help="checkout without job_parents")
    parser.add_argument("--after", type=Path, required=True, help="checkout with it")
    parser.add_argument("--stores", nargs="+", default=["sqlite", "postgres"], choices=["sqlite", "postgres"])
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=21, help="pairs of walks per case")
    args = parser.parse_args()
    trees = {"before": args.before, "after": args.after}
    plain = workload(args.jobs)
    cases = {"no parents": plain, "parents": with_parents(plain)}
    rows = []
    for kind in args.stores:
        for case, events in cases.items():
            with tempfile.TemporaryDirectory(prefix="alp-parents-") as tmp, fresh_store(kind, Path(tmp)) as store:
                folder = Path(tmp)
                with serve_ours(store, folder / "loader", tree=args.after) as loader:
                    load_batches(loader, events)
                if kind == "postgres":
                    from consumer_bench import analyze

                    analyze(store)
                measured = compare(store, folder, trees, args.repeat)
            rows.append((kind, case, measured))
            print(kind, case, measured, flush=True)
    print()
    print("| store | depth-10 walk | before | after | after / before |")
    print("|---|---|---:|---:|---:|")
    for kind, case, found in rows:
        print(
            f"| {kind} | {case} ({found['nodes']:,} nodes, {found['named']:,} with parentJob) "
            f"| {found['before_ms']:.1f} ms | {found['after_ms']:.1f} ms | {found['ratio']:.2f}x |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
