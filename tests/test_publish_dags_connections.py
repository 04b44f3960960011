"""``airflow-lineage publish-dags`` where Airflow's CLI runs: connections stored in the metadata database (added
with ``airflow connections add``, no ``AIRFLOW_CONN_*``) are found as ``airflow connections get`` finds them —
the metadata database's own and the warehouse's that names the declared datasets — and every failure is one line
and exit code 2. A real SQLite metadata database, DAGs serialized by ``airflow dags reserialize``, the command run
as a subprocess."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
import sqlalchemy as sa
from support.airflow_run import VENV_BIN, airflow_env
from support.environment import PRISTINE_DB, TEST_DAGS

from airflow_lineage_provider.outbox.tables import events as events_table

pytestmark = pytest.mark.airflow

SUMMARY = "DAG(s) published"


class Deployment:
    """An AIRFLOW_HOME whose connections live in its metadata database, driven through the real CLIs."""

    def __init__(self, root: Path, airflow_home: Path) -> None:
        self.root = root
        self.home, self.dags = root / "home", root / "dags"
        self.home.mkdir()
        self.dags.mkdir()
        shutil.copy(airflow_home / PRISTINE_DB, self.home / "airflow.db")
        (self.dags / "design_lineage_dag.py").symlink_to(TEST_DAGS / "design_lineage_dag.py")
        self.warehouse = root / "warehouse.db"
        self.outbox = f"sqlite:///{root / 'outbox.db'}"
        self.env = airflow_env(self.home, self.dags, {"AIRFLOW__LINEAGE_PROVIDER__OUTBOX_URL": self.outbox})

    def airflow(self, *args: str) -> None:
        result = subprocess.run(
            [str(VENV_BIN / "airflow"), *args], env=self.env, capture_output=True, text=True, timeout=300
        )
        assert result.returncode == 0, f"airflow {args} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"

    def publish(self, *args: str, conn_id: str | None = None) -> subprocess.CompletedProcess[str]:
        env = dict(self.env)
        if conn_id is not None:
            env["AIRFLOW__LINEAGE_PROVIDER__PUBLISH_METADATA_CONN_ID"] = conn_id
        command = [str(VENV_BIN / "airflow-lineage"), "publish-dags", *args]
        return subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)

    def last_events(self) -> dict[str, dict[str, Any]]:
        """The latest event of every job in the outbox."""
        engine = sa.create_engine(self.outbox)
        try:
            with engine.connect() as conn:
                payloads = conn.execute(sa.select(events_table.c.payload).order_by(events_table.c.id)).scalars()
                return {event["job"]["name"]: event for event in map(json.loads, payloads)}
        finally:
            engine.dispose()


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory, airflow_home: Path) -> Deployment:
    deployment = Deployment(tmp_path_factory.mktemp("publish-connections"), airflow_home)
    deployment.airflow("connections", "add", "design_warehouse", "--conn-uri", f"sqlite:///{deployment.warehouse}")
    metadata = f"sqlite:///{deployment.home / 'airflow.db'}"
    deployment.airflow("connections", "add", "airflow_metadata_readonly", "--conn-uri", metadata)
    # A metadata database connection that cannot be reached: nothing listens on port 9 of the loopback.
    unreachable = "postgres://reader:secret@127.0.0.1:9/airflow"
    deployment.airflow("connections", "add", "metadata_down", "--conn-uri", unreachable)
    deployment.airflow("dags", "reserialize")
    return deployment


def assert_published_by_the_warehouse_connection(
    deployment: Deployment, result: subprocess.CompletedProcess[str]
) -> None:
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert (result.stdout + result.stderr).count(SUMMARY) == 1, "the summary is printed once"
    assert result.stdout.strip().splitlines()[-1].startswith("2 DAG(s) published")
    jobs = deployment.last_events()
    warehouse = f"sqlite://{deployment.warehouse}"
    load = jobs["design_lineage.load_orders"]
    assert [(d["namespace"], d["name"]) for d in load["outputs"]] == [(warehouse, "main.orders")]
    export = jobs["design_lineage.export_orders"]
    assert [(d["namespace"], d["name"]) for d in export["inputs"]] == [(warehouse, "main.orders")]
    declared = [d for event in jobs.values() for d in event["inputs"] + event["outputs"]]
    assert not [d for d in declared if d["namespace"] == "default" or d["name"].startswith("warehouse/")]
    assert "could not be resolved" not in result.stderr + result.stdout


def test_the_metadata_connection_and_the_warehouse_connection_come_from_the_metadata_database(
    deployment: Deployment,
) -> None:
    result = deployment.publish("--all", conn_id="airflow_metadata_readonly")
    assert_published_by_the_warehouse_connection(deployment, result)


def test_without_a_metadata_connection_airflows_own_database_is_read(deployment: Deployment) -> None:
    result = deployment.publish("--all")
    assert_published_by_the_warehouse_connection(deployment, result)


def test_with_metadata_db_the_warehouse_connection_is_still_found(deployment: Deployment) -> None:
    result = deployment.publish("--all", "--metadata-db", f"sqlite:///{deployment.home / 'airflow.db'}")
    assert_published_by_the_warehouse_connection(deployment, result)


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, result.stdout[-3000:] + result.stderr[-3000:]
    assert "Traceback" not in result.stderr + result.stdout
    errors = [line for line in result.stderr.splitlines() if line.startswith("airflow-lineage: error: ")]
    assert len(errors) == 1, result.stderr[-3000:]
    assert SUMMARY not in result.stdout
    return errors[0]


def test_an_undefined_metadata_connection_is_one_line_and_exit_2(deployment: Deployment) -> None:
    error = one_line_error(deployment.publish(conn_id="no_such_connection"))
    assert "the Airflow connection 'no_such_connection' ([lineage_provider] publish_metadata_conn_id)" in error
    assert "isn't defined" in error and "airflow connections add no_such_connection" in error


def test_an_unreachable_metadata_database_is_one_line_and_exit_2(deployment: Deployment) -> None:
    error = one_line_error(deployment.publish(conn_id="metadata_down"))
    assert error.startswith("airflow-lineage: error: database error (")
    assert "secret" not in error  # the password is redacted


def test_a_malformed_outbox_url_is_one_line_and_exit_2(deployment: Deployment) -> None:
    error = one_line_error(deployment.publish("--outbox", "not a url"))
    assert "not a url" in error or "outbox" in error


_LOOKUPS = """
import sys
from airflow.sdk import BaseHook, Variable
from airflow_lineage_provider.design.airflow_lookups import as_airflow_cli, get_connection

def found(lookup):
    try:
        return "LOOKUP " + str(lookup())
    except Exception as error:
        return "LOOKUP " + type(error).__name__

print(found(lambda: BaseHook.get_connection("design_warehouse").get_uri()))
print(found(lambda: Variable.get("lineage_lookup_check")))
with as_airflow_cli():
    print(found(lambda: BaseHook.get_connection("design_warehouse").get_uri()))
    print(found(lambda: Variable.get("lineage_lookup_check")))
    print(found(lambda: get_connection("design_warehouse").get_uri()))
"""


def test_the_lookups_as_airflow_cli_reach_the_metadata_database_and_only_within_the_block(
    deployment: Deployment,
) -> None:
    """The contract ``as_airflow_cli`` relies on (Airflow's ``_AIRFLOW_PROCESS_CONTEXT``): outside Airflow's
    servers and tasks, the task SDK finds connections and variables of the metadata database only within it."""
    deployment.airflow("variables", "set", "lineage_lookup_check", "forty-two")
    command = [str(VENV_BIN / "python"), "-c", _LOOKUPS]
    result = subprocess.run(command, env=deployment.env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = [line.removeprefix("LOOKUP ") for line in result.stdout.splitlines() if line.startswith("LOOKUP ")]
    outside_connection, outside_variable, connection, variable, looked_up = lines
    assert outside_connection == "AirflowNotFoundException"  # not in the environment, not asked of the database
    assert outside_variable in {"KeyError", "AirflowNotFoundException", "AirflowRuntimeError"}  # by version
    assert str(deployment.warehouse) in unquote(connection) and connection == looked_up
    assert variable == "forty-two"
