"""@task.lineage and LineageMixin under real Airflow runs: one event stream per task, whichever way it flows."""

from __future__ import annotations

import uuid
from collections import defaultdict
from pathlib import Path

import pytest
import sqlalchemy as sa
from support.airflow_run import dags_test, listener_off_home
from support.environment import PG_URL, TEST_DAGS, require_postgres, require_shared
from support.olschema import STOCK_PROVIDER_FACETS, assert_valid_event

pytestmark = pytest.mark.airflow

TASKS = {
    "seed",
    "totals",
    "check",
    "mapped",
    "mapped_renamed",
    "flaky",
    "bad_template",
    "unreachable_schema_source",
    "bad_dataset",
    "copy_rows",
}
TERMINAL = {"COMPLETE", "FAIL", "ABORT"}


@pytest.fixture(scope="module")
def setting(tmp_path_factory: pytest.TempPathFactory):
    """Connections for the test DAGs: a SQLite warehouse, the PostgreSQL test database, a dead port."""
    require_postgres()
    root = tmp_path_factory.mktemp("task-lineage")
    schema = f"alp_{uuid.uuid4().hex[:10]}"
    engine = sa.create_engine(PG_URL)
    with engine.begin() as conn:
        conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
        conn.exec_driver_sql(f"CREATE TABLE {schema}.pg_source (id INTEGER, amount NUMERIC(10, 2))")
        conn.exec_driver_sql(f"CREATE TABLE {schema}.pg_target (id INTEGER, amount NUMERIC(10, 2))")
        conn.exec_driver_sql(f"INSERT INTO {schema}.pg_source VALUES (1, 2.50)")
        conn.exec_driver_sql(f"CREATE TABLE {schema}.pg_audit (loaded_at TIMESTAMP, row_count BIGINT)")
    env = {
        "AIRFLOW_CONN_LINEAGE_TEST_WAREHOUSE": f"sqlite:///{root / 'warehouse.db'}",
        "AIRFLOW_CONN_LINEAGE_TEST_PG": "postgres://postgres@127.0.0.1:5432/test",
        "AIRFLOW_CONN_LINEAGE_TEST_UNREACHABLE": "postgres://postgres@127.0.0.1:1/test",
        "LINEAGE_TEST_PG_SCHEMA": schema,
    }
    yield root, env, schema
    with engine.begin() as conn:
        conn.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
    engine.dispose()


@pytest.fixture(scope="module")
def listener_on(airflow_home: Path, setting):
    """The stock listener active, writing to the file transport."""
    root, env, _ = setting
    runs = {}
    for dag_id in ("lineage_tasks", "lineage_sql", "lineage_failure"):
        runs[dag_id] = dags_test(airflow_home, TEST_DAGS, dag_id, events_file=root / f"on-{dag_id}.ndjson", env=env)
    assert runs["lineage_tasks"].returncode == 0, runs["lineage_tasks"].output[-4000:]
    return runs


@pytest.fixture(scope="module")
def listener_off(tmp_path_factory: pytest.TempPathFactory, setting):
    """OpenLineage not configured for Airflow: openlineage-python's own openlineage.yml (in the working
    directory) is the only configuration, so the tasks emit their events themselves."""
    _, env, _ = setting
    home = tmp_path_factory.mktemp("airflow-home-off")
    events_file = listener_off_home(home)
    runs = {}
    for dag_id in ("lineage_tasks", "lineage_failure"):
        result = dags_test(home, TEST_DAGS, dag_id, env=env, cwd=home)
        result.events = [e for e in _read(events_file) if e["job"]["name"].split(".")[0] == dag_id]
        runs[dag_id] = result
    return runs


def _read(path: Path):
    from support.capture import read_events

    return read_events(path)


def _runs_by_job(events):
    runs = defaultdict(list)
    for event in events:
        runs[(event["job"]["name"], event["run"]["runId"])].append(event["eventType"])
    return runs


def _task_events(result, task_id):
    return result.of_job(f"{result_dag(result)}.{task_id}")


def result_dag(result):
    return result.events[-1]["job"]["name"].split(".")[0]


def test_every_event_validates(listener_on, listener_off):
    require_shared()
    for runs in (listener_on, listener_off):
        for result in runs.values():
            for event in result.events:
                assert_valid_event(event, ignore=STOCK_PROVIDER_FACETS)


@pytest.mark.parametrize("mode", ["listener_on", "listener_off"])
def test_exactly_one_start_and_one_terminal_event_per_task_try(mode, request):
    result = request.getfixturevalue(mode)["lineage_tasks"]
    runs = _runs_by_job(result.events)
    task_runs = {key: types for key, types in runs.items() if key[0].count(".") == 1}
    for (job, run_id), types in task_runs.items():
        assert len(types) == 2 and types[0] == "START" and types[1] in TERMINAL, (job, run_id, types)
    # without the listener, only tasks with declared lineage emit: the plain @task `check` does not
    tasks = TASKS if mode == "listener_on" else TASKS - {"check"}
    assert {job for job, _ in task_runs} == {f"lineage_tasks.{t}" for t in tasks}
    per_job = defaultdict(int)
    for job, _ in task_runs:
        per_job[job] += 1
    assert per_job["lineage_tasks.mapped"] == 2  # one run per map index
    assert per_job["lineage_tasks.flaky"] == 2  # one run per try
    assert sum(per_job.values()) == len(tasks) + 2
    nested = {job for job, _ in runs if job.count(".") > 1}
    assert nested == {"lineage_tasks.totals.inner"}  # lineage_run inside the task: no other extra job


def test_listener_off_uses_the_same_run_ids_as_the_listener(listener_on, listener_off):
    def task_run_ids(result):
        return {
            (e["job"]["name"], e["eventType"], e["run"]["runId"])
            for e in result.events
            if e["job"]["name"].count(".") == 1
        }

    on, off = task_run_ids(listener_on["lineage_tasks"]), task_run_ids(listener_off["lineage_tasks"])
    assert off and off == {ids for ids in on if ids[0] != "lineage_tasks.check"}  # check: plain @task
    off_parent = listener_off["lineage_tasks"].of_job("lineage_tasks.seed")[0]["run"]["facets"]["parent"]
    on_parent = listener_on["lineage_tasks"].of_job("lineage_tasks.seed")[0]["run"]["facets"]["parent"]
    assert off_parent["run"]["runId"] == on_parent["run"]["runId"]
    assert off_parent["job"]["name"] == on_parent["job"]["name"] == "lineage_tasks"


@pytest.mark.parametrize("mode", ["listener_on", "listener_off"])
def test_templated_names_are_rendered_per_run(mode, request):
    result = request.getfixturevalue(mode)["lineage_tasks"]
    copy_complete = result.of_job("lineage_tasks.copy_rows")[-1]
    assert [d["name"] for d in copy_complete["outputs"]] == ["main.orders_20260201"]
    mapped = sorted(e["outputs"][0]["name"] for e in result.of_job("lineage_tasks.mapped") if e["eventType"] == "START")
    assert mapped == ["warehouse/part_0_20260201", "warehouse/part_1_20260201"]
    renamed = result.of_job("lineage_tasks.mapped_renamed")[0]
    assert renamed["outputs"][0]["name"] == "warehouse/part_0_20260201"


@pytest.mark.parametrize("mode", ["listener_on", "listener_off"])
def test_schemas_from_an_airflow_sqlite_connection_on_complete_only(mode, request, setting):
    root, _, _ = setting
    result = request.getfixturevalue(mode)["lineage_tasks"]
    start, complete = result.of_job("lineage_tasks.seed")
    assert start["outputs"][0]["namespace"] == f"sqlite://{root / 'warehouse.db'}"
    assert "schema" not in start["outputs"][0]["facets"]
    assert [f["name"] for f in complete["outputs"][0]["facets"]["schema"]["fields"]] == ["id", "customer_id", "amount"]
    copy_complete = result.of_job("lineage_tasks.copy_rows")[-1]
    assert [f["name"] for f in copy_complete["outputs"][0]["facets"]["schema"]["fields"]] == [
        "id",
        "customer_id",
        "amount",
    ]


def test_postgres_connection_and_the_operators_own_lineage_are_merged(listener_on, setting):
    _, _, schema = setting
    result = listener_on["lineage_sql"]
    assert result.returncode == 0, result.output[-3000:]
    complete = result.of_job("lineage_sql.pg_sql")[-1]
    assert complete["eventType"] == "COMPLETE"
    assert [(d["namespace"], d["name"]) for d in complete["inputs"]] == [
        ("postgres://127.0.0.1:5432", f"test.{schema}.pg_source")
    ]
    outputs = {(d["namespace"], d["name"]): d for d in complete["outputs"]}
    audit = ("postgres://127.0.0.1:5432", f"test.{schema}.pg_audit")
    assert set(outputs) == {
        ("postgres://127.0.0.1:5432", f"test.{schema}.pg_target"),
        ("file", "/exports/pg_target.csv"),
        audit,
    }
    audit_fields = outputs[audit]["facets"]["schema"]["fields"]
    assert [(f["name"], f["type"]) for f in audit_fields] == [
        ("loaded_at", "TIMESTAMP WITHOUT TIME ZONE"),
        ("row_count", "BIGINT"),
    ]
    target_fields = outputs[("postgres://127.0.0.1:5432", f"test.{schema}.pg_target")]["facets"]["schema"]["fields"]
    assert [f["name"] for f in target_fields] == ["id", "amount"]


@pytest.mark.parametrize("mode", ["listener_on", "listener_off"])
def test_retries_get_a_new_run_id_per_try(mode, request):
    flaky = request.getfixturevalue(mode)["lineage_tasks"].of_job("lineage_tasks.flaky")
    runs = _runs_by_job(flaky)
    assert sorted(runs.values()) == [["START", "COMPLETE"], ["START", "FAIL"]]


@pytest.mark.parametrize("mode", ["listener_on", "listener_off"])
def test_lineage_run_inside_the_task_nests_under_its_run(mode, request):
    result = request.getfixturevalue(mode)["lineage_tasks"]
    (task_run,) = {e["run"]["runId"] for e in result.of_job("lineage_tasks.totals")}
    for event in result.of_job("lineage_tasks.totals.inner"):
        assert event["run"]["facets"]["parent"]["run"]["runId"] == task_run


@pytest.mark.parametrize("mode", ["listener_on", "listener_off"])
def test_xcom_and_multiple_outputs_work_as_with_task(mode, request):
    # `check` asserts the values it pulled from `totals` (multiple_outputs=True) and `seed`
    result = request.getfixturevalue(mode)["lineage_tasks"]
    assert result.returncode == 0, result.output[-3000:]
    assert "task_id=check" in result.output and "dag_id=lineage_tasks" in result.output
    assert "state=success" in result.output


@pytest.mark.parametrize("mode", ["listener_on", "listener_off"])
def test_lineage_problems_never_fail_the_task(mode, request):
    result = request.getfixturevalue(mode)["lineage_tasks"]
    for task_id in ("bad_template", "unreachable_schema_source", "bad_dataset"):
        assert [e["eventType"] for e in result.of_job(f"lineage_tasks.{task_id}")] == ["START", "COMPLETE"]
    bad_template = result.of_job("lineage_tasks.bad_template")[-1]
    assert [d["name"] for d in bad_template["outputs"]] == ["warehouse/still_declared"]
    assert (
        "entry 'warehouse/{{ no_such_variable.attribute }}' of task 'bad_template' could not be rendered"
        in result.output
    )
    unreachable = result.of_job("lineage_tasks.unreachable_schema_source")[-1]
    assert unreachable["inputs"][0]["namespace"] == "postgres://127.0.0.1:1"
    assert "schema" not in unreachable["inputs"][0]["facets"]
    assert [d["name"] for d in result.of_job("lineage_tasks.bad_dataset")[0]["inputs"]] == ["warehouse/orders"]


@pytest.mark.parametrize("mode", ["listener_on", "listener_off"])
def test_a_failing_task_fails_as_without_lineage_with_a_fail_event(mode, request):
    result = request.getfixturevalue(mode)["lineage_failure"]
    assert "ValueError: bad input row 7" in result.output
    assert "state=failed" in result.output
    start, fail = result.of_job("lineage_failure.explode")
    assert (start["eventType"], fail["eventType"]) == ("START", "FAIL")
    assert "bad input row 7" in fail["run"]["facets"]["errorMessage"]["message"]
    assert [d["name"] for d in fail["outputs"]] == ["main.never_written"]
    assert [f["name"] for f in fail["inputs"][0]["facets"]["schema"]["fields"]] == ["id", "customer_id", "amount"]


def test_disabled_openlineage_emits_nothing(airflow_home: Path, setting, tmp_path: Path):
    _, env, _ = setting
    result = dags_test(
        airflow_home,
        TEST_DAGS,
        "lineage_failure",
        events_file=tmp_path / "events.ndjson",
        env={**env, "AIRFLOW__OPENLINEAGE__DISABLED": "True"},
        logical_date="2026-03-01",
    )
    assert "ValueError: bad input row 7" in result.output
    assert result.events == []


@pytest.mark.parametrize("mode", ["listener_on", "listener_off"])
def test_tasks_carry_egeria_and_materialization_facets_without_custom_run_facets(mode, request):
    result = request.getfixturevalue(mode)["lineage_tasks"]
    start, complete = result.of_job("lineage_tasks.seed")
    for event in (start, complete):
        assert event["run"]["facets"]["egeria_informationSupplyChain"]["iscQualifiedName"] == (
            "InformationSupplyChain::orders"
        )
    assert "airflowLineageProvider_materialization" not in start["run"]["facets"]
    facet = complete["run"]["facets"]["airflowLineageProvider_materialization"]
    assert facet["rowsWritten"] == 2
    assert [(o["namespace"], o["name"]) for o in facet["outputs"]] == [
        (complete["outputs"][0]["namespace"], "main.orders")
    ]
    assert facet["logicalDate"].startswith("2026-02-01T00:00:00")
    # a task without outputs gets no materialization facet
    assert (
        "airflowLineageProvider_materialization" not in result.of_job("lineage_tasks.bad_dataset")[-1]["run"]["facets"]
    )
