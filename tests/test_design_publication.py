"""Design-time lineage on a real Airflow: the example and test DAGs reserialized into a SQLite metadata database
(``airflow dags reserialize``), then published with ``airflow-lineage publish-dags`` into an outbox."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from support.airflow_run import VENV_BIN, airflow_env
from support.environment import PRISTINE_DB, TEST_DAGS, require_shared
from support.olschema import assert_valid_event

from airflow_lineage_provider.outbox.tables import events as events_table

pytestmark = pytest.mark.airflow

REPO = Path(__file__).resolve().parents[1]
DESIGN_DAG = TEST_DAGS / "design_lineage_dag.py"
JOB_NAMESPACE = "default"  # the stock provider's [openlineage] namespace when unset
TEMPLATED = "airflowLineageProvider_templatedName"
SUPPLY_CHAIN = "airflowLineageProvider_informationSupplyChain"
DECLARED = "airflowLineageProvider_declaredLineage"


class Deployment:
    """An AIRFLOW_HOME with a DAGs folder, its metadata database and an outbox, driven through the real CLIs."""

    def __init__(self, root: Path, airflow_home: Path) -> None:
        self.home, self.dags = root / "home", root / "dags"
        self.home.mkdir()
        self.dags.mkdir()
        shutil.copy(airflow_home / PRISTINE_DB, self.home / "airflow.db")  # no other test's DAGs
        self.warehouse = root / "warehouse.db"
        self.outbox = f"sqlite:///{root / 'outbox.db'}"
        self.env = airflow_env(
            self.home,
            self.dags,
            {
                "AIRFLOW_CONN_DESIGN_WAREHOUSE": f"sqlite:///{self.warehouse}",
                "AIRFLOW__LINEAGE_PROVIDER__OUTBOX_URL": self.outbox,
                # Rewrite a changed DAG at once (by default Airflow waits 30 s after the last write).
                "AIRFLOW__CORE__MIN_SERIALIZED_DAG_UPDATE_INTERVAL": "0",
            },
        )
        self.seen = 0

    def run(self, *command: str) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(command, env=self.env, capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, f"{command} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
        return result

    def reserialize(self) -> None:
        self.run(str(VENV_BIN / "airflow"), "dags", "reserialize")

    def publish(self, *args: str) -> str:
        """``airflow-lineage publish-dags``; returns its summary line."""
        output = self.run(str(VENV_BIN / "airflow-lineage"), "publish-dags", *args).stdout
        return output.strip().splitlines()[-1]

    def new_events(self) -> list[dict[str, Any]]:
        """The events appended to the outbox since the last call."""
        engine = sa.create_engine(self.outbox)
        try:
            with engine.connect() as conn:
                rows = conn.execute(
                    sa.select(events_table.c.id, events_table.c.payload)
                    .where(events_table.c.id > self.seen)
                    .order_by(events_table.c.id)
                ).all()
        finally:
            engine.dispose()
        if rows:
            self.seen = rows[-1].id
        return [json.loads(row.payload) for row in rows]

    def dag_hashes(self) -> dict[str, str]:
        engine = sa.create_engine(f"sqlite:///{self.home / 'airflow.db'}")
        try:
            with engine.connect() as conn:
                return dict(conn.exec_driver_sql("SELECT dag_id, dag_hash FROM serialized_dag").all())
        finally:
            engine.dispose()


def by_job(events: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    jobs = {e["job"]["name"]: e for e in events}
    assert len(jobs) == len(events), "a job was published twice in one pass"
    return jobs


def datasets(event: dict[str, Any], kind: str) -> set[tuple[str, str]]:
    return {(d["namespace"], d["name"]) for d in event[kind]}


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory, airflow_home: Path) -> Deployment:
    deployment = Deployment(tmp_path_factory.mktemp("design"), airflow_home)
    for dag_file in [*(REPO / "dags").glob("*.py"), *TEST_DAGS.glob("*.py")]:
        (deployment.dags / dag_file.name).symlink_to(dag_file)
    deployment.reserialize()
    return deployment


@pytest.fixture(scope="module")
def first_pass(deployment: Deployment) -> tuple[str, dict[str, dict[str, Any]]]:
    summary = deployment.publish()
    return summary, by_job(deployment.new_events())


@pytest.fixture(scope="module")
def jobs(first_pass: tuple[str, dict[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    return first_pass[1]


def test_every_job_event_validates_against_the_specs_and_our_facet_schemas(jobs: dict[str, dict[str, Any]]) -> None:
    require_shared()
    assert len(jobs) > 40
    for event in jobs.values():
        assert "run" not in event and "eventType" not in event, "a JobEvent has no run"
        assert event["schemaURL"].endswith("#/$defs/JobEvent")
        assert_valid_event(event)  # every facet must have a known schema: none is ignored


def test_every_task_of_every_dag_gets_a_job_named_as_the_stock_listener_names_it(
    deployment: Deployment, jobs: dict[str, dict[str, Any]]
) -> None:
    hashes = deployment.dag_hashes()
    published_dags = {e["job"]["facets"][DECLARED]["dagId"] for e in jobs.values()}
    assert published_dags == set(hashes) - {"openlineage_export"}
    for name, event in jobs.items():
        declared = event["job"]["facets"][DECLARED]
        assert event["job"]["namespace"] == JOB_NAMESPACE
        assert declared["dagHash"] == hashes[declared["dagId"]]
        job_type = event["job"]["facets"]["jobType"]
        assert (job_type["processingType"], job_type["integration"]) == ("BATCH", "AIRFLOW")
        if "taskId" in declared:
            assert name == f"{declared['dagId']}.{declared['taskId']}"
            assert job_type["jobType"] == "TASK"
        else:
            assert name == declared["dagId"]
            assert job_type["jobType"] == "DAG"
    assert {
        "example_task_lineage.stage_orders",
        "example_task_lineage.partition_orders",
        "example_task_lineage.score_customers",
        "example_lineage_run",
    } <= set(jobs)


def test_a_dag_the_emission_policy_keeps_out_is_not_published(first_pass: tuple[str, Any]) -> None:
    summary, jobs = first_pass
    assert not [name for name in jobs if name.startswith("openlineage_export")]
    assert "1 excluded by the emission policy" in summary


def test_declared_datasets_are_named_by_their_connector_as_at_run_time(
    deployment: Deployment, jobs: dict[str, dict[str, Any]]
) -> None:
    warehouse = f"sqlite://{deployment.warehouse}"
    load = jobs["design_lineage.load_orders"]
    assert datasets(load, "inputs") == {("s3://raw-bucket", "orders.parquet")}
    assert datasets(load, "outputs") == {(warehouse, "main.orders")}
    export = jobs["design_lineage.export_orders"]  # a LineageMixin operator
    assert datasets(export, "inputs") == {(warehouse, "main.orders")}


def test_templated_names_are_published_as_patterns_with_the_facet(
    deployment: Deployment, jobs: dict[str, dict[str, Any]]
) -> None:
    warehouse = f"sqlite://{deployment.warehouse}"
    outputs = {(d["namespace"], d["name"]): d for d in jobs["design_lineage.partition_orders"]["outputs"]}
    assert set(outputs) == {(warehouse, "main.orders_{{ ds_nodash }}"), ("s3://exports", "orders/{{ ds }}.csv")}
    facet = outputs[(warehouse, "main.orders_{{ ds_nodash }}")]["facets"][TEMPLATED]
    assert facet["nameTemplate"] == "main.orders_{{ ds_nodash }}"
    assert facet["variables"] == ["ds_nodash"]
    assert re.fullmatch(facet["nameRegex"], "main.orders_20260201")
    assert not re.fullmatch(facet["nameRegex"], "main.ordersX20260201")
    # A template holding a dot is not cut apart by table naming (schema.table).
    (mapped,) = jobs["design_lineage.mapped_part"]["outputs"]
    assert (mapped["namespace"], mapped["name"]) == (warehouse, "main.part_{{ ti.map_index }}")
    assert mapped["facets"][TEMPLATED]["variables"] == ["ti"]
    # The example DAG's templated partition, from a LineageMixin operator and a mapped @task.lineage.
    example = jobs["example_task_lineage.score_customers"]["inputs"]
    assert [d["facets"][TEMPLATED]["nameTemplate"] for d in example] == [example[0]["name"]]
    assert example[0]["name"].endswith("orders_{{ ds_nodash }}")
    plain = [d for e in jobs.values() for d in e["inputs"] + e["outputs"] if "{{" not in d["name"]]
    assert plain and all(TEMPLATED not in d["facets"] for d in plain)


def test_static_sql_gives_tables_and_the_sql_facet_and_templated_sql_is_left_out(
    deployment: Deployment, jobs: dict[str, dict[str, Any]]
) -> None:
    warehouse = f"sqlite://{deployment.warehouse}"
    totals = jobs["design_lineage.totals"]
    assert datasets(totals, "inputs") == {(warehouse, "main.orders")}
    assert datasets(totals, "outputs") == {(warehouse, "main.totals")}
    assert totals["job"]["facets"]["sql"]["query"].startswith("INSERT INTO totals")
    daily = jobs["design_lineage.daily"]
    assert daily["inputs"] == daily["outputs"] == []
    assert "sql" not in daily["job"]["facets"]
    assert any("templated" in reason for reason in daily["job"]["facets"][DECLARED]["incomplete"])
    assert "incomplete" not in totals["job"]["facets"][DECLARED]


def test_inlets_outlets_and_the_assets_a_dag_is_scheduled_on(jobs: dict[str, dict[str, Any]]) -> None:
    report = jobs["design_lineage.report"]
    assert datasets(report, "inputs") == {("s3://reports", "templates.json")}
    assert datasets(report, "outputs") == {("s3://reports", "daily.csv")}
    dag_job = jobs["design_lineage"]
    assert datasets(dag_job, "inputs") == {("s3://raw-bucket", "orders.parquet")}
    assert dag_job["outputs"] == []


def test_job_facets_documentation_ownership_source_code_and_egeria(
    deployment: Deployment, jobs: dict[str, dict[str, Any]]
) -> None:
    dag_facets = jobs["design_lineage"]["job"]["facets"]
    assert dag_facets["documentation"]["description"] == "Loads the raw orders and reports on them."
    assert dag_facets["sourceCodeLocation"]["url"] == (deployment.dags / "design_lineage_dag.py").as_uri()
    assert dag_facets["sourceCodeLocation"]["path"] == "design_lineage_dag.py"
    assert dag_facets[SUPPLY_CHAIN]["iscQualifiedName"] == "InformationSupplyChain::orders"
    assert [t["key"] for t in dag_facets["tags"]["tags"]] == ["design"]
    load = jobs["design_lineage.load_orders"]["job"]["facets"]
    assert load["documentation"] == {
        **load["documentation"],
        "description": "Copies the raw orders into the warehouse.",
        "contentType": "text/markdown",
    }
    assert [o["name"] for o in load["ownership"]["owners"]] == ["analytics", "data-eng"]
    assert load[SUPPLY_CHAIN]["iscQualifiedName"] == "InformationSupplyChain::orders"
    export = jobs["design_lineage.export_orders"]["job"]["facets"]
    assert [o["name"] for o in export["ownership"]["owners"]] == ["exports-team"]
    assert export["documentation"]["description"] == "Exports a day of orders."
    partition = jobs["design_lineage.partition_orders"]["job"]["facets"]
    assert partition[SUPPLY_CHAIN]["iscQualifiedName"] == "InformationSupplyChain::finance"  # the task's own
    # A task without docs of its own takes the DAG's, as the stock listener does.
    assert jobs["design_lineage.totals"]["job"]["facets"]["documentation"] == dag_facets["documentation"]
    assert SUPPLY_CHAIN not in jobs["design_lineage_plain"]["job"]["facets"]
    egeria = jobs["facets_egeria"]["job"]["facets"][SUPPLY_CHAIN]
    assert egeria["governanceAction"]["processName"] == "SalesOrdersPipeline"
    assert SUPPLY_CHAIN not in jobs["facets_egeria.opted_out"]["job"]["facets"]


def test_a_second_pass_republishes_nothing_when_no_dag_changed(
    deployment: Deployment, first_pass: tuple[str, Any]
) -> None:
    hashes = deployment.dag_hashes()
    deployment.reserialize()  # parsing the same files again gives the same serialized versions
    assert deployment.dag_hashes() == hashes
    summary = deployment.publish()
    assert deployment.new_events() == []
    assert summary.startswith(f"0 DAG(s) published, {len(hashes)} unchanged")


def test_a_changed_dag_is_republished_and_a_removed_task_retired(
    deployment: Deployment, first_pass: tuple[str, Any]
) -> None:
    link = deployment.dags / DESIGN_DAG.name
    changed = DESIGN_DAG.read_text().replace('outputs=["warehouse/orders"]', 'outputs=["warehouse/orders_v2"]')
    changed = re.sub(r"\n    daily = SQLExecuteQueryOperator\(.*?\n    \)\n", "\n", changed, flags=re.DOTALL)
    changed = changed.replace(" >> daily >> report()", " >> report()")
    assert "daily = " not in changed
    link.unlink()
    link.write_text(changed)
    try:
        deployment.reserialize()
        summary = deployment.publish()
        events = deployment.new_events()
    finally:
        link.unlink()
        link.symlink_to(DESIGN_DAG)
    assert summary.startswith("1 DAG(s) published")
    jobs = by_job(events)
    assert {e["job"]["facets"][DECLARED]["dagId"] for e in events} == {"design_lineage"}
    assert datasets(jobs["design_lineage.load_orders"], "outputs") == {
        (f"sqlite://{deployment.warehouse}", "main.orders_v2")
    }
    retired = jobs["design_lineage.daily"]
    assert retired["job"]["facets"][DECLARED]["retired"] is True
    assert retired["inputs"] == retired["outputs"] == []
    assert_valid_event(retired)
    # Back to the original: the task is declared again.
    deployment.reserialize()
    deployment.publish("--dag-id", "design_lineage")
    again = by_job(deployment.new_events())
    assert "retired" not in again["design_lineage.daily"]["job"]["facets"][DECLARED]


def test_all_republishes_only_the_selected_dags_and_a_deleted_dag_is_retired(
    deployment: Deployment, first_pass: tuple[str, Any]
) -> None:
    summary = deployment.publish("--all", "--dag-id", "design_lineage_plain", "--dag-id", "parent_link")
    assert summary.startswith("2 DAG(s) published, 0 unchanged")
    assert {e["job"]["facets"][DECLARED]["dagId"] for e in deployment.new_events()} == {
        "design_lineage_plain",
        "parent_link",
    }
    (deployment.dags / "parent_link_dag.py").unlink()
    try:
        deployment.run(str(VENV_BIN / "airflow"), "dags", "delete", "parent_link", "--yes")
        summary = deployment.publish()
        retired = by_job(deployment.new_events())
    finally:  # the DAG back, published again, for the tests after this one
        (deployment.dags / "parent_link_dag.py").symlink_to(TEST_DAGS / "parent_link_dag.py")
        deployment.reserialize()
        deployment.publish("--dag-id", "parent_link")
        deployment.new_events()
    assert ", 1 retired;" in summary
    assert retired and all(e["job"]["facets"][DECLARED]["retired"] for e in retired.values())
    assert "parent_link" in retired and "parent_link.transform" in retired


def test_a_dag_whose_file_the_dag_processor_found_gone_is_retired(
    deployment: Deployment, first_pass: tuple[str, Any]
) -> None:
    # What the DAG processor does when a DAG file disappears: the DAG becomes stale (it stays in the database).
    (deployment.dags / "collect_lineage_dag.py").unlink()
    present = sorted(p.name for p in deployment.dags.glob("*.py"))
    mark_stale = (
        "import sys; from airflow.models.dag import DagModel; from airflow.utils.session import create_session\n"
        "with create_session() as session:\n"
        "    DagModel.deactivate_deleted_dags('dags-folder', sys.argv[1:], session=session)"
    )
    try:
        deployment.run(str(VENV_BIN / "python"), "-c", mark_stale, *present)
        summary = deployment.publish()
        retired = by_job(deployment.new_events())
    finally:
        (deployment.dags / "collect_lineage_dag.py").symlink_to(TEST_DAGS / "collect_lineage_dag.py")
    assert ", 1 retired;" in summary
    assert {e["job"]["facets"][DECLARED]["dagId"] for e in retired.values()} == {"collect_lineage_dag"}
    assert all(e["job"]["facets"][DECLARED]["retired"] for e in retired.values())
    deployment.reserialize()  # the file is back: the DAG is published again
    assert deployment.publish("--dag-id", "collect_lineage_dag").startswith("1 DAG(s) published")
    assert "retired" not in by_job(deployment.new_events())["collect_lineage_dag"]["job"]["facets"][DECLARED]


def test_an_unknown_dag_id_is_named_and_fails_the_command(deployment: Deployment, first_pass: tuple[str, Any]) -> None:
    command = [str(VENV_BIN / "airflow-lineage"), "publish-dags", "--dag-id", "no_such_dag", "--dag-id", "parent_link"]
    result = subprocess.run(command, env=deployment.env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 1
    assert "no DAG 'no_such_dag' in the metadata database" in result.stderr
    assert result.stdout.strip().splitlines()[-1].startswith("0 DAG(s) published, 1 unchanged")
    assert deployment.new_events() == []
