"""The ``openlineage_export`` DAG under ``airflow dags test``: ships, exports, prunes; no lineage feedback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.airflow_run import dags_test, migrate
from support.consumer_server import ConsumerServer
from support.olschema import assert_valid_event
from support.outbox_helpers import outbox_jobs, run_pairs, sqlite_url

from airflow_lineage_provider.outbox import OutboxConfig, OutboxTransport
from airflow_lineage_provider.outbox.database import dispose_engines

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.airflow
def test_export_dag_ships_exports_and_emits_no_lineage_of_its_own(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path)
    outbox = OutboxTransport(OutboxConfig.from_dict({"url": url}))
    for event in run_pairs(15):
        outbox.emit(event)
    dispose_engines()
    home, dags = tmp_path / "home", tmp_path / "dags"
    dags.mkdir()
    (dags / "openlineage_export.py").symlink_to(REPO / "dags" / "openlineage_export.py")
    migrate(home)
    with ConsumerServer() as consumer:
        connection = {"conn_type": "openlineage", "host": "127.0.0.1", "port": consumer.port, "schema": "http",
                      "password": "dag-key", "extra": {"endpoint": "api/v1/lineage", "timeout": 5}}  # fmt: skip
        consumer.api_key = "dag-key"
        env = {
            "AIRFLOW_CONN_OPENLINEAGE_DEFAULT": json.dumps(connection),
            "AIRFLOW__LINEAGE_PROVIDER__OUTBOX_URL": url,
            "AIRFLOW__LINEAGE_PROVIDER__EXPORT_PATH": str(tmp_path / "files"),
            # Lineage of the DAG's own tasks would go into the same outbox.
            "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps({"type": "airflow_lineage_provider.outbox.OutboxTransport"}),
        }
        run = dags_test(home, dags, "openlineage_export", "2026-02-01", env=env)
        assert run.returncode == 0, run.output[-4000:]
        assert len(consumer.events) == 30
        for event in consumer.events:
            assert_valid_event(event)
        exported = [
            json.loads(line) for f in (tmp_path / "files").rglob("*.ndjson") for line in f.read_text().splitlines()
        ]
        assert len(exported) == 30
        assert outbox_jobs(url) == ["orders.load"] * 30, "the export DAG fed its own lineage into the outbox"

        # The same run with its lineage switched on: its task events do land in the outbox (through
        # [openlineage] transport), which the default keeps out.
        env["AIRFLOW__LINEAGE_PROVIDER__EXPORT_DAG_LINEAGE"] = "True"
        again = dags_test(home, dags, "openlineage_export", "2026-02-02", env=env)
        assert again.returncode == 0, again.output[-4000:]
    jobs = outbox_jobs(url)
    assert {"openlineage_export.ship", "openlineage_export.prune"} <= set(jobs), jobs


@pytest.mark.airflow
def test_ship_task_fails_when_the_consumer_stays_unreachable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_lineage_provider.outbox.dag_factory import ship_pending

    url = sqlite_url(tmp_path)
    outbox = OutboxTransport(OutboxConfig.from_dict({"url": url}))
    for event in run_pairs(2):
        outbox.emit(event)
    down = ConsumerServer()
    down.stop()
    monkeypatch.setenv("AIRFLOW_CONN_DOWN", json.dumps({"conn_type": "openlineage", "host": "127.0.0.1",
                                                        "port": down.port}))  # fmt: skip
    with pytest.raises(RuntimeError, match=r"stayed unreachable .* 4 events stay pending"):
        ship_pending(url, "down", time_budget=1.5, batch_size=10)
    with ConsumerServer() as up:
        monkeypatch.setenv("AIRFLOW_CONN_UP", json.dumps({"conn_type": "openlineage", "host": "127.0.0.1",
                                                          "port": up.port}))  # fmt: skip
        assert ship_pending(url, "up", time_budget=10, batch_size=10) == {"delivered": 4, "dead": 0, "pending": 0}


def test_factory_builds_dags_for_other_consumers_and_folders() -> None:
    from airflow_lineage_provider.outbox.dag_factory import build_export_dag

    only_files = build_export_dag("to_files", conn_id="", export_path="/data/lineage", schedule="@hourly")
    assert sorted(only_files.task_dict) == ["export_files", "prune"]
    assert (only_files.max_active_runs, only_files.catchup) == (1, False)
    default = build_export_dag()
    assert sorted(default.task_dict) == ["prune", "ship"]
    assert default.params["_openlineage_emission_policy"] == {"emit": False}
    with_lineage = build_export_dag("traced", emit_lineage=True)
    assert "_openlineage_emission_policy" not in with_lineage.params
