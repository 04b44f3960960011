"""What lineage adds to every task in a real scheduler run, by configuration.

A real deployment set up by ``docs/deploy.md``'s recipe (its ``settings`` block is the whole ``airflow.cfg``, as
``tests/test_deployment_airflow.py`` uses it): ``airflow api-server`` and ``airflow dag-processor`` run for the
whole benchmark, the metadata database is PostgreSQL (database ``--database`` on ``--postgres``, dropped and
created anew), and ``airflow scheduler`` with LocalExecutor is started once per *visit* with the settings of one
mode as ``AIRFLOW__OPENLINEAGE__*`` / ``AIRFLOW__LINEAGE_PROVIDER__*`` environment variables, which the task
processes inherit. Each visit triggers one run of a DAG of short sequential tasks — a plain ``PythonOperator``,
a plain ``@task``, a ``@task.lineage`` task, a ``LineageMixin`` operator and a ``@task`` with a ``lineage_run``
block (the last three with a schema lookup through an SQLite connection) — and stops the scheduler. Visits go
round-robin over the modes, in a new shuffled order each round, so the machine's drift hits every mode alike;
a first visit warms the caches and is not counted.

Per mode: each task instance's duration (``end_date - start_date``, from the REST API), mean and median, and the
difference to the ``disabled`` mode (``[openlineage] disabled = true``). Modes:

* ``disabled`` — ``[openlineage] disabled = true``: the baseline;
* ``fork`` — the recipe as it was: the stock listener forks a process per task event (its default);
* ``thread`` — the recipe with ``[openlineage] execute_in_thread = true``;
* ``thread-process`` — ``thread`` with the outbox's ``durability = process`` (one write, no fsync, per event).

``--profile MODE`` runs ``py-spy record --subprocesses --idle`` (``pip install py-spy``) on the scheduler of
each visit of MODE and writes the folded stacks to ``--out``; ``bench/task_overhead.py --fold FILE`` sums them
into the listener's parts (fork, extraction, this package's facets, emission, listener start-up).

    .venv/bin/python bench/task_overhead.py                              # 5 rounds x 4 modes: ~15 minutes
    .venv/bin/python bench/task_overhead.py --rounds 2 --modes disabled,thread
    .venv/bin/python bench/task_overhead.py --rounds 1 --modes fork --profile fork --out /tmp/prof
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from contextlib import suppress
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from support.airflow_run import VENV_BIN  # noqa: E402
from support.deployment import (  # noqa: E402
    PASSWORD,
    USER,
    Deadline,
    deployment_env,
    recipe_blocks,
)
from support.feast_consumer import free_port  # noqa: E402

DAG_ID = "task_overhead"

#: Each mode's settings, beside the recipe's ``airflow.cfg``.
MODES: dict[str, dict[str, str]] = {
    "disabled": {"AIRFLOW__OPENLINEAGE__DISABLED": "true"},
    "fork": {"AIRFLOW__OPENLINEAGE__EXECUTE_IN_THREAD": "false"},
    "thread": {"AIRFLOW__OPENLINEAGE__EXECUTE_IN_THREAD": "true"},
    "thread-process": {
        "AIRFLOW__OPENLINEAGE__EXECUTE_IN_THREAD": "true",
        "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(
            {"type": "airflow_lineage_provider.outbox.OutboxTransport", "durability": "process"}
        ),
    },
}

DAG_FILE = '''
"""Short sequential tasks of every kind lineage meets: plain, @task.lineage, LineageMixin, lineage_run."""

import pendulum
from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import BaseOperator, dag, task

from airflow_lineage_provider import LineageMixin, lineage_run

WAREHOUSE = "lineage_demo_warehouse"


def _touch(table):
    from airflow.providers.sqlite.hooks.sqlite import SqliteHook

    with SqliteHook(sqlite_conn_id=WAREHOUSE).get_sqlalchemy_engine().begin() as conn:
        conn.exec_driver_sql(f"CREATE TABLE IF NOT EXISTS {table} (id INTEGER, amount NUMERIC(10,2))")
        conn.exec_driver_sql(f"INSERT INTO {table} VALUES (1, 2.5)")


class ExportOrders(LineageMixin, BaseOperator):
    def execute(self, context):
        _touch("exported")


@dag(dag_id="task_overhead", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), catchup=False,
     max_active_runs=1)
def task_overhead():
    plain_operator = PythonOperator(task_id="plain_operator", python_callable=lambda: 1)

    @task
    def plain_task():
        return 1

    @task.lineage(inputs=["warehouse/orders"], outputs=["warehouse/totals"], connector=WAREHOUSE)
    def declared():
        _touch("totals")

    export = ExportOrders(
        task_id="mixin_operator",
        lineage_inputs=["warehouse/totals"],
        lineage_outputs=["warehouse/exported"],
        lineage_connector=WAREHOUSE,
    )

    @task
    def block():
        with lineage_run("task_overhead.block.copy", inputs=["warehouse/exported"], outputs=["warehouse/copy"],
                         connector=WAREHOUSE):
            _touch("copy")

    plain_operator >> plain_task() >> declared() >> export >> block()


task_overhead()
'''


def log(message: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {message}", flush=True)


def _run(command: list[str], env: dict[str, str], cwd: Path, timeout: float = 300) -> str:
    result = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command[:3])} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return result.stdout


def _start(name: str, arguments: list[str], env: dict[str, str], root: Path) -> subprocess.Popen[bytes]:
    with (root / "logs" / f"{name}.log").open("a") as out:
        return subprocess.Popen(
            [str(VENV_BIN / "airflow"), *arguments],
            env=env,
            cwd=root,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _stop(process: subprocess.Popen[bytes], grace: float = 20.0) -> None:
    """SIGTERM the process group, SIGKILL what is left of it after ``grace``."""
    if process.poll() is None:
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        with suppress(subprocess.TimeoutExpired):
            process.wait(timeout=grace)
    with suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=10)


def _fresh_database(server: str, name: str) -> str:
    import psycopg

    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return f"{server.replace('postgresql://', 'postgresql+psycopg2://')}/{name}"


def _component_healthy(url: str, parts: tuple[str, ...]) -> bool:
    try:
        health = httpx.get(f"{url}/api/v2/monitor/health", timeout=5).json()
    except (httpx.HTTPError, ValueError):
        return False
    return all((health.get(part) or {}).get("status") == "healthy" for part in parts)


def _seconds(start: str, end: str) -> float:
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()


class Bench:
    """The deployment: API server and DAG processor for the whole benchmark, a scheduler per visit."""

    def __init__(self, root: Path, database_url: str, keep_bytecode_setting: bool = False) -> None:
        self.root = root
        self.home, self.dags = root / "airflow", root / "dags"
        for folder in (self.home, self.dags, root / "logs"):
            folder.mkdir(parents=True, exist_ok=True)
        blocks = recipe_blocks()
        (self.home / "airflow.cfg").write_text(blocks["settings"])
        (self.dags / f"{DAG_ID}.py").write_text(DAG_FILE)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = deployment_env(self.home, self.dags, self.port, root)
        self.env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = database_url
        self.env["AIRFLOW__LOGGING__LOGGING_LEVEL"] = "WARNING"
        # An installed package has its bytecode compiled (pip does it); without it, every task process would compile
        # the modules it imports from source, and a forked listener child again for each event.
        if not keep_bytecode_setting:
            self.env.pop("PYTHONDONTWRITEBYTECODE", None)
        self.env["AIRFLOW_CONN_LINEAGE_DEMO_WAREHOUSE"] = f"sqlite:///{root / 'warehouse.db'}"
        with sqlite3.connect(root / "warehouse.db") as warehouse:  # the table @task.lineage's input names
            warehouse.execute("CREATE TABLE IF NOT EXISTS orders (id INTEGER, amount NUMERIC(10,2))")
        self.services: list[subprocess.Popen[bytes]] = []
        self.client: httpx.Client | None = None
        #: With ``--timings``: a folder for cProfile stats of each event's work (``--cprofile``).
        self.cprofile: Path | None = None

    def start(self, deadline: Deadline) -> None:
        log("airflow db migrate")
        _run([str(VENV_BIN / "airflow"), "db", "migrate"], self.env, self.root)
        self.services.append(_start("api-server", ["api-server"], self.env, self.root))
        self.services.append(_start("dag-processor", ["dag-processor"], self.env, self.root))
        deadline.wait_for("the API server and DAG processor", lambda: _component_healthy(self.url, ("dag_processor",)))
        token = httpx.post(f"{self.url}/auth/token", json={"username": USER, "password": PASSWORD}, timeout=30)
        token.raise_for_status()
        self.client = httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {token.json()['access_token']}"}, timeout=30
        )
        deadline.wait_for(
            f"the DAG {DAG_ID} to be parsed", lambda: self.client.get(f"/api/v2/dags/{DAG_ID}").is_success
        )
        self.client.patch(f"/api/v2/dags/{DAG_ID}", json={"is_paused": False}).raise_for_status()

    def stop(self) -> None:
        for service in self.services:
            _stop(service)

    def visit(
        self, mode: str, deadline: Deadline, profile_to: Path | None, timings_to: Path | None = None
    ) -> list[dict[str, Any]]:
        """Start a scheduler with ``mode``'s settings, run the DAG once, stop it; the run's task instances."""
        assert self.client is not None
        env = {**self.env, **MODES[mode]}
        if timings_to is not None:
            probe = self.root / "probe"
            probe.mkdir(exist_ok=True)
            (probe / "sitecustomize.py").write_text((HERE / "task_overhead_probe.py").read_text())
            path = os.pathsep.join(filter(None, [str(probe), env.get("PYTHONPATH", "")]))
            env.update(PYTHONPATH=path, BENCH_TIMINGS=str(timings_to))
            if self.cprofile is not None:
                self.cprofile.mkdir(parents=True, exist_ok=True)
                env["BENCH_CPROFILE"] = str(self.cprofile)
        scheduler = _start(f"scheduler-{mode}", ["scheduler", "--skip-serve-logs"], env, self.root)
        spy = None
        try:
            deadline.wait_for("the scheduler", lambda: _component_healthy(self.url, ("scheduler",)), interval=0.5)
            if profile_to is not None:
                spy = subprocess.Popen(
                    [str(VENV_BIN / "py-spy"), "record", "--subprocesses", "--idle", "--rate", "200",
                     "--format", "raw", "--output", str(profile_to), "--pid", str(scheduler.pid)],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                )  # fmt: skip
                time.sleep(1.0)
            answer = self.client.post(f"/api/v2/dags/{DAG_ID}/dagRuns", json={"logical_date": None})
            answer.raise_for_status()
            run_id = answer.json()["dag_run_id"]

            def ended() -> bool:
                if scheduler.poll() is not None:
                    raise RuntimeError(f"the scheduler exited with {scheduler.returncode}")
                state = self.client.get(f"/api/v2/dags/{DAG_ID}/dagRuns/{run_id}").json()["state"]  # type: ignore[union-attr]
                return state in ("success", "failed")

            deadline.wait_for(f"run {run_id} ({mode})", ended, interval=0.5)
            instances = self.client.get(f"/api/v2/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances").json()
            failed = [i["task_id"] for i in instances["task_instances"] if i["state"] != "success"]
            if failed:
                raise RuntimeError(f"tasks {failed} of {run_id} ({mode}) did not succeed; logs under {self.home}/logs")
            return list(instances["task_instances"])
        finally:
            if spy is not None:
                spy.send_signal(signal.SIGINT)
                spy.wait(timeout=60)
            _stop(scheduler)


def summarize(rounds: list[dict[str, list[float]]], baseline: str = "disabled") -> None:
    """Per mode: mean and median task duration, their differences to ``baseline``'s, and the paired difference:
    the median over rounds of (the mode's median in the round - the baseline's median in the same round), which
    the machine's drift from round to round does not move."""
    modes = list(rounds[0])
    durations = {mode: [value for one in rounds for value in one[mode]] for mode in modes}
    base = durations.get(baseline)
    print(
        f"\n{'mode':<16}{'n':>4}{'mean s':>9}{'median s':>10}   vs {baseline}, ms:{'mean':>6}{'median':>8}{'paired':>8}"
    )
    for mode, values in durations.items():
        mean, median = statistics.fmean(values), statistics.median(values)
        extra = ""
        if base and mode != baseline:
            paired = statistics.median(
                statistics.median(one[mode]) - statistics.median(one[baseline]) for one in rounds
            )
            extra = (
                f"{' ' * 17}{(mean - statistics.fmean(base)) * 1000:>+6.0f}"
                f"{(median - statistics.median(base)) * 1000:>+8.0f}{paired * 1000:>+8.0f}"
            )
        print(f"{mode:<16}{len(values):>4}{mean:>9.3f}{median:>10.3f}{extra}")


#: Frames whose presence in a sample names the part of the listener's work it belongs to, first match wins.
PARTS = (
    ("outbox append", ("outbox/transport.py", "outbox/writer.py")),
    ("client/transport set-up", ("get_or_create_openlineage_client", "create_transport", "OpenLineageClient.__init__")),
    ("package facets (custom_run_facets)", ("airflow_lineage_provider/extractors", "airflow_lineage_provider/facets")),
    ("stock extraction", ("extract_metadata",)),
    ("event building (adapter)", ("adapter.py",)),
    ("fork + wait (parent)", ("_fork_execute",)),
    ("thread join (parent)", ("_thread_execute",)),
    ("listener plugin start-up", ("plugins_manager", "integrate_listener_plugins", "get_listener_manager")),
)


def timings(path: Path) -> None:
    """Per part of the listener's work: calls, mean and median ms per call (``task_overhead_probe.py``)."""
    parts: dict[str, list[float]] = defaultdict(list)
    hooks_per_task: dict[str, float] = defaultdict(float)
    for line in path.read_text().splitlines():
        pid, part, seconds = line.split("\t")
        if not part.startswith("imports:"):
            parts[part].append(float(seconds) * 1000)
        if part.startswith("hook:"):
            hooks_per_task[pid] += float(seconds) * 1000
    per_task = list(hooks_per_task.values())
    print(f"{path.name}: the listener's hooks per task (what the task waits for) ", end="")
    print(f"{statistics.fmean(per_task):.1f} ms mean, {statistics.median(per_task):.1f} median ({len(per_task)} tasks)")
    for part, values in sorted(parts.items()):
        mean, median = statistics.fmean(values), statistics.median(values)
        print(f"  {part:<34}{len(values):>5} calls {mean:>8.1f} ms mean {median:>8.1f} median")


def fold(path: Path) -> None:
    """Sum py-spy's raw folded stacks (``frame;frame;... count``) into the listener's parts, per process kind."""
    totals: dict[str, float] = defaultdict(float)
    samples = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        samples += int(count)
        for part, needles in PARTS:
            if any(needle in stack for needle in needles):
                totals[part] += int(count)
                break
    print(f"{path}: {samples} samples")
    for part, total in sorted(totals.items(), key=lambda item: -item[1]):
        print(f"  {part:<38}{total:>8}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5, help="visits per mode (5 task instances each)")
    parser.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, of {', '.join(MODES)}")
    parser.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432")
    parser.add_argument("--database", default="airflow_bench", help="dropped and created anew")
    parser.add_argument("--profile", default="", help="a mode whose scheduler py-spy records")
    parser.add_argument("--out", type=Path, default=None, help="folder for profiles and the durations (JSON)")
    parser.add_argument("--fold", type=Path, default=None, help="only sum a profile written by --profile")
    parser.add_argument("--timings", action="store_true", help="time the listener's parts (task_overhead_probe.py)")
    parser.add_argument("--cprofile", action="store_true", help="with --timings: cProfile each event's work")
    parser.add_argument(
        "--no-bytecode",
        action="store_true",
        help="keep PYTHONDONTWRITEBYTECODE from the environment (as this repository's tests run): modules without "
        "compiled bytecode are compiled from source in every process",
    )
    parser.add_argument("--keep", action="store_true", help="keep the deployment's folder")
    args = parser.parse_args()
    if args.fold:
        fold(args.fold)
        return
    modes = [mode.strip() for mode in args.modes.split(",") if mode.strip()]
    unknown = set(modes) - set(MODES)
    if unknown:
        parser.error(f"unknown modes {sorted(unknown)}; known: {', '.join(MODES)}")
    out = args.out or Path(tempfile.mkdtemp(prefix="task-overhead-out-"))
    out.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="task-overhead-"))
    deadline = Deadline(600 + 180 * args.rounds * len(modes))
    bench = Bench(root, _fresh_database(args.postgres, args.database), args.no_bytecode)
    if args.cprofile:
        bench.cprofile = out / "cprofile"
    durations: dict[str, list[float]] = {mode: [] for mode in modes}
    rounds: list[dict[str, list[float]]] = []
    per_task: dict[str, dict[str, list[float]]] = {mode: defaultdict(list) for mode in modes}
    log(f"deployment in {root}, results in {out}")
    try:
        bench.start(deadline)
        warm = bench.visit(modes[0], deadline, None)  # the first run pays for cold caches: not counted
        log("warm-up " + " ".join(f"{_seconds(i['start_date'], i['end_date']):.2f}" for i in warm))
        for round_number in range(1, args.rounds + 1):
            order = random.sample(modes, len(modes))
            rounds.append({})
            for mode in order:
                profile_to = out / f"profile-{mode}-{round_number}.txt" if mode == args.profile else None
                timings_to = out / f"timings-{mode}.tsv" if args.timings else None
                instances = bench.visit(mode, deadline, profile_to, timings_to)
                seconds = [_seconds(i["start_date"], i["end_date"]) for i in instances]
                durations[mode].extend(seconds)
                rounds[-1][mode] = seconds
                for instance, value in zip(instances, seconds, strict=True):
                    per_task[mode][instance["task_id"]].append(value)
                log(f"round {round_number}/{args.rounds} {mode:<15} " + " ".join(f"{s:.2f}" for s in seconds))
        summarize(rounds)
        print("\nper task, median s:")
        tasks = sorted({task for mode in modes for task in per_task[mode]})
        print(f"{'mode':<16}" + "".join(f"{task:>16}" for task in tasks))
        for mode in modes:
            row = "".join(f"{statistics.median(per_task[mode][task]):>16.3f}" for task in tasks)
            print(f"{mode:<16}{row}")
        for mode in modes:
            if (out / f"timings-{mode}.tsv").exists():
                timings(out / f"timings-{mode}.tsv")
        (out / "durations.json").write_text(json.dumps({"rounds": rounds, "per_task": per_task}, indent=1))
    finally:
        bench.stop()
        if not args.keep:
            subprocess.run(["rm", "-rf", str(root)], check=False)


if __name__ == "__main__":
    main()
