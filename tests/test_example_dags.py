"""The example DAGs in dags/ import cleanly in a real Airflow (the demo runs them end to end)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from support.airflow_run import VENV_BIN, airflow_env

pytestmark = pytest.mark.airflow

DAGS = Path(__file__).resolve().parents[1] / "dags"


def _json_output(stdout: str):
    """The JSON document the CLI printed (Airflow's own log lines go to stdout before it)."""
    lines = stdout.splitlines()
    start = max(i for i, line in enumerate(lines) if line.startswith("["))
    return json.loads("\n".join(lines[start:]))


def test_example_dags_have_no_import_errors(airflow_home):
    env = airflow_env(airflow_home, DAGS)
    errors = subprocess.run(
        [str(VENV_BIN / "airflow"), "dags", "list-import-errors", "--output", "json", "--local"],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert errors.returncode == 0, errors.stderr[-3000:]
    assert _json_output(errors.stdout) == []
    listed = subprocess.run(
        [str(VENV_BIN / "airflow"), "dags", "list", "--output", "json", "--local"],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    dag_ids = {d["dag_id"] for d in _json_output(listed.stdout)}
    assert {"example_lineage_run", "example_task_lineage"} <= dag_ids
