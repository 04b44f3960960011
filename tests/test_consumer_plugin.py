"""The consumer mounted in the real Airflow 3 API server app by the provider's plugin (a subprocess with
its own AIRFLOW_HOME), configured from ``[lineage_provider] consumer_*``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.airflow_run import airflow_env, migrate
from support.consumer_helpers import dataset, run_event

SCRIPT = """
import json, sys
from fastapi.testclient import TestClient
from airflow.api_fastapi.app import create_app

event = json.loads(sys.argv[1])
client = TestClient(create_app())
key = {"Authorization": "Bearer k3y-plugged"}
results = {
    "anonymous": client.post("/lineage/api/v1/lineage", json=event).status_code,
    "with_key": client.post("/lineage/api/v1/lineage", json=event, headers=key).status_code,
    "anonymous_read": client.get("/lineage/api/v1/namespaces").status_code,
}
results["batch"] = client.post("/lineage/api/v1/lineage/batch", json=[event], headers=key).status_code
feast_jobs = client.get("/lineage/api/v1/lineage/openlineage/jobs", headers=key)
try:
    results["feast_jobs"] = [job["job_name"] for job in feast_jobs.json()["jobs"]]
except ValueError:  # not JSON: the Airflow UI's catch-all page
    results["feast_jobs"] = None
params = {"nodeId": "dataset:warehouse:out", "depth": 1}
graph = client.get("/lineage/api/v1/lineage", params=params, headers=key)
results["graph_status"] = graph.status_code
try:
    results["graph"] = sorted(n["id"] for n in graph.json()["graph"])
except ValueError:  # not JSON: the Airflow UI's catch-all page, nothing mounted there
    results["graph"] = None
print("RESULT" + json.dumps(results))
"""


def _run(home: Path, extra: dict[str, str]) -> dict:
    event = run_event("COMPLETE", "plugged", inputs=[dataset("in")], outputs=[dataset("out")])
    env = airflow_env(home, home / "dags", extra)
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, json.dumps(event)], env=env, capture_output=True, text=True, timeout=300
    )
    line = next((x for x in result.stdout.splitlines() if x.startswith("RESULT")), None)
    assert line is not None, result.stdout[-3000:] + result.stderr[-3000:]
    return json.loads(line[len("RESULT") :])


@pytest.mark.airflow
def test_the_plugin_mounts_the_consumer_under_lineage(tmp_path: Path) -> None:
    home = tmp_path / "airflow"
    migrate(home)
    store = tmp_path / "consumer.db"
    results = _run(
        home,
        {
            "AIRFLOW__LINEAGE_PROVIDER__CONSUMER_STORE_URL": f"sqlite:///{store}",
            "AIRFLOW__LINEAGE_PROVIDER__CONSUMER_API_KEY": "k3y-plugged",
            "AIRFLOW__LINEAGE_PROVIDER__CONSUMER_BATCH_ANSWERS": "feast",
        },
    )
    assert results["anonymous"] == 401
    assert results["anonymous_read"] == 401
    assert results["with_key"] == 201
    assert results["batch"] == 204, "consumer_batch_answers = feast: Feast's answer to a batch all stored"
    assert results["feast_jobs"] == ["plugged"], "Feast's consumer API under the plugin's prefix"
    assert results["graph_status"] == 200
    assert results["graph"] == ["dataset:warehouse:in", "dataset:warehouse:out", "job:pipelines:plugged"]
    assert store.is_file()

    off = _run(home, {"AIRFLOW__LINEAGE_PROVIDER__CONSUMER_PLUGIN": "False"})
    assert off["graph"] is None  # nothing mounted: the UI's catch-all page answers
    assert off["with_key"] != 201
