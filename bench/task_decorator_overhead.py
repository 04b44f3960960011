"""Wall time of a DAG of 20 ``@task.lineage`` tasks against the same DAG with plain ``@task``.

Both DAGs run with ``airflow dags test`` (one process, SQLite metadata DB), the stock OpenLineage listener
on and writing to the file transport — so the plain ``@task`` DAG still emits its task events; the
difference is what the declared lineage (naming, templated names, schema lookup of a SQLite table through
an Airflow connection) adds. A third case turns the listener off, where ``@task.lineage`` tasks emit their
own events (``--listener-off``). Runs alternate between the DAGs (A/B/A/B: the machine is noisy); the median
of ``--repeats`` runs is reported, and the overhead per task: the difference of the medians over ``--tasks``.

Run: ``.venv/bin/python bench/task_decorator_overhead.py [--repeats 3] [--tasks 20] [--listener-off]``
"""

from __future__ import annotations

import argparse
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
import os
import time

import pendulum
from airflow.sdk import dag, task
from airflow.sdk.execution_time import supervisor

# Each task's own time: `airflow dags test` runs every task through supervisor.run_task_in_process, in
# this process (rendering, the listener's START and COMPLETE forks, execute, post_execute). Measured here,
# the per-task figures are free of the command's start-up and the scheduling between tasks.
_times = os.environ.get("BENCH_TASK_TIMES")
if _times and not getattr(supervisor, "_bench_timed", False):
    _run = supervisor.run_task_in_process

    def _timed(*args, **kwargs):
        started = time.perf_counter()
        try:
            return _run(*args, **kwargs)
        finally:
            with open(_times, "a") as out:
                out.write(f"{{time.perf_counter() - started}}\\n")

    supervisor.run_task_in_process = _timed
    supervisor._bench_timed = True

@dag(dag_id="{dag_id}", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False)
def build():
    previous = None
    for i in range({tasks}):
        @task{decorator}
        def step(n: int = 0) -> int:
            return n + 1
        current = step.override(task_id=f"step_{{i}}")()
        if previous is not None:
            previous >> current
        previous = current

build()
"""

LINEAGE_ARGS = (
    '.lineage(inputs=["warehouse/orders"], outputs=["warehouse/out_{{{{ ti.task_id }}}}_{{{{ ds_nodash }}}}"], '
    'connector="bench_warehouse")'
)


def _env(home: Path, dags: Path, events: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "OPENLINEAGE"))}
    env.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW_CONN_BENCH_WAREHOUSE": f"sqlite:///{home / 'warehouse.db'}",
        }
    )
    if events is not None:
        env.update(
            {
                "OPENLINEAGE__TRANSPORT__TYPE": "file",
                "OPENLINEAGE__TRANSPORT__LOG_FILE_PATH": str(events),
                "OPENLINEAGE__TRANSPORT__APPEND": "true",
            }
        )
    return env


def _run(home: Path, dags: Path, dag_id: str, day: int, events: Path | None) -> tuple[float, list[float]]:
    task_times = home / f"task-times-{day}.txt"
    start = time.perf_counter()
    result = subprocess.run(
        [str(BIN / "airflow"), "dags", "test", dag_id, f"2026-01-{day:02d}"],
        env={**_env(home, dags, events), "BENCH_TASK_TIMES": str(task_times)},
        capture_output=True,
        text=True,
        cwd=home,
    )
    elapsed = time.perf_counter() - start
    if result.returncode != 0 or "state=success" not in result.stdout + result.stderr:
        raise SystemExit(f"{dag_id} failed:\n{(result.stdout + result.stderr)[-3000:]}")
    per_task = [float(line) for line in task_times.read_text().split()] if task_times.exists() else []
    return elapsed, per_task


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument("--listener-off", action="store_true", help="also the two listener-off cases")
    args = parser.parse_args()

    home = Path(tempfile.mkdtemp(prefix="alp-bench-dag-"))
    dags = home / "dags"
    dags.mkdir()
    (dags / "plain.py").write_text(DAG_TEMPLATE.format(dag_id="bench_plain", tasks=args.tasks, decorator=""))
    (dags / "lineage.py").write_text(
        DAG_TEMPLATE.format(dag_id="bench_lineage", tasks=args.tasks, decorator=LINEAGE_ARGS)
    )
    import sqlite3

    with sqlite3.connect(home / "warehouse.db") as conn:
        conn.execute("CREATE TABLE orders (id INTEGER, amount NUMERIC(10, 2))")
    subprocess.run([str(BIN / "airflow"), "db", "migrate"], env=_env(home, dags, None), check=True, capture_output=True)

    cases = {
        "@task, listener on": ("bench_plain", True),
        "@task.lineage, listener on": ("bench_lineage", True),
    }
    if args.listener_off:
        cases["@task, listener off"] = ("bench_plain", False)
        cases["@task.lineage, listener off (self-emitting)"] = ("bench_lineage", False)
    times: dict[str, list[float]] = {name: [] for name in cases}
    task_times: dict[str, list[float]] = {name: [] for name in cases}
    day = 1
    for repeat in range(args.repeats):
        for name, (dag_id, listener) in cases.items():
            events = home / f"events-{day}.ndjson"
            if not listener:  # no Airflow OpenLineage config: openlineage.yml in the working directory
                (home / "openlineage.yml").write_text(
                    f"transport:\n  type: file\n  log_file_path: {events}\n  append: true\n"
                )
            else:
                (home / "openlineage.yml").unlink(missing_ok=True)
            elapsed, per_task = _run(home, dags, dag_id, day, events if listener else None)
            times[name].append(elapsed)
            task_times[name].extend(per_task)
            day += 1
            print(
                f"repeat {repeat + 1}/{args.repeats}: {name}: {elapsed:.1f} s, "
                f"{statistics.median(per_task) * 1000 if per_task else 0:.0f} ms per task (median)",
                file=sys.stderr,
            )

    median = {name: statistics.median(values) for name, values in times.items()}
    print(f"\n{args.tasks} chained tasks, `airflow dags test`, median of {args.repeats} runs\n")
    task_median = {name: statistics.median(values) for name, values in task_times.items() if values}
    print(
        "| case | median wall time | runs | wall time vs plain @task | wall-time overhead per task "
        "| one task, median (of all tasks and runs) | overhead per task, from the task medians |"
    )
    print("|---|---:|---|---:|---:|---:|---:|")
    for name, values in times.items():
        plain = "@task, listener on" if "listener on" in name else "@task, listener off"
        runs = ", ".join(f"{v:.2f}" for v in values)
        per_task = (median[name] - median[plain]) / args.tasks * 1000
        one = task_median.get(name, 0.0) * 1000
        one_overhead = one - task_median.get(plain, 0.0) * 1000
        print(
            f"| {name} | {median[name]:.2f} s | {runs} | {median[name] / median[plain]:.3f}x | {per_task:+.0f} ms "
            f"| {one:.0f} ms | {one_overhead:+.1f} ms |"
        )
    print(textwrap.dedent(f"\n(work dir: {home})"))


if __name__ == "__main__":
    main()
