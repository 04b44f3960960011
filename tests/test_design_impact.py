"""``airflow-lineage impact``: what a DAG's declared outputs feed downstream, asked of a real consumer.

A real ``airflow-lineage serve`` on 127.0.0.1 (with a read and a write key) is fed run events in which the
datasets ``design_lineage`` (tests/dags/design_lineage_dag.py) declares as outputs are read by downstream jobs;
the real CLI then runs in a subprocess against the DAG file (and against the DAG id in a metadata database).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import requests
from support.airflow_run import VENV_BIN, airflow_env
from support.environment import PRISTINE_DB, TEST_DAGS
from support.feast_consumer import free_port
from support.served import Served, serve_consumer

pytestmark = pytest.mark.airflow

DESIGN_DAG = TEST_DAGS / "design_lineage_dag.py"
READ_KEY = "impact-read-key-5b1f"
WRITE_KEY = "impact-write-key-9c2e"
JOBS = "analytics"


@dataclass
class Setup:
    """The served consumer, the warehouse namespace the DAG's connector names, and the CLI's environment."""

    served: Served
    warehouse: str
    env: dict[str, str]
    root: Path

    def impact(self, *args: str, key: str | None = READ_KEY, target: str | Path = DESIGN_DAG) -> Any:
        env = dict(self.env)
        if key is not None:
            env["AIRFLOW_LINEAGE_API_KEY"] = key
        command = [str(VENV_BIN / "airflow-lineage"), "impact", str(target), "--consumer", self.served.url, *args]
        return subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)

    def report(self, *args: str, **kwargs: Any) -> dict[str, Any]:
        result = self.impact("--json", *args, **kwargs)
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)


def _event(job: str, inputs: list[tuple[str, str]], outputs: list[tuple[str, str]]) -> dict[str, Any]:
    return {
        "eventType": "COMPLETE",
        "eventTime": "2026-11-30T10:00:00.000Z",
        "producer": "https://example.com/impact-test",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        "run": {"runId": str(uuid.uuid4())},
        "job": {"namespace": JOBS, "name": job},
        "inputs": [{"namespace": ns, "name": name} for ns, name in inputs],
        "outputs": [{"namespace": ns, "name": name} for ns, name in outputs],
    }


def _job_event(job: str, inputs: list[tuple[str, str]], outputs: list[tuple[str, str]]) -> dict[str, Any]:
    event = _event(job, inputs, outputs)
    del event["run"], event["eventType"]
    event["schemaURL"] = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/JobEvent"
    return event


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    root = tmp_path_factory.mktemp("impact")
    warehouse_db = root / "warehouse.db"
    warehouse = f"sqlite://{warehouse_db}"
    keys = ("--key", f"reader:read:{READ_KEY}", "--key", f"producer:write:{WRITE_KEY}")
    with serve_consumer(f"sqlite:///{root / 'lineage.db'}", root / "consumer", *keys) as served:
        events = [
            # main.orders (load_orders' output) → summarize → main.orders_summary → publish → s3://dash summary
            _event("summarize", [(warehouse, "main.orders")], [(warehouse, "main.orders_summary")]),
            _event("publish", [(warehouse, "main.orders_summary")], [("s3://dash", "summary.json")]),
            # a rendering of partition_orders' templated output, and a name the pattern does not match
            _event("audit_partition", [(warehouse, "main.orders_20260201")], [(warehouse, "main.audit")]),
            _event("unrelated", [(warehouse, "main.ordersX20260201")], [(warehouse, "main.other")]),
            # a job only declared (a JobEvent, no run yet) that will read the export of a rendering of the pattern
            _job_event("planned_audit_report", [(warehouse, "main.audit")], [("s3://dash", "audit.pdf")]),
        ]
        response = requests.post(
            f"{served.url}/api/v1/lineage/batch", json=events, headers={"X-API-Key": WRITE_KEY}, timeout=30
        )
        assert response.status_code == 200, response.text
        home = root / "home"
        home.mkdir()
        env = airflow_env(home, root / "dags", {"AIRFLOW_CONN_DESIGN_WAREHOUSE": f"sqlite:///{warehouse_db}"})
        yield Setup(served, warehouse, env, root)


def _names(nodes: list[dict[str, Any]]) -> set[tuple[str, str]]:
    return {(n["namespace"], n["name"]) for n in nodes}


def _output(report: dict[str, Any], task_id: str, name: str) -> dict[str, Any]:
    (found,) = [o for o in report["outputs"] if o["taskId"] == task_id and o["name"] == name]
    return found


def test_a_dag_file_prints_the_jobs_and_datasets_its_outputs_feed(setup: Setup) -> None:
    result = setup.impact()
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert f"design_lineage.load_orders → {setup.warehouse} main.orders" in out
    for line in (f"job {JOBS} summarize", f"dataset {setup.warehouse} main.orders_summary", f"job {JOBS} publish"):
        assert line in out
    assert "dataset s3://dash summary.json" in out
    assert f"job {JOBS} planned_audit_report  hop 3 (declared only)" in out
    assert "design_lineage.totals" in out and "new: nothing downstream yet" in out
    summary = out.strip().splitlines()[-1]
    assert summary.startswith("7 declared output(s) of 6 task(s) in design_lineage, design_lineage_plain feed ")
    assert summary.endswith(
        "feed 4 job(s) and 4 dataset(s) downstream (depth 3); 2 new (nothing downstream yet), 4 templated pattern(s)"
    )
    assert READ_KEY not in out + result.stderr


def test_depth_bounds_the_walk_and_json_reports_every_output(setup: Setup) -> None:
    deep = setup.report()
    orders = _output(deep, "load_orders", "main.orders")
    assert orders["status"] == "known"
    assert [(j["name"], j["hops"]) for j in orders["jobs"]] == [("summarize", 1), ("publish", 3)]
    assert _names(orders["datasets"]) == {(setup.warehouse, "main.orders_summary"), ("s3://dash", "summary.json")}
    shallow = _output(setup.report("--depth", "1"), "load_orders", "main.orders")
    assert [j["name"] for j in shallow["jobs"]] == ["summarize"]
    assert _names(shallow["datasets"]) == {(setup.warehouse, "main.orders_summary")}
    assert deep["depth"] == 3 and deep["consumer"] == setup.served.url
    # Outputs the consumer has never seen are new, not errors.
    assert _output(deep, "totals", "main.totals")["status"] == "new"
    report = _output(deep, "report", "daily.csv")
    assert (report["status"], report["jobs"], report["datasets"]) == ("new", [], [])


def test_a_templated_output_is_a_pattern_matched_against_the_known_renderings(setup: Setup) -> None:
    report = setup.report("--task", "partition_orders")
    assert {o["taskId"] for o in report["outputs"]} == {"partition_orders"}
    partition = _output(report, "partition_orders", "main.orders_{{ ds_nodash }}")
    assert partition["status"] == "pattern"
    # Matched as a date (ds_nodash), so neither main.ordersX20260201 nor main.orders_summary is a rendering.
    assert partition["matched"] == ["main.orders_20260201"]
    assert partition["matchRegex"] == r"^main\.orders_(\d{8})$"
    jobs = [(j["name"], j["hops"], j["declaredOnly"]) for j in partition["jobs"]]
    assert jobs == [("audit_partition", 1, False), ("planned_audit_report", 3, True)]
    assert _names(partition["datasets"]) == {(setup.warehouse, "main.audit"), ("s3://dash", "audit.pdf")}
    csv = _output(report, "partition_orders", "orders/{{ ds }}.csv")
    assert (csv["status"], csv["matched"], csv["jobs"]) == ("pattern", [], [])


def test_a_key_file_is_read_and_a_missing_or_wrong_key_is_named(setup: Setup, tmp_path: Path) -> None:
    key_file = tmp_path / "key"
    key_file.write_text(READ_KEY + "\n")
    with_file = setup.impact("--json", "--key-file", str(key_file), key=None)
    assert with_file.returncode == 0, with_file.stderr
    assert _output(json.loads(with_file.stdout), "load_orders", "main.orders")["status"] == "known"
    missing = setup.impact(key=None)
    assert missing.returncode == 2
    assert "HTTP 401, no key was given" in missing.stderr
    assert "--key-file" in missing.stderr and "$AIRFLOW_LINEAGE_API_KEY" in missing.stderr
    wrong = setup.impact(key="not-the-key")
    assert wrong.returncode == 2 and "the key given was refused" in wrong.stderr
    assert "not-the-key" not in wrong.stdout + wrong.stderr


def test_an_unreachable_consumer_or_a_url_with_credentials_is_a_clear_error(setup: Setup) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    result = setup.impact("--consumer", url)  # the last --consumer wins
    assert result.returncode == 2
    assert f"cannot reach the consumer at {url}" in result.stderr and "airflow-lineage serve" in result.stderr
    embedded = setup.impact("--consumer", "http://user:secret@127.0.0.1:1")
    assert embedded.returncode == 2 and "must not hold credentials" in embedded.stderr
    assert "secret" not in embedded.stderr.replace("must not hold credentials", "")


def test_an_unknown_dag_file_or_task_is_named(setup: Setup) -> None:
    missing = setup.impact(target=setup.root / "no_such_dag.py")
    assert missing.returncode == 2 and "no DAG file" in missing.stderr and "no_such_dag.py" in missing.stderr
    task = setup.impact("--task", "no_such_task")
    assert task.returncode == 2 and "no task 'no_such_task'" in task.stderr


def test_a_deployed_dag_id_is_read_from_the_metadata_database(setup: Setup, airflow_home: Path) -> None:
    home, dags = setup.root / "deployed", setup.root / "deployed-dags"
    home.mkdir()
    dags.mkdir()
    shutil.copy(airflow_home / PRISTINE_DB, home / "airflow.db")
    (dags / DESIGN_DAG.name).symlink_to(DESIGN_DAG)
    env = airflow_env(home, dags, {"AIRFLOW_CONN_DESIGN_WAREHOUSE": setup.env["AIRFLOW_CONN_DESIGN_WAREHOUSE"]})
    reserialize = subprocess.run(
        [str(VENV_BIN / "airflow"), "dags", "reserialize"], env=env, capture_output=True, text=True, timeout=300
    )
    assert reserialize.returncode == 0, reserialize.stderr
    deployed = Setup(setup.served, setup.warehouse, env, setup.root)
    report = deployed.report(target="design_lineage")
    assert report["dags"] == ["design_lineage"]
    from_file = setup.report()
    file_outputs = [o for o in from_file["outputs"] if o["dagId"] == "design_lineage"]
    assert report["outputs"] == file_outputs
    unknown = deployed.impact(target="no_such_dag")
    assert unknown.returncode == 2 and "no DAG 'no_such_dag' in the metadata database" in unknown.stderr


def test_an_openlineage_connection_gives_the_consumer_and_its_key(setup: Setup) -> None:
    port = setup.served.url.rsplit(":", 1)[1]
    connection = {"conn_type": "openlineage", "host": "127.0.0.1", "port": int(port), "password": READ_KEY}
    env = {**setup.env, "AIRFLOW_CONN_LINEAGE_CONSUMER": json.dumps(connection)}
    command = [str(VENV_BIN / "airflow-lineage"), "impact", str(DESIGN_DAG), "--conn-id", "lineage_consumer", "--json"]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["consumer"] == setup.served.url
    assert [j["name"] for j in _output(report, "load_orders", "main.orders")["jobs"]] == ["summarize", "publish"]


def test_a_key_without_read_access_is_named_on_a_403(setup: Setup) -> None:
    """The served consumer's keys all read (write includes read): a consumer answering 403 stands in here."""

    class Forbidden(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b'{"detail": "scope read needed"}'
            self.send_response(403)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Forbidden)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        result = setup.impact("--consumer", f"http://127.0.0.1:{server.server_address[1]}", "--task", "load_orders")
    finally:
        server.shutdown()
        server.server_close()
    assert result.returncode == 2
    assert "refused the key (HTTP 403): give a key with read scope" in result.stderr
    assert READ_KEY not in result.stdout + result.stderr
