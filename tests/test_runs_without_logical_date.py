"""Runs without a logical date — Airflow 3's default for runs triggered from the UI or the REST API, and for
asset-triggered runs — render templated declared names (``orders_{{ ds_nodash }}``) from the run's ``run_after``.

Real runs: ``dag.test(logical_date=None)`` in a subprocess with its own AIRFLOW_HOME, the stock listener on and
the file transport, on the example DAG ``example_task_lineage`` (a ``LineageMixin`` operator whose own
``target`` is the same template, and a mapped ``@task.lineage`` reading it). The REST API path is covered by
``test_deployment_airflow.py``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from support.airflow_run import VENV_BIN, airflow_env
from support.capture import file_transport_env, read_events
from support.environment import PRISTINE_DB, require_shared
from support.olschema import STOCK_PROVIDER_FACETS, assert_valid_event

from airflow_lineage_provider.name_templates import RUN_DATE_MACROS, fill_run_dates

pytestmark = pytest.mark.airflow

DAGS = Path(__file__).resolve().parents[1] / "dags"
LOG_LINE = "has no logical date; ds, ds_nodash, ts, ts_nodash, ts_nodash_with_tz render from its run_after"

_RUN = """
import json, pathlib, sys
import pendulum
from airflow_lineage_provider.airflow_compat import DagBag
dag = DagBag(dag_folder=sys.argv[1]).get_dag(sys.argv[2])
run = dag.test(logical_date=None if sys.argv[3] == "none" else pendulum.parse(sys.argv[3]))
# The summary goes to a file of its own: a log line on stdout can share a line with a print.
pathlib.Path(sys.argv[4]).write_text(json.dumps({"state": str(run.state), "run_after": run.run_after.isoformat(),
                           "logical_date": run.logical_date.isoformat() if run.logical_date else None}))
"""


@dataclass
class Run:
    state: str
    run_after: str
    logical_date: str | None
    output: str
    events: list[dict[str, Any]]

    def outputs(self, job: str) -> set[str]:
        return {d["name"] for e in self.events if e["job"]["name"] == job for d in e.get("outputs", [])}

    def inputs(self, job: str) -> set[str]:
        return {d["name"] for e in self.events if e["job"]["name"] == job for d in e.get("inputs", [])}


def _run(home: Path, logical_date: str) -> Run:
    events_file = home / f"events-{logical_date}.ndjson"
    summary_file = home / f"run-{logical_date}.json"
    extra = {
        **file_transport_env(events_file),
        "AIRFLOW_CONN_LINEAGE_DEMO_WAREHOUSE": f"sqlite:///{home / 'warehouse.db'}",
        "LINEAGE_DEMO_DIR": str(home),
    }
    result = subprocess.run(
        [sys.executable, "-c", _RUN, str(DAGS), "example_task_lineage", logical_date, str(summary_file)],
        env=airflow_env(home, DAGS, extra),
        cwd=home,
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    summary = json.loads(summary_file.read_text())
    return Run(summary["state"], summary["run_after"], summary["logical_date"], output, read_events(events_file))


@pytest.fixture(scope="module")
def home(airflow_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A metadata database holding the example DAGs serialized (``dag.test`` needs them there before 3.2)."""
    home = tmp_path_factory.mktemp("no-logical-date")
    shutil.copy(airflow_home / PRISTINE_DB, home / "airflow.db")
    reserialized = subprocess.run(
        [str(VENV_BIN / "airflow"), "dags", "reserialize"],
        env=airflow_env(home, DAGS),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert reserialized.returncode == 0, (reserialized.stdout + reserialized.stderr)[-4000:]
    return home


@pytest.fixture(scope="module")
def without_logical_date(home: Path) -> Run:
    return _run(home, "none")


def test_a_run_without_a_logical_date_succeeds(without_logical_date: Run) -> None:
    assert without_logical_date.logical_date is None
    assert without_logical_date.state.endswith("success"), without_logical_date.output[-4000:]
    assert "is undefined" not in without_logical_date.output


def test_templated_declared_names_render_from_the_runs_run_after(without_logical_date: Run) -> None:
    day = datetime.fromisoformat(without_logical_date.run_after).astimezone(timezone.utc).strftime("%Y%m%d")
    partition = f"main.orders_{day}"
    assert without_logical_date.outputs("example_task_lineage.partition_orders") == {partition}
    assert without_logical_date.inputs("example_task_lineage.score_customers") == {partition}
    require_shared()
    for event in without_logical_date.events:
        assert_valid_event(event, ignore=STOCK_PROVIDER_FACETS)


def test_one_log_line_per_task_says_what_the_dates_come_from(without_logical_date: Run) -> None:
    lines = [line for line in without_logical_date.output.splitlines() if LOG_LINE in line]
    # stage_orders, partition_orders and the two mapped score_customers: once each, naming run_after's value
    assert len(lines) == 4, "\n".join(lines)
    assert all(without_logical_date.run_after[:19] in line for line in lines)


def test_a_run_with_a_logical_date_keeps_airflows_own_dates(home: Path) -> None:
    run = _run(home, "2026-02-01")
    assert run.state.endswith("success"), run.output[-4000:]
    assert run.outputs("example_task_lineage.partition_orders") == {"main.orders_20260201"}
    assert LOG_LINE not in run.output


@dataclass(frozen=True)
class _DagRun:
    """What ``fill_run_dates`` reads of the context's ``dag_run`` (Airflow's ``DagRunProtocol``)."""

    dag_id: str = "sales"
    run_id: str = "manual__1"
    run_after: datetime | None = datetime(2026, 3, 4, 5, 6, 7, tzinfo=timezone.utc)
    data_interval_start: datetime | None = None


def test_the_data_interval_start_is_preferred_to_run_after_when_the_run_has_one() -> None:
    context: dict[str, Any] = {"dag_run": _DagRun(data_interval_start=datetime(2026, 3, 1, tzinfo=timezone.utc))}
    assert fill_run_dates(context) == "data_interval_start"
    assert (context["ds"], context["ds_nodash"], context["ts_nodash"]) == ("2026-03-01", "20260301", "20260301T000000")
    assert context["ts"] == "2026-03-01T00:00:00+00:00"
    assert context["ts_nodash_with_tz"] == "20260301T000000+0000"
    assert "logical_date" not in context  # never invented


def test_nothing_is_supplied_to_a_run_with_a_logical_date_or_replaced_once_present() -> None:
    with_date: dict[str, Any] = {"logical_date": datetime(2026, 1, 1, tzinfo=timezone.utc), "dag_run": _DagRun()}
    assert fill_run_dates(with_date) is None
    assert not set(RUN_DATE_MACROS) & set(with_date)
    context: dict[str, Any] = {"dag_run": _DagRun(), "ds": "given"}
    assert fill_run_dates(context) == "run_after"
    assert context["ds"] == "given" and context["ds_nodash"] == "20260304"
    assert fill_run_dates(context) is None  # already filled: no second log line
