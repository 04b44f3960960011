"""The ``openlineage_export`` DAG's ``publish_dags`` task: design-time lineage through the outbox, shipped in
the same run, on a real Airflow (``airflow dags test``) with a real SQLite metadata database."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from support.airflow_run import VENV_BIN, airflow_env, dags_test
from support.consumer_server import ConsumerServer
from support.environment import PRISTINE_DB, TEST_DAGS
from support.olschema import assert_valid_event

from airflow_lineage_provider.design.publications import publications
from airflow_lineage_provider.outbox.tables import events as events_table

pytestmark = pytest.mark.airflow

REPO = Path(__file__).resolve().parents[1]
DECLARED = "airflowLineageProvider_declaredLineage"


def _outbox_payloads(url: str) -> list[dict[str, Any]]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(sa.select(events_table.c.payload).order_by(events_table.c.id)).scalars()
            return [json.loads(row) for row in rows]
    finally:
        engine.dispose()


def _published_hashes(url: str) -> dict[str, str]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return dict(conn.execute(sa.select(publications.c.dag_id, publications.c.dag_hash)).all())
    finally:
        engine.dispose()


@pytest.fixture
def export_home(tmp_path: Path, airflow_home: Path) -> tuple[Path, Path, dict[str, str]]:
    home, dags = tmp_path / "home", tmp_path / "dags"
    home.mkdir()
    dags.mkdir()
    shutil.copy(airflow_home / PRISTINE_DB, home / "airflow.db")  # no other test's DAGs
    (dags / "openlineage_export.py").symlink_to(REPO / "dags" / "openlineage_export.py")
    (dags / "design_lineage_dag.py").symlink_to(TEST_DAGS / "design_lineage_dag.py")
    env = {
        "AIRFLOW__LINEAGE_PROVIDER__OUTBOX_URL": f"sqlite:///{tmp_path / 'outbox.db'}",
        "AIRFLOW_CONN_DESIGN_WAREHOUSE": f"sqlite:///{tmp_path / 'warehouse.db'}",
        # The run's own task events go to the outbox too, where the export DAG's default keeps them out.
        "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps({"type": "airflow_lineage_provider.outbox.OutboxTransport"}),
    }
    reserialize = subprocess.run(
        [str(VENV_BIN / "airflow"), "dags", "reserialize"],
        env=airflow_env(home, dags, env),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert reserialize.returncode == 0, reserialize.stderr[-3000:]
    return home, dags, env


def test_the_export_dag_publishes_changed_dags_into_the_outbox_and_ships_them_in_the_same_run(
    export_home: tuple[Path, Path, dict[str, str]],
) -> None:
    home, dags, env = export_home
    outbox = env["AIRFLOW__LINEAGE_PROVIDER__OUTBOX_URL"]
    with ConsumerServer() as consumer:
        env["AIRFLOW_CONN_OPENLINEAGE_DEFAULT"] = json.dumps(
            {"conn_type": "openlineage", "host": "127.0.0.1", "port": consumer.port, "schema": "http",
             "extra": {"endpoint": "api/v1/lineage", "timeout": 5}}
        )  # fmt: skip
        run = dags_test(home, dags, "openlineage_export", "2026-02-01", env=env)
        assert run.returncode == 0, run.output[-4000:]
        shipped = list(consumer.events)
        again = dags_test(home, dags, "openlineage_export", "2026-02-02", env=env)
        assert again.returncode == 0, again.output[-4000:]
        shipped_again = consumer.events[len(shipped) :]

    in_outbox = _outbox_payloads(outbox)
    assert {e["job"]["name"] for e in in_outbox} >= {"design_lineage", "design_lineage.load_orders"}
    assert all("run" not in e for e in in_outbox), "only JobEvents: the export DAG's own tasks emit nothing"
    assert [e["job"]["name"] for e in shipped] == [e["job"]["name"] for e in in_outbox]
    for event in shipped:
        assert_valid_event(event)
    assert shipped_again == [], "nothing changed: the second run published (and shipped) nothing"
    assert set(_published_hashes(outbox)) == {"design_lineage", "design_lineage_plain", "openlineage_export"}


def test_the_publish_task_runs_before_shipping_and_shipping_runs_whatever_became_of_it() -> None:
    from airflow_lineage_provider.outbox.dag_factory import build_export_dag

    dag = build_export_dag("with_publication", export_path="/data/lineage", publish_dags=True)
    assert sorted(dag.task_dict) == ["export_files", "prune", "publish_dags", "ship"]
    assert dag.task_dict["publish_dags"].downstream_task_ids == {"ship", "export_files"}
    assert dag.task_dict["ship"].trigger_rule == dag.task_dict["export_files"].trigger_rule == "all_done"
    only_prune = build_export_dag("publish_only", conn_id="", export_path="", publish_dags=True)
    assert only_prune.task_dict["publish_dags"].downstream_task_ids == {"prune"}
    assert "publish_dags" not in build_export_dag("without").task_dict


def test_a_task_without_database_access_skips_with_the_reason_or_reads_through_the_connection(
    export_home: tuple[Path, Path, dict[str, str]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from airflow import settings
    from airflow.sdk.execution_time.supervisor import BlockedDBSession

    from airflow_lineage_provider.airflow_compat import AirflowSkipException
    from airflow_lineage_provider.outbox.dag_factory import publish_changed_dags

    home, _dags, env = export_home
    outbox = f"sqlite:///{tmp_path / 'task-outbox.db'}"
    monkeypatch.setenv("AIRFLOW_CONN_DESIGN_WAREHOUSE", env["AIRFLOW_CONN_DESIGN_WAREHOUSE"])
    # What Airflow 3's task supervisor does to a task process (block_orm_access): no ORM session, and the
    # configured database URL replaced by one that says access is blocked.
    monkeypatch.setattr(settings, "Session", BlockedDBSession)
    monkeypatch.setenv("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", "airflow-db-not-allowed:///")
    with pytest.raises(AirflowSkipException, match=r"publish_metadata_conn_id"):
        publish_changed_dags(outbox)
    monkeypatch.setenv("AIRFLOW_CONN_AIRFLOW_METADATA", f"sqlite:///{home / 'airflow.db'}")
    monkeypatch.setenv("AIRFLOW__LINEAGE_PROVIDER__PUBLISH_METADATA_CONN_ID", "airflow_metadata")
    result = publish_changed_dags(outbox)
    assert (result["published"], result["events"]) == (2, 10)  # 7 tasks + 1 DAG, 1 task + 1 DAG
    assert {e["job"]["facets"][DECLARED]["dagId"] for e in _outbox_payloads(outbox)} == {
        "design_lineage",
        "design_lineage_plain",
    }
