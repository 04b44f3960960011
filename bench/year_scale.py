"""A year of a large Airflow deployment on PostgreSQL: a generator of Airflow-shaped OpenLineage events, loaded
into a real ``airflow-lineage serve`` through the batch API as the export DAG ships them, measured at checkpoints.

**The deployment** (seeded, so every run sends the same events): DAGs scheduled daily (6%), weekly (44%) or
monthly (50%) over 365 days from 2025-01-01, of 3 to 11 tasks each. Every DAG run sends a START and a COMPLETE
for the DAG and for each of its tasks (a task that fails, 2%, is retried under a new run id), each task event
carrying the ``parent`` facet of its DAG run, Airflow's run facets and its job type; task events name inputs and
outputs with their schema. Tasks read their upstream tasks' outputs (fan-in up to 4 inputs), shared source tables
of their domain, and outputs of earlier DAGs (fan-out across DAGs, so lineage runs deep); ~20% of outputs carry
column lineage, ~8% are date partitions (``.../dt=2025-03-04``: a new dataset every run). Events are ~3.5 KB. The
deployment is sized from ``--events``: about one job per 100 events and a dataset per 13 (10M events: ~97k
jobs, ~740k datasets); the stream, in time order, ends near the end of the year. ``--deployment-events`` sizes
it for more than are loaded: the first 1M events of the 10M deployment name its ~97k jobs and ~190k datasets
within its first five weeks (a store as wide as a large deployment's, in a quarter of an hour).

**Checkpoints** at 10k, 100k, 1M and 10M events (those up to ``--events``, and ``--events`` itself). At each:

* **batch ingest**: the events up to the checkpoint in batches of 500 on one connection (a 503 while the ingest
  log is full is retried after its Retry-After, as the shipper does); events/s until the last batch was answered,
  and until a read saw everything applied; then ``VACUUM ANALYZE`` (what autovacuum does after a load);
* **reads**: the depth-10 upstream walk from 20 datasets the latest DAGs wrote, the first request per root
  (p50/p95); ``/api/v1/datasets?limit=100``, ``/api/v1/namespaces`` and ``/api/v1/search?q=orders`` (p50/p99 of
  :data:`REPEAT` requests, after two warm-up ones); with ``--search-without-index`` the search again with the
  trigram index dropped (and then rebuilt): the statement before and after the index, on the same store;
* **single-event ingest**: the next 2,000 events of the stream, one per request from 4 client processes
  (``single_event_ingest.py``'s clients); events/s until readable, and p99 per request;
* **prune of one day**: ``POST /api/v1/retention`` cutting the oldest day still held, while 4 clients post the
  next 2,000 events one by one; the prune's time and events, and the clients' p99 meanwhile;
* **size**: ``pg_database_size`` and bytes per stored event, datasets and jobs.

Results go to ``--out`` (JSON, rewritten after every checkpoint) and a table on the terminal. The database
(``--database``, on the server of ``LINEAGE_TEST_PG_URL``) is created fresh and dropped afterwards unless ``--keep``.
Not run by CI.

``--listings-against CHECKOUT`` loads nothing: it copies a store a ``--keep`` run left (``--database``) twice,
serves one copy with CHECKOUT (another commit, e.g. ``git archive <commit> | tar -x -C /tmp/before``) and the other
with this checkout, and times the listings request by request on both (:func:`listings_against`). A store loaded
by the older checkout (``PYTHONPATH=CHECKOUT``) can be served by both: this checkout migrates its copy.

    .venv/bin/python bench/year_scale.py --events 100000 --search-without-index     # ~10 minutes
    .venv/bin/python bench/year_scale.py --events 10000000                           # the year; many hours
    .venv/bin/python bench/year_scale.py --database DB --listings-against CHECKOUT   # a kept store, two checkouts
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import random
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from functools import partial
from pathlib import Path
from typing import Any

import requests

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from consumer_bench import BATCH, PENDING_HEADER, PG_URL, Ours, _percentiles, analyze, serve_ours  # noqa: E402
from single_event_ingest import _concurrently  # noqa: E402

#: Event counts measured at, up to the size asked.
CHECKPOINTS = (10_000, 100_000, 1_000_000, 10_000_000)
#: The year the deployment runs.
YEAR_START = datetime(2025, 1, 1, tzinfo=timezone.utc)
DAYS = 365
#: Airflow's own OpenLineage namespace for its jobs, and the producer its events name.
JOB_NAMESPACE = "airflow-prod"
PRODUCER = "https://github.com/apache/airflow/tree/providers-openlineage/2.20.0"
SCHEMA_URL = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
#: Events the single-event phases post (each phase), from 4 clients.
SINGLE_EVENTS, CLIENTS = 2_000, 4
#: Walk roots per checkpoint, and requests per listing.
ROOTS, REPEAT = 20, 30
SEARCH = "orders"
#: A word few names hold: one table of the deployment, under its few renderings.
RARE_SEARCH = "orders_clean_03417"
TRIGRAM_INDEX = "ix_lineage_nodes_name_trgm"

DOMAINS = (
    "orders", "customers", "payments", "sessions", "inventory", "shipments", "products", "invoices", "refunds",
    "marketing", "clicks", "subscriptions", "accounts", "ledger", "support_tickets", "reviews", "suppliers",
    "warehouse_stock", "pricing", "devices",
)  # fmt: skip
PURPOSES = ("ingest", "transform", "aggregate", "export", "quality", "features", "reporting")
STEPS = ("extract", "stage", "clean", "enrich", "join", "aggregate", "publish", "snapshot", "score", "check")
LAYERS = ("raw", "stg", "int", "fct", "dim", "agg", "mart")
WAREHOUSES = ("postgres://warehouse.internal:5432", "snowflake://acme.eu-west-1", "bigquery")
LAKE = "s3://acme-data-lake"
SOURCE_DB = "postgres://app-db.internal:5432"
OPERATORS = ("SQLExecuteQueryOperator", "SnowflakeOperator", "BigQueryInsertJobOperator", "PythonOperator")
COLUMNS = (
    ("id", "BIGINT"), ("created_at", "TIMESTAMP"), ("updated_at", "TIMESTAMP"), ("amount", "DECIMAL(18,2)"),
    ("currency", "VARCHAR(3)"), ("status", "VARCHAR(32)"), ("country_code", "VARCHAR(2)"), ("quantity", "INTEGER"),
    ("customer_id", "BIGINT"), ("order_id", "BIGINT"), ("product_id", "BIGINT"), ("channel", "VARCHAR(64)"),
    ("discount", "DECIMAL(9,4)"), ("is_active", "BOOLEAN"), ("event_date", "DATE"), ("region", "VARCHAR(64)"),
    ("email_hash", "VARCHAR(64)"), ("score", "DOUBLE"), ("source_system", "VARCHAR(32)"), ("batch_id", "VARCHAR(36)"),
)  # fmt: skip


@dataclass(frozen=True)
class Output:
    """A dataset a task writes: ``name`` holds ``{date}`` when it is a date partition."""

    namespace: str
    name: str
    fields: tuple[tuple[str, str], ...]
    column_lineage: bool

    @property
    def partitioned(self) -> bool:
        return "{date}" in self.name

    def on(self, day: date) -> str:
        return self.name.replace("{date}", day.isoformat())


@dataclass
class Task:
    task_id: str
    operator: str
    upstream: list[int]
    inputs: list[Output]
    outputs: list[Output]
    downstream: list[str] = field(default_factory=list)


@dataclass
class Dag:
    index: int
    dag_id: str
    schedule: str  # daily, weekly, monthly
    slot: int  # weekday (weekly) or day of the month (monthly)
    hour: int
    owner: str
    tasks: list[Task]

    def runs_on(self, day: int) -> bool:
        when = (YEAR_START + timedelta(days=day)).date()
        if self.schedule == "daily":
            return True
        if self.schedule == "weekly":
            return when.weekday() == self.slot
        return when.day == self.slot

    def first_day(self) -> int:
        return next(day for day in range(DAYS) if self.runs_on(day))

    def events_per_year(self) -> float:
        runs = sum(1 for day in range(DAYS) if self.runs_on(day))
        return runs * (2 + 2 * len(self.tasks)) * 1.02  # retried failures


def _fields(rng: random.Random) -> tuple[tuple[str, str], ...]:
    return tuple(rng.sample(COLUMNS, rng.randint(4, 10)))


class Deployment:
    """The DAGs of a deployment sized for ``events`` events over the year (see the module docstring)."""

    def __init__(self, events: int, seed: int = 41) -> None:
        self.seed = seed
        rng = random.Random(f"{seed}:deployment")
        self.dags: list[Dag] = []
        sources: dict[str, list[Output]] = {}
        stable: list[Output] = []  # outputs of earlier DAGs that later ones may read
        expected = 0.0
        while expected < events * 1.01:
            index = len(self.dags)
            domain = rng.choice(DOMAINS)
            pool = sources.setdefault(domain, [])
            if len(pool) < 4 or rng.random() < 0.3:
                name = f"app.public.{domain}_{len(pool)}"
                pool.append(Output(SOURCE_DB, name, _fields(rng), False))
            schedule = rng.choices(("daily", "weekly", "monthly"), (6, 44, 50))[0]
            slot = rng.randrange(7) if schedule == "weekly" else rng.randint(1, 28)
            dag_id = f"{domain}_{rng.choice(PURPOSES)}_{index:05d}"
            warehouse = rng.choice(WAREHOUSES)
            tasks: list[Task] = []
            for number in range(rng.randint(3, 11)):
                upstream = sorted(rng.sample(range(number), min(number, rng.choice((1, 1, 2))))) if number else []
                inputs = [o for u in upstream for o in rng.sample(tasks[u].outputs, 1)]
                if not upstream:
                    inputs += rng.sample(pool, min(len(pool), rng.randint(1, 3)))
                if stable and rng.random() < 0.35:
                    inputs.append(stable[rng.randrange(max(0, len(stable) - 400), len(stable))])
                inputs = list({(o.namespace, o.name): o for o in inputs}.values())[:4]
                outputs = []
                for k in range(rng.choice((1, 1, 1, 2, 2, 3))):
                    if rng.random() < 0.08:
                        table = f"{domain}/{dag_id}_{number}_{k}"
                        outputs.append(Output(LAKE, f"{rng.choice(LAYERS)}/{table}/dt={{date}}", _fields(rng), False))
                    else:
                        name = f"{rng.choice(LAYERS)}.{domain}_{rng.choice(STEPS)}_{index:05d}_{number}_{k}"
                        outputs.append(Output(warehouse, f"analytics.{name}", _fields(rng), rng.random() < 0.2))
                step = STEPS[number % len(STEPS)]
                tasks.append(Task(f"{step}_{domain}_{number}", rng.choice(OPERATORS), upstream, inputs, outputs))
            for task in tasks:
                for u in task.upstream:
                    tasks[u].downstream.append(task.task_id)
            stable += [o for t in tasks for o in t.outputs if not o.partitioned]
            hour = rng.randrange(24)
            dag = Dag(index, dag_id, schedule, slot, hour, f"team_{domain}", tasks)
            self.dags.append(dag)
            expected += dag.events_per_year()

    @property
    def datasets(self) -> int:
        """Datasets the whole year names: sources, outputs, and a partition per run of each partitioned output."""
        names = {(o.namespace, o.name) for dag in self.dags for task in dag.tasks for o in task.inputs + task.outputs}
        partitions = sum(
            sum(1 for day in range(DAYS) if dag.runs_on(day)) * sum(o.partitioned for t in dag.tasks for o in t.outputs)
            for dag in self.dags
        )
        return len(names) + partitions

    @property
    def jobs(self) -> int:
        return sum(1 + len(dag.tasks) for dag in self.dags)

    def roots(self, through_day: int) -> Iterator[tuple[str, str]]:
        """Datasets the last tasks of the latest DAGs that ran by ``through_day`` wrote: deep upstream lineage. On
        the checkpoint's own day a DAG may not have run yet (a 10k cut of a 12k-DAG year ends within day 0): the
        reader skips the ones the store does not hold."""
        for dag in reversed(self.dags):
            if dag.first_day() <= through_day:
                output = next((o for o in dag.tasks[-1].outputs if not o.partitioned), None)
                if output is not None:
                    yield output.namespace, output.name

    def stream(self) -> Iterator[tuple[int, dict[str, Any]]]:
        """``(day, event)`` of the whole year in time order (a day at a time, sorted within the day)."""
        for day in range(DAYS):
            today: list[tuple[str, int, dict[str, Any]]] = []
            for dag in self.dags:
                if dag.runs_on(day):
                    today += [(e["eventTime"], len(today) + i, e) for i, e in enumerate(self._run(dag, day))]
            today.sort(key=lambda item: (item[0], item[1]))
            for _at, _seq, event in today:
                yield day, event

    def _run(self, dag: Dag, day: int) -> list[dict[str, Any]]:
        """The events of one run of ``dag`` on ``day``."""
        rng = random.Random(f"{self.seed}:{dag.index}:{day}")
        logical = YEAR_START + timedelta(days=day)
        begin = logical + timedelta(hours=dag.hour, minutes=rng.randrange(60), seconds=rng.randrange(60))
        interval = {"daily": 1, "weekly": 7, "monthly": 30}[dag.schedule]
        dag_run = _RunContext(
            dag=dag,
            run_id=str(uuid.UUID(int=rng.getrandbits(128), version=4)),
            airflow_run_id=f"scheduled__{logical.isoformat()}",
            logical=logical,
            interval_end=logical + timedelta(days=interval),
            day=logical.date(),
        )
        events = [_dag_event(dag_run, "START", begin, {})]
        ends: list[datetime] = []
        states: dict[str, str] = {}
        for task in dag.tasks:
            started = max([ends[u] for u in task.upstream], default=begin) + timedelta(seconds=rng.randint(2, 30))
            try_number = 1
            if rng.random() < 0.02:  # fails once, then the retry succeeds under a new run id
                failed = started + timedelta(seconds=rng.randint(5, 300))
                run_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
                events += _task_events(dag_run, task, run_id, started, failed, "FAIL", try_number)
                started, try_number = failed + timedelta(minutes=5), 2
            ended = started + timedelta(seconds=rng.randint(20, 1200))
            run_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
            events += _task_events(dag_run, task, run_id, started, ended, "COMPLETE", try_number, rng)
            ends.append(ended)
            states[task.task_id] = "success"
        events.append(_dag_event(dag_run, "COMPLETE", max(ends) + timedelta(seconds=3), states))
        return events


@dataclass(frozen=True)
class _RunContext:
    dag: Dag
    run_id: str
    airflow_run_id: str
    logical: datetime
    interval_end: datetime
    day: date


def _iso(at: datetime) -> str:
    return at.isoformat().replace("+00:00", "Z")


def _facet(kind: str, /, **values: Any) -> dict[str, Any]:
    schema = f"https://openlineage.io/spec/facets/1-0-1/{kind}.json#/$defs/{kind}"
    return {"_producer": PRODUCER, "_schemaURL": schema, **values}


def _airflow_facet(run: _RunContext, **more: Any) -> dict[str, Any]:
    dag = run.dag
    facet = {
        "dag": {
            "dag_id": run.dag.dag_id,
            "schedule_interval": {"daily": "@daily", "weekly": "@weekly", "monthly": "@monthly"}[dag.schedule],
            "owner": dag.owner,
            "tags": json.dumps([dag.owner, dag.schedule, "lineage"]),
        },
        "dagRun": {
            "dag_id": dag.dag_id,
            "run_id": run.airflow_run_id,
            "run_type": "scheduled",
            "logical_date": _iso(run.logical),
            "data_interval_start": _iso(run.logical),
            "data_interval_end": _iso(run.interval_end),
            "conf": {},
        },
    }
    return _facet("AirflowRunFacet", **facet, **more)


def _run_facets(run: _RunContext) -> dict[str, Any]:
    return {
        "nominalTime": _facet(
            "NominalTimeRunFacet", nominalStartTime=_iso(run.logical), nominalEndTime=_iso(run.interval_end)
        ),
        "processing_engine": _facet(
            "ProcessingEngineRunFacet", version="3.1.2", name="Airflow", openlineageAdapterVersion="2.20.0"
        ),
    }


def _dag_event(run: _RunContext, kind: str, at: datetime, states: dict[str, str]) -> dict[str, Any]:
    facets = _run_facets(run)
    if kind == "START":
        facets["airflowDagRun"] = _airflow_facet(run)
    else:
        facets["airflowState"] = _facet("AirflowStateRunFacet", dagRunState="success", tasksState=states)
    job_facets = {
        "jobType": _facet("JobTypeJobFacet", processingType="BATCH", integration="AIRFLOW", jobType="DAG"),
        "ownership": _facet("OwnershipJobFacet", owners=[{"name": run.dag.owner, "type": "team"}]),
    }
    return {
        "eventType": kind,
        "eventTime": _iso(at),
        "producer": PRODUCER,
        "schemaURL": SCHEMA_URL,
        "run": {"runId": run.run_id, "facets": facets},
        "job": {"namespace": JOB_NAMESPACE, "name": run.dag.dag_id, "facets": job_facets},
        "inputs": [],
        "outputs": [],
    }


def _dataset(output: Output, day: date, *, schema: bool, lineage: list[Output] | None = None) -> dict[str, Any]:
    facets: dict[str, Any] = {}
    if schema:
        fields = [{"name": name, "type": kind} for name, kind in output.fields]
        facets["schema"] = _facet("SchemaDatasetFacet", fields=fields)
    if lineage:
        mapping = {}
        for position, (name, _kind) in enumerate(output.fields):
            source = lineage[position % len(lineage)]
            source_field = source.fields[position % len(source.fields)][0]
            mapping[name] = {
                "inputFields": [
                    {
                        "namespace": source.namespace,
                        "name": source.on(day),
                        "field": source_field,
                        "transformations": [{"type": "DIRECT", "subtype": "IDENTITY"}],
                    }
                ]
            }
        facets["columnLineage"] = _facet("ColumnLineageDatasetFacet", fields=mapping)
    return {"namespace": output.namespace, "name": output.on(day), "facets": facets}


def _task_events(
    run: _RunContext,
    task: Task,
    run_id: str,
    started: datetime,
    ended: datetime,
    outcome: str,
    try_number: int,
    rng: random.Random | None = None,
) -> list[dict[str, Any]]:
    """A task run's START and its COMPLETE or FAIL."""
    dag = run.dag
    parent = {
        "run": {"runId": run.run_id},
        "job": {"namespace": JOB_NAMESPACE, "name": dag.dag_id},
        "root": {"run": {"runId": run.run_id}, "job": {"namespace": JOB_NAMESPACE, "name": dag.dag_id}},
    }
    task_info = {
        "task_id": task.task_id,
        "operator_class": task.operator,
        "owner": dag.owner,
        "retries": 2,
        "depends_on_past": False,
        "priority_weight": 1,
        "pool": "default_pool",
        "queue": "default",
        "trigger_rule": "all_success",
        "upstream_task_ids": json.dumps([dag.tasks[u].task_id for u in task.upstream]),
        "downstream_task_ids": json.dumps(task.downstream),
    }
    instance = {"try_number": try_number, "map_index": -1, "pool": "default_pool", "queued_dttm": _iso(started)}
    job_facets: dict[str, Any] = {
        "jobType": _facet("JobTypeJobFacet", processingType="BATCH", integration="AIRFLOW", jobType="TASK"),
    }
    if task.operator != "PythonOperator":
        reads = ", ".join(f"{o.name.split('/')[-1]}" for o in task.inputs) or "dual"
        query = f"INSERT INTO {task.outputs[0].name} SELECT * FROM {reads} WHERE event_date = '{run.day}'"
        job_facets["sql"] = _facet("SQLJobFacet", query=query)
    events = []
    for kind, at in (("START", started), (outcome, ended)):
        facets = _run_facets(run)
        facets["parent"] = _facet("ParentRunFacet", **parent)
        if kind == "START":
            facets["airflow"] = _airflow_facet(run, task=task_info, taskInstance=instance, taskUuid=run_id)
        if kind == "FAIL":
            facets["errorMessage"] = _facet(
                "ErrorMessageRunFacet",
                message="psycopg2.OperationalError: server closed the connection",
                programmingLanguage="python",
            )
        done = kind == "COMPLETE"
        inputs = [_dataset(o, run.day, schema=False) for o in task.inputs]
        outputs = [
            _dataset(o, run.day, schema=done, lineage=task.inputs if done and o.column_lineage else None)
            for o in task.outputs
        ]
        if done and rng is not None:
            for dataset in outputs:
                rows = rng.randint(10, 5_000_000)
                dataset["outputFacets"] = {
                    "outputStatistics": _facet("OutputStatisticsOutputDatasetFacet", rowCount=rows, size=rows * 120)
                }
        events.append(
            {
                "eventType": kind,
                "eventTime": _iso(at),
                "producer": PRODUCER,
                "schemaURL": SCHEMA_URL,
                "run": {"runId": run_id, "facets": facets},
                "job": {"namespace": JOB_NAMESPACE, "name": f"{dag.dag_id}.{task.task_id}", "facets": job_facets},
                "inputs": inputs,
                "outputs": outputs,
            }
        )
    return events


def _produce(events: int, seed: int, out: Any, sized_for: int) -> None:
    """In a process of its own: the first ``events`` events of the stream of a deployment sized for ``sized_for``
    as JSON batches of :data:`BATCH`, each put on ``out`` as ``(body, count, day of its last event, bytes)``; None
    after the last."""
    batch: list[bytes] = []
    day = 0
    for sent, (day, event) in enumerate(Deployment(sized_for, seed).stream(), 1):
        batch.append(json.dumps(event, separators=(",", ":")).encode())
        if len(batch) == BATCH or sent == events:
            out.put((b"[" + b",".join(batch) + b"]", len(batch), day, sum(map(len, batch))))
            batch = []
        if sent == events:
            break
    if batch:
        out.put((b"[" + b",".join(batch) + b"]", len(batch), day, sum(map(len, batch))))
    out.put(None)


class Stream:
    """The event stream, generated by a process beside the loader (so generating does not count as ingest time)."""

    def __init__(self, events: int, seed: int, sized_for: int | None = None) -> None:
        context = multiprocessing.get_context("fork")
        self._queue = context.Queue(maxsize=16)
        produced = (events, seed, self._queue, max(events, sized_for or 0))
        self._process = context.Process(target=_produce, args=produced, daemon=True)
        self._process.start()
        self.taken = 0
        self.day = 0
        self.bytes = 0
        self.done = False

    def next(self) -> tuple[bytes, int] | None:
        item = None if self.done else self._queue.get(timeout=600)
        if item is None:
            self.done = True
            return None
        body, count, self.day, size = item
        self.taken += count
        self.bytes += size
        return body, count

    def events(self, count: int) -> list[dict[str, Any]]:
        """The next ``count`` events (whole batches) as dicts."""
        found: list[dict[str, Any]] = []
        while len(found) < count and (item := self.next()) is not None:
            found += json.loads(item[0])
        return found

    def close(self) -> None:
        self._process.kill()
        self._process.join(10)


def _post_batch(session: requests.Session, url: str, body: bytes) -> int:
    """Post one batch until it is taken; the 503s (ingest log full) it got first."""
    refused = 0
    while True:
        answer = session.post(
            f"{url}/api/v1/lineage/batch", data=body, headers={"Content-Type": "application/json"}, timeout=600
        )
        if answer.status_code != 503:
            answer.raise_for_status()
            return refused
        refused += 1
        time.sleep(float(answer.headers.get("Retry-After", "1")))


def _applied(consumer: Ours) -> tuple[float, int, int]:
    """Wait until a read sees every answered event applied: when, the reads answered 503 meanwhile, and those
    answered at once from what was applied, saying how many events were still pending (:data:`PENDING_HEADER`)."""
    refused = behind = 0
    while True:
        answer = consumer.session.get(f"{consumer.url}/api/v1/events", params={"limit": 1}, timeout=120)
        if answer.status_code == 200 and int(answer.headers.get(PENDING_HEADER, "0")) == 0:
            return time.perf_counter(), refused, behind
        if answer.status_code == 200:
            behind += 1
        elif answer.status_code == 503:
            refused += 1
        else:
            answer.raise_for_status()
        time.sleep(0.5)


def load(consumer: Ours, stream: Stream, until: int, progress: Any) -> dict[str, Any]:
    """Batches up to ``until`` events in all: events/s answered and until applied."""
    first = stream.taken
    refused = 0
    started = time.perf_counter()
    task = progress.add_task(f"batch ingest to {until:,}", total=until - first)
    while stream.taken < until and (item := stream.next()) is not None:
        refused += _post_batch(consumer.session, consumer.url, item[0])
        progress.update(task, advance=item[1])
    answered = time.perf_counter()
    applied, reads_refused, reads_behind = _applied(consumer)
    count = stream.taken - first
    return {
        "events": count,
        "answered_events_per_s": count / (answered - started),
        "applied_events_per_s": count / (applied - started),
        "drain_seconds": applied - answered,
        "batches_refused_503": refused,
        "reads_refused_503_while_draining": reads_refused,
        "reads_answered_behind_while_draining": reads_behind,
    }


def _walk_ms(consumer: Ours, namespace: str, name: str) -> tuple[float, int] | None:
    params: dict[str, str | int] = {
        "nodeId": f"dataset:{namespace}:{name}",
        "depth": 10,
        "direction": "upstream",
        "maxNodes": 100000,
    }
    started = time.perf_counter()
    answer = consumer.session.get(f"{consumer.url}/api/v1/lineage", params=params, timeout=600)
    elapsed = (time.perf_counter() - started) * 1000
    if answer.status_code == 404:
        return None  # not written yet
    answer.raise_for_status()
    return elapsed, len(answer.json()["graph"])


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


def reads(consumer: Ours, roots: Iterator[tuple[str, str]]) -> dict[str, Any]:
    walks: list[tuple[float, int]] = []
    for namespace, name in roots:
        if (walk := _walk_ms(consumer, namespace, name)) is not None:
            walks.append(walk)
        if len(walks) == ROOTS:
            break
    times = [ms for ms, _ in walks]
    result: dict[str, Any] = {
        "walk_p50_ms": statistics.median(times),
        "walk_p95_ms": _p(times, 0.95),
        "walk_nodes_median": statistics.median(n for _, n in walks),
    }
    listings: tuple[tuple[str, str, dict[str, Any]], ...] = (
        ("datasets", "/api/v1/datasets", {"limit": 100}),
        ("namespaces", "/api/v1/namespaces", {}),
        ("search", "/api/v1/search", {"q": SEARCH}),
    )
    for label, path, params in listings:
        p50, p99, body = _percentiles(partial(consumer.body, path, params), REPEAT)
        result[f"{label}_p50_ms"], result[f"{label}_p99_ms"] = p50, p99  # already in ms
        if label == "search":
            result["search_total"] = json.loads(body)["totalCount"]
    return result


def _p99_ms(reports: list[tuple[float, float, list[float], str | None]]) -> float:
    return _p([t for report in reports for t in report[2]], 0.99) * 1000


def single_events(consumer: Ours, stream: Stream) -> dict[str, Any]:
    events = stream.events(SINGLE_EVENTS)
    reports, readable, *_ = _concurrently(consumer, events, CLIENTS, False)
    first = min(report[0] for report in reports)
    return {"events_per_s": len(events) / (readable - first), "p99_ms": _p99_ms(reports)}


def prune_one_day(consumer: Ours, stream: Stream, day: int) -> dict[str, Any]:
    """Prune the events of ``day`` (and any before) while 4 clients post the next events one by one."""
    cutoff = YEAR_START + timedelta(days=day + 1)
    days = (datetime.now(timezone.utc) - cutoff).total_seconds() / 86400
    answer: dict[str, Any] = {}

    def prune() -> None:
        time.sleep(1.0)  # the clients are posting (they start 0.5 s after the call)
        started = time.perf_counter()
        response = requests.post(f"{consumer.url}/api/v1/retention", params={"days": days}, timeout=600)
        answer["seconds"] = time.perf_counter() - started
        response.raise_for_status()
        answer["events"] = response.json()["events"]

    events = stream.events(SINGLE_EVENTS)
    thread = threading.Thread(target=prune)
    thread.start()
    reports, readable, *_ = _concurrently(consumer, events, CLIENTS, False)
    thread.join()
    first = min(report[0] for report in reports)
    return {
        "prune_seconds": answer["seconds"],
        "pruned_events": answer["events"],
        "ingest_p99_ms_during": _p99_ms(reports),
        "ingest_seconds": readable - first,
    }


def search_without_index(consumer: Ours, store: str) -> dict[str, Any]:
    """The search again with the trigram index dropped, then the index rebuilt (its time too)."""
    import sqlalchemy as sa

    engine = sa.create_engine(store, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            definition = conn.exec_driver_sql(
                "SELECT indexdef FROM pg_indexes WHERE indexname = %s", (TRIGRAM_INDEX,)
            ).scalar()
            if definition is None:
                return {}
            conn.exec_driver_sql(f"DROP INDEX {TRIGRAM_INDEX}")
            try:
                p50, p99, _ = _percentiles(lambda: consumer.body("/api/v1/search", {"q": SEARCH}), REPEAT)
            finally:
                started = time.perf_counter()
                conn.exec_driver_sql(definition)
                built = time.perf_counter() - started
                conn.exec_driver_sql("ANALYZE lineage_nodes")
    finally:
        engine.dispose()
    return {"search_no_index_p50_ms": p50, "search_no_index_p99_ms": p99, "index_build_seconds": built}


def sizes(store: str) -> dict[str, Any]:
    import sqlalchemy as sa

    engine = sa.create_engine(store)
    try:
        with engine.connect() as conn:
            size = conn.exec_driver_sql("SELECT pg_database_size(current_database())").scalar() or 0
            events = conn.exec_driver_sql("SELECT count(*) FROM lineage_events").scalar() or 0
            kinds: dict[str, int] = {
                kind: count
                for kind, count in conn.exec_driver_sql("SELECT kind, count(*) FROM lineage_nodes GROUP BY kind")
            }
    finally:
        engine.dispose()
    return {
        "database_bytes": size,
        "stored_events": events,
        "bytes_per_event": size / events if events else None,
        "datasets": kinds.get("dataset", 0),
        "jobs": kinds.get("job", 0),
    }


@contextmanager
def fresh_database(name: str, keep: bool, template: str | None = None) -> Iterator[str]:
    """Database ``name`` created anew (a copy of database ``template`` if given), dropped afterwards unless
    ``keep``; its store URL."""
    import sqlalchemy as sa

    admin = sa.create_engine(sa.make_url(PG_URL).set(database="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        conn.exec_driver_sql(f"CREATE DATABASE {name}" + (f" TEMPLATE {template}" if template else ""))
    try:
        yield sa.make_url(PG_URL).set(database=name).render_as_string(hide_password=False)
    finally:
        if not keep:
            with admin.connect() as conn:
                conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        admin.dispose()


#: The listings ``--listings-against`` times, each on both checkouts.
LISTINGS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("namespaces", "/api/v1/namespaces", {}),
    ("datasets", "/api/v1/datasets", {"limit": 100}),
    ("jobs", "/api/v1/jobs", {"limit": 100}),
    ("search", "/api/v1/search", {"q": SEARCH}),
    ("search, recent first", "/api/v1/search", {"q": SEARCH, "sort": "UPDATE_AT"}),
    ("search, a rare word", "/api/v1/search", {"q": RARE_SEARCH}),
)


def listings_against(args: argparse.Namespace) -> dict[str, Any]:
    """The listings on two copies of a kept store: one served by checkout ``--listings-against`` (BEFORE), one by
    this checkout (AFTER, which migrates its copy on opening: that time is reported). Each request goes to both, in
    alternating order, :data:`REPEAT` x 10 pairs per listing; medians, p99 and the median per-pair ratio."""
    result: dict[str, Any] = {"database": args.database, "machine_before": _machine(), "listings": {}}
    with (
        fresh_database(f"{args.database}_before", False, template=args.database) as before_store,
        fresh_database(f"{args.database}_after", False, template=args.database) as after_store,
        tempfile.TemporaryDirectory() as folder,
        serve_ours(before_store, Path(folder) / "before", tree=args.listings_against) as before,
    ):
        started = time.perf_counter()
        with serve_ours(after_store, Path(folder) / "after") as after:
            result["after_open_and_migrate_seconds"] = time.perf_counter() - started
            result["sizes"] = sizes(after_store)
            for label, path, params in LISTINGS:
                times: dict[str, list[float]] = {"before": [], "after": []}
                bodies = {}
                for i in range(REPEAT * 10 + 2):
                    order = (("before", before), ("after", after)) if i % 2 else (("after", after), ("before", before))
                    for side, server in order:
                        begun = time.perf_counter()
                        bodies[side] = server.body(path, params)
                        if i >= 2:  # two warm-up pairs
                            times[side].append((time.perf_counter() - begun) * 1000)
                answers = {side: json.loads(body) for side, body in bodies.items()}
                totals = {side: answer["totalCount"] for side, answer in answers.items()}
                result["listings"][label] = {
                    "before_p50_ms": statistics.median(times["before"]),
                    "after_p50_ms": statistics.median(times["after"]),
                    "before_p99_ms": _p(times["before"], 0.99),
                    "after_p99_ms": _p(times["after"], 0.99),
                    "ratio": statistics.median(a / b for a, b in zip(times["after"], times["before"], strict=True)),
                    "total_count": totals,
                }
                if "results" in answers["after"]:  # a search: both checkouts must answer the same page
                    same = answers["after"]["results"] == answers["before"]["results"]
                    result["listings"][label]["same_results"] = same
    result["machine_after"] = _machine()
    return result


def _machine() -> dict[str, Any]:
    import os

    return {"cpus": os.cpu_count(), "load_average": os.getloadavg()}


def _save(result: dict[str, Any], out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))


def _checkpoints(events: int) -> list[int]:
    return sorted({c for c in CHECKPOINTS if c < events} | {events})


def _stream_length(events: int) -> int:
    """Events in the stream: ``events`` loaded by batch, and what each checkpoint's single-event phases post."""
    return events + 2 * SINGLE_EVENTS * len(_checkpoints(events))


def run(args: argparse.Namespace) -> dict[str, Any]:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    checkpoints = _checkpoints(args.events)
    total = _stream_length(args.events)
    sized_for = max(total, args.deployment_events or 0)
    deployment = Deployment(sized_for, args.seed)
    result: dict[str, Any] = {
        "events": args.events,
        "deployment_events": sized_for,
        "seed": args.seed,
        "dags": len(deployment.dags),
        "jobs_planned": deployment.jobs,
        "started_at": datetime.now(timezone.utc).isoformat(),
        "machine_before": _machine(),
        "checkpoints": [],
    }
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    pruned_through = -1
    with (
        fresh_database(args.database, args.keep) as store,
        tempfile.TemporaryDirectory() as folder,
        serve_ours(store, Path(folder)) as consumer,
        Progress(*columns) as progress,
    ):
        stream = Stream(total, args.seed, sized_for)
        try:
            for checkpoint in checkpoints:
                point: dict[str, Any] = {"checkpoint": checkpoint}
                point["batch"] = load(consumer, stream, checkpoint, progress)
                point["generated_bytes_per_event"] = stream.bytes / max(stream.taken, 1)
                started = time.perf_counter()
                analyze(store)
                point["vacuum_analyze_seconds"] = time.perf_counter() - started
                progress.console.print(f"{checkpoint:,}: loaded, reading")
                point["reads"] = reads(consumer, deployment.roots(stream.day))
                if args.search_without_index:
                    point["reads"].update(search_without_index(consumer, store))
                point["sizes"] = sizes(store)
                point["single"] = single_events(consumer, stream)
                pruned_through += 1
                point["prune"] = prune_one_day(consumer, stream, pruned_through)
                point["day"] = stream.day
                point["machine"] = _machine()
                progress.console.print_json(json.dumps(point))
                result["checkpoints"].append(point)
                _save(result, args.out)  # a run of hours keeps what it measured if it is stopped later
                if stream.done:
                    break
        finally:
            stream.close()
    return result


def table(result: dict[str, Any]) -> Any:
    from rich.table import Table

    shown = Table(title=f"A year's scale: {result['dags']:,} DAGs, seed {result['seed']}")
    shown.add_column("measure")
    points = result["checkpoints"]
    for point in points:
        shown.add_column(f"{point['checkpoint']:,}", justify="right")
    rows = [
        ("batch answered ev/s", lambda p: f"{p['batch']['answered_events_per_s']:,.0f}"),
        ("batch applied ev/s", lambda p: f"{p['batch']['applied_events_per_s']:,.0f}"),
        ("single 4 clients ev/s; p99 ms", lambda p: f"{p['single']['events_per_s']:,.0f}; {p['single']['p99_ms']:.0f}"),
        ("walk d10 p50/p95 ms", lambda p: f"{p['reads']['walk_p50_ms']:.0f}/{p['reads']['walk_p95_ms']:.0f}"),
        ("datasets?limit=100 p50 ms", lambda p: f"{p['reads']['datasets_p50_ms']:.1f}"),
        ("namespaces p50 ms", lambda p: f"{p['reads']['namespaces_p50_ms']:.1f}"),
        ("search p50 ms (hits)", lambda p: f"{p['reads']['search_p50_ms']:.1f} ({p['reads']['search_total']:,})"),
        ("search no index p50 ms", lambda p: f"{p['reads'].get('search_no_index_p50_ms', float('nan')):.1f}"),
        ("prune 1 day s (events)", lambda p: f"{p['prune']['prune_seconds']:.2f} ({p['prune']['pruned_events']:,})"),
        ("ingest p99 ms during prune", lambda p: f"{p['prune']['ingest_p99_ms_during']:.0f}"),
        ("database MB", lambda p: f"{p['sizes']['database_bytes'] / 2**20:,.0f}"),
        ("bytes per event", lambda p: f"{p['sizes']['bytes_per_event']:,.0f}"),
        ("datasets; jobs", lambda p: f"{p['sizes']['datasets']:,}; {p['sizes']['jobs']:,}"),
    ]  # fmt: skip
    for label, cell in rows:
        shown.add_row(label, *(cell(point) for point in points))
    return shown


def main() -> int:
    from rich.console import Console

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=100_000, help="events in all (checkpoints up to it)")
    parser.add_argument(
        "--deployment-events",
        type=int,
        metavar="N",
        help="size the deployment for N events a year and load the first --events of its stream (default: --events;"
        " e.g. --events 1000000 --deployment-events 10000000: the 10M deployment's jobs and datasets within a month)",
    )
    parser.add_argument("--seed", type=int, default=41)
    parser.add_argument("--database", default="alp_year_scale", help="created fresh, dropped afterwards")
    parser.add_argument("--keep", action="store_true", help="keep the database afterwards")
    parser.add_argument("--search-without-index", action="store_true", help="also time search without its index")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "year_scale.json")
    parser.add_argument("--plan", action="store_true", help="print the deployment's size and event size, load nothing")
    parser.add_argument(
        "--listings-against",
        type=Path,
        metavar="CHECKOUT",
        help="load nothing: time the listings on copies of the kept --database, served by CHECKOUT and by this one",
    )
    args = parser.parse_args()
    console = Console()
    if args.listings_against is not None:
        compared = listings_against(args)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(compared, indent=2))
        console.print_json(json.dumps(compared))
        return 0
    if args.plan:
        deployment = Deployment(max(_stream_length(args.events), args.deployment_events or 0), args.seed)
        sample = [event for _, (_, event) in zip(range(20_000), deployment.stream(), strict=False)]
        size = statistics.mean(len(json.dumps(e, separators=(",", ":"))) for e in sample)
        plan = {"dags": len(deployment.dags), "jobs": deployment.jobs, "datasets": deployment.datasets}
        console.print({**plan, "mean_event_bytes": round(size)})
        return 0
    result = run(args)
    result["finished_at"] = datetime.now(timezone.utc).isoformat()
    _save(result, args.out)
    console.print(table(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
