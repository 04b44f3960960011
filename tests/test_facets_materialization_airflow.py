"""The materialization facet on real Airflow runs: rows from real SQLite and PostgreSQL writes, rows
recorded by task code, the DAG run's data interval; through the stock listener and ``custom_run_facets``."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from support.airflow_run import DagRunResult
from support.environment import PG_URL, require_postgres
from support.facets_airflow import (
    CUSTOM_RUN_FACETS_ENV,
    assert_events_valid,
    run_dag,
    run_facets_of,
    task_events,
)

from airflow_lineage_provider.facets import INFORMATION_SUPPLY_CHAIN_KEY, MATERIALIZATION_KEY

pytestmark = pytest.mark.airflow

DAG_ID = "facets_materialization"
INTERVAL = ("2026-01-31T00:00:00+00:00", "2026-02-01T00:00:00+00:00")
LOGICAL_DATE = "2026-02-01T00:00:00+00:00"


@pytest.fixture(scope="module")
def sqlite_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("warehouse") / "warehouse.db"


@pytest.fixture(scope="module")
def sqlite_run(tmp_path_factory: pytest.TempPathFactory, sqlite_file: Path) -> DagRunResult:
    env = {
        **CUSTOM_RUN_FACETS_ENV,
        "AIRFLOW_CONN_FACETS_SQLITE": json.dumps({"conn_type": "sqlite", "host": str(sqlite_file)}),
        # Connections come from the environment: under `airflow dags test` the listener's forked child
        # cannot reach the in-process supervisor, so a metastore lookup there hangs until its timeout.
        "AIRFLOW_CONN_FACETS_BROKEN": json.dumps({"conn_type": "no-such-connection-type"}),
    }
    return run_dag(tmp_path_factory, "facets_materialization_dag.py", DAG_ID, env)


def materialization(event: dict[str, Any]) -> dict[str, Any] | None:
    return run_facets_of(event).get(MATERIALIZATION_KEY)


def test_every_event_validates_against_the_specs(sqlite_run: DagRunResult) -> None:
    assert_events_valid(sqlite_run)


def test_row_count_of_a_stock_sql_operator_comes_from_the_real_sqlite_write(
    sqlite_run: DagRunResult, sqlite_file: Path
) -> None:
    engine = sa.create_engine(f"sqlite:///{sqlite_file}")
    with engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT id, amount FROM orders ORDER BY id")).all()
    engine.dispose()
    assert [(r[0], float(r[1])) for r in rows] == [(1, 21.0), (2, 40.0)]  # the SQL really ran

    facet = materialization(task_events(sqlite_run, DAG_ID, "load_sqlite")["COMPLETE"])
    assert facet is not None
    assert facet["rowsWritten"] == 3 + 2  # INSERT and UPDATE; the DELETE and the SELECT are not rows written
    assert facet["outputs"] == [{"namespace": f"sqlite://{sqlite_file}", "name": "main.orders"}]


def test_facet_carries_the_dag_runs_data_interval_and_logical_date(sqlite_run: DagRunResult) -> None:
    complete = task_events(sqlite_run, DAG_ID, "load_sqlite")["COMPLETE"]
    facet = materialization(complete)
    assert (facet["dataIntervalStart"], facet["dataIntervalEnd"]) == INTERVAL
    assert facet["logicalDate"] == LOGICAL_DATE
    nominal = run_facets_of(complete)["nominalTime"]  # the stock listener's view of the same interval
    assert (nominal["nominalStartTime"], nominal["nominalEndTime"]) == INTERVAL


def test_rows_recorded_by_task_code_add_up(sqlite_run: DagRunResult) -> None:
    facet = materialization(task_events(sqlite_run, DAG_ID, "export_in_batches")["COMPLETE"])
    assert facet["rowsWritten"] == 4 + 6
    assert facet["outputs"] == [{"namespace": "file", "name": "/srv/exports/orders.csv"}]


def test_each_mapped_task_instance_reports_its_own_rows(sqlite_run: DagRunResult) -> None:
    completes = [e for e in sqlite_run.of_job(f"{DAG_ID}.export_part") if e["eventType"] == "COMPLETE"]
    by_index = {run_facets_of(e)["airflow"]["taskInstance"]["map_index"]: materialization(e) for e in completes}
    assert {index: facet["rowsWritten"] for index, facet in by_index.items()} == {0: 10, 1: 20}


def test_facet_without_a_known_row_count_omits_it(sqlite_run: DagRunResult) -> None:
    facet = materialization(task_events(sqlite_run, DAG_ID, "without_row_count")["COMPLETE"])
    assert facet is not None
    assert "rowsWritten" not in facet
    assert facet["outputs"] == [{"namespace": "file", "name": "/srv/exports/report.csv"}]


def test_tasks_without_outputs_get_no_materialization_facet(sqlite_run: DagRunResult) -> None:
    events = task_events(sqlite_run, DAG_ID, "without_outputs")
    assert set(events) == {"START", "COMPLETE"}
    assert materialization(events["COMPLETE"]) is None


def test_only_complete_events_of_successful_tasks_carry_the_facet(sqlite_run: DagRunResult) -> None:
    failing = task_events(sqlite_run, DAG_ID, "failing_with_outputs")
    assert set(failing) == {"START", "FAIL"}
    assert materialization(failing["FAIL"]) is None
    for event in sqlite_run.events:
        if event["eventType"] != "COMPLETE":
            assert materialization(event) is None, event["job"]["name"]


def test_misused_row_count_is_logged_and_ignored_and_the_task_succeeds(sqlite_run: DagRunResult) -> None:
    events = task_events(sqlite_run, DAG_ID, "misuses_the_row_count")
    assert set(events) == {"START", "COMPLETE"}
    assert materialization(events["COMPLETE"])["rowsWritten"] == 2
    assert "rows written -5 must be a whole number of rows, 0 or more" in sqlite_run.output


def test_failing_lineage_lookups_leave_the_task_and_the_other_facets_alone(sqlite_run: DagRunResult) -> None:
    events = task_events(sqlite_run, DAG_ID, "unreachable_sql")
    assert set(events) == {"START", "COMPLETE"}
    facets = run_facets_of(events["COMPLETE"])
    assert facets[INFORMATION_SUPPLY_CHAIN_KEY]["iscQualifiedName"] == "InformationSupplyChain::sales-orders"
    outputs = materialization(events["COMPLETE"])["outputs"]
    assert {"namespace": "file", "name": "/srv/exports/report.csv"} in outputs
    assert "could not get the database hook of task 'unreachable_sql'" in sqlite_run.output


@pytest.fixture(scope="module")
def pg_schema() -> Iterator[str]:
    require_postgres()
    engine = sa.create_engine(PG_URL)
    schema = f"alp_facets_{uuid.uuid4().hex[:8]}"
    with engine.begin() as conn:
        conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
    yield schema
    with engine.begin() as conn:
        conn.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
    engine.dispose()


@pytest.fixture(scope="module")
def postgres_run(tmp_path_factory: pytest.TempPathFactory, pg_schema: str) -> DagRunResult:
    url = sa.engine.make_url(PG_URL)
    env = {
        **CUSTOM_RUN_FACETS_ENV,
        "FACETS_PG_SCHEMA": pg_schema,
        "AIRFLOW_CONN_FACETS_PG": json.dumps(
            {
                "conn_type": "postgres",
                "host": url.host,
                "port": url.port or 5432,
                "login": url.username,
                "password": url.password,
                "schema": url.database,
            }
        ),
    }
    return run_dag(tmp_path_factory, "facets_postgres_dag.py", "facets_postgres", env)


@pytest.mark.postgres
def test_row_count_of_a_stock_sql_operator_comes_from_the_real_postgres_write(
    postgres_run: DagRunResult, pg_schema: str
) -> None:
    assert_events_valid(postgres_run)
    engine = sa.create_engine(PG_URL)
    with engine.connect() as conn:
        remaining = conn.execute(
            sa.text(f"SELECT count(*), count(*) FILTER (WHERE amount = 0) FROM {pg_schema}.orders")
        )
        assert tuple(remaining.one()) == (35, 10)  # the SQL really ran
    engine.dispose()

    complete = task_events(postgres_run, "facets_postgres", "load_postgres")["COMPLETE"]
    facet = materialization(complete)
    assert facet["rowsWritten"] == 40 + 10  # INSERT and UPDATE; the DELETE and the SELECT are not rows written
    # Named exactly as the stock SQL operator names the event's outputs.
    assert facet["outputs"] == [{"namespace": o["namespace"], "name": o["name"]} for o in complete["outputs"]]
    url = sa.engine.make_url(PG_URL)
    expected = {"namespace": f"postgres://{url.host}:{url.port or 5432}", "name": f"{url.database}.{pg_schema}.orders"}
    assert facet["outputs"] == [expected]
    assert (facet["dataIntervalStart"], facet["dataIntervalEnd"]) == ("2026-01-31T23:00:00+00:00", LOGICAL_DATE)
