"""Design-time lineage publication: 500 generated DAGs x 20 tasks, one full pass and a no-change pass.

The DAGs are written to a temporary DAGs folder and serialized into a fresh SQLite metadata database with
``airflow dags reserialize``. Each DAG mixes the declarations publication reads: 8 ``@task.lineage`` tasks
(one input, one output through an Airflow connection, every other output templated), 4 ``LineageMixin``
operators, 4 ``@task`` with inlets/outlets Assets and 4 SQL operators with static SQL; the DAG is scheduled on
an Asset and names an Egeria supply chain. Then, each in a fresh process (imports done before the clock
starts):

* a **full pass**: every DAG deserialized and published into an empty SQLite outbox;
* a **no-change pass**: the same outbox, nothing changed since;
* a **one-DAG-changed pass**: one DAG's recorded version made stale, so it alone is published again.

Time is the pass itself (``publish_dags``); memory is the peak RSS the pass adds to the process (its
``ru_maxrss`` after the pass minus its RSS before). The CLI's wall time for a no-change pass (process start,
imports and all) is reported beside it. Medians of ``--repeats`` runs.

Run: ``.venv/bin/python bench/publish_dags.py [--dags 500] [--tasks 20] [--repeats 3]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

BIN = Path(sys.executable).parent

DAG_TEMPLATE = """
import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import Asset, BaseOperator, dag, task

from airflow_lineage_provider import LineageMixin


class Partition(LineageMixin, BaseOperator):
    def execute(self, context):
        return None


@dag(dag_id="bench_{n:04d}", schedule=[Asset("s3://landing/bench_{n:04d}.parquet")],
     start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False, doc_md="Generated DAG {n}.",
     tags=["bench"], params={{"information_supply_chain": "InformationSupplyChain::bench-{group}"}})
def build():
    previous = None
    for i in range({per_kind}):
        @task.lineage(inputs=[f"warehouse/raw_{n}_{{i}}"],
                      outputs=[f"warehouse/stage_{n}_{{i}}" + ("_{{{{ ds_nodash }}}}" if i % 2 else "")],
                      connector="bench_warehouse")
        def stage() -> None: ...
        staged = stage.override(task_id=f"stage_{{i}}")()
        partition = Partition(task_id=f"partition_{{i}}", lineage_inputs=[f"warehouse/stage_{n}_{{i}}"],
                              lineage_outputs=[f"warehouse/part_{n}_{{i}}_{{{{ ds_nodash }}}}"],
                              lineage_connector="bench_warehouse")

        @task(inlets=[Asset(f"s3://lake/in_{n}_{{i}}.csv")], outlets=[Asset(f"s3://lake/out_{n}_{{i}}.csv")])
        def copy() -> None: ...
        copied = copy.override(task_id=f"copy_{{i}}")()
        query = f"INSERT INTO total_{n}_{{i}} SELECT id, SUM(v) FROM raw_{n}_{{i}} GROUP BY id"
        sql = SQLExecuteQueryOperator(task_id=f"sql_{{i}}", conn_id="bench_warehouse", sql=query)
        for current in (staged, partition, copied, sql):
            if previous is not None:
                previous >> current
            previous = current


build()
"""

PASS_SCRIPT = """
import json, os, resource, sys, time
import airflow  # a task or the CLI has Airflow imported before it publishes
from airflow_lineage_provider.design.publisher import publish_dags
from airflow_lineage_provider.design import job_events, publications, serialized_dags, task_lineage  # noqa: F401

def rss_kb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024

if sys.argv[2] == "stale-one":
    import sqlalchemy as sa
    engine = sa.create_engine(sys.argv[1])
    with engine.begin() as conn:
        conn.exec_driver_sql("UPDATE lineage_design_publications SET dag_hash = 'stale' WHERE dag_id = 'bench_0007'")
    engine.dispose()
before = rss_kb()
started = time.perf_counter()
report = publish_dags(outbox_url=sys.argv[1])
seconds = time.perf_counter() - started
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"seconds": seconds, "added_mb": max(peak - before, 0) / 1024, "peak_mb": peak / 1024,
                  "summary": report.summary(), "events": report.events, "published": report.published}))
"""


def _env(home: Path, dags: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "OPENLINEAGE"))}
    env.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING",
            "AIRFLOW_CONN_BENCH_WAREHOUSE": f"sqlite:///{home / 'warehouse.db'}",
        }
    )
    return env


def _run(command: list[str], env: dict[str, str], timeout: int = 3600) -> str:
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        raise SystemExit(f"{command[:3]} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return result.stdout


def _pass(env: dict[str, str], outbox: str, mode: str) -> dict[str, float]:
    output = _run([str(BIN / "python"), "-c", PASS_SCRIPT, outbox, mode], env)
    return json.loads(output.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dags", type=int, default=500)
    parser.add_argument("--tasks", type=int, default=20, help="tasks per DAG (a multiple of 4)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="alp-bench-publish-"))
    home, dags = root / "home", root / "dags"
    home.mkdir()
    dags.mkdir()
    for n in range(args.dags):
        source = DAG_TEMPLATE.format(n=n, group=n % 10, per_kind=args.tasks // 4)
        (dags / f"bench_{n:04d}.py").write_text(textwrap.dedent(source))
    env = _env(home, dags)
    started = time.perf_counter()
    _run([str(BIN / "airflow"), "db", "migrate"], env)
    migrated = time.perf_counter()
    _run([str(BIN / "airflow"), "dags", "reserialize"], env)
    print(
        f"{args.dags} DAGs x {args.tasks} tasks in {root}: db migrate {migrated - started:.1f} s, "
        f"dags reserialize {time.perf_counter() - migrated:.1f} s"
    )

    full, unchanged, one_changed, cli = [], [], [], []
    for repeat in range(args.repeats):
        outbox = f"sqlite:///{root / f'outbox_{repeat}.db'}"
        full.append(_pass(env, outbox, "full"))
        unchanged.append(_pass(env, outbox, "no-change"))
        one_changed.append(_pass(env, outbox, "stale-one"))
        cli_started = time.perf_counter()
        _run([str(BIN / "airflow-lineage"), "publish-dags", "--outbox", outbox], env)
        cli.append(time.perf_counter() - cli_started)
    print(full[0]["summary"])
    print(unchanged[0]["summary"])
    print(one_changed[0]["summary"])

    def row(name: str, runs: list[dict[str, float]]) -> str:
        seconds = statistics.median(r["seconds"] for r in runs)
        added = statistics.median(r["added_mb"] for r in runs)
        peak = statistics.median(r["peak_mb"] for r in runs)
        return f"| {name} | {seconds:.2f} | {added:.0f} | {peak:.0f} | {runs[0]['events']} |"

    print(f"\n{args.dags} DAGs x {args.tasks} tasks, median of {args.repeats}:\n")
    print("| pass | seconds | peak RSS added (MB) | process peak RSS (MB) | JobEvents |")
    print("|---|---:|---:|---:|---:|")
    print(row("full (every DAG)", full))
    print(row("no change", unchanged))
    print(row("one DAG changed", one_changed))
    print(
        f"\nCLI `airflow-lineage publish-dags`, no change, wall time with process start: {statistics.median(cli):.2f} s"
    )


if __name__ == "__main__":
    main()
