"""Run real Airflow DAGs in tests: ``airflow dags test`` in a subprocess with its own AIRFLOW_HOME.

A subprocess keeps each run's configuration (``[openlineage]``, ``[lineage_provider]``, connections as
``AIRFLOW_CONN_*``) isolated from the test process and from other runs, as real workers are.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from support.capture import file_transport_env, read_events

VENV_BIN = Path(sys.executable).parent


def airflow_env(home: Path, dags_folder: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """A clean environment for the ``airflow`` CLI: no inherited OpenLineage or Airflow settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENLINEAGE", "AIRFLOW"))}
    env.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(dags_folder),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            # A DAG changed and reserialized within 30 s of its last write (a test's second `dags reserialize`,
            # or one after `dags test`) would otherwise be skipped by Airflow as written too recently.
            "AIRFLOW__CORE__MIN_SERIALIZED_DAG_UPDATE_INTERVAL": "0",
            "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
            "PATH": f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}",
        }
    )
    env.update(extra or {})
    return env


_SERVE = """
import sys, uvicorn
from airflow.api_fastapi.app import create_app
uvicorn.run(create_app(), host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
"""


@contextmanager
def api_server(env: dict[str, str], log_path: Path) -> Iterator[str]:
    """Airflow's real API server app (plugins loaded from the installed provider) on uvicorn, 127.0.0.1, in a
    subprocess with ``env``; yields its URL once healthy, output in ``log_path``; fails the test if it dies."""
    import pytest

    from support.feast_consumer import free_port

    port = free_port()
    with log_path.open("w") as log:
        command = [sys.executable, "-c", _SERVE, str(port)]
        server = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 120
            while True:
                try:
                    if httpx.get(f"{url}/api/v2/monitor/health", timeout=2).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"the Airflow API server did not start:\n{log_path.read_text()[-3000:]}")
                time.sleep(0.2)
            yield url
        finally:
            server.terminate()
            server.wait(timeout=30)


def migrate(home: Path) -> None:
    """Create the SQLite metadata database of a fresh AIRFLOW_HOME."""
    home.mkdir(parents=True, exist_ok=True)
    env = airflow_env(home, home / "dags")
    result = subprocess.run(
        [str(VENV_BIN / "airflow"), "db", "migrate"], env=env, capture_output=True, text=True, timeout=300
    )
    if result.returncode != 0:
        raise RuntimeError(f"airflow db migrate failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")


def listener_off_home(home: Path) -> Path:
    """A fresh AIRFLOW_HOME where OpenLineage is not configured for Airflow: openlineage-python's own
    ``openlineage.yml`` in ``home`` (run ``dags_test`` with ``cwd=home``) sends to a file, so tasks with the mixin
    emit their events themselves. Returns the events file."""
    migrate(home)
    events_file = home / "events.ndjson"
    (home / "openlineage.yml").write_text(f"transport:\n  type: file\n  log_file_path: {events_file}\n  append: true\n")
    return events_file


@dataclass
class DagRunResult:
    returncode: int
    output: str
    events: list[dict[str, Any]]

    def of_job(self, name: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("job", {}).get("name") == name]


def dags_test(
    home: Path,
    dags_folder: Path,
    dag_id: str,
    logical_date: str = "2026-02-01",
    env: dict[str, str] | None = None,
    events_file: Path | None = None,
    timeout: int = 300,
    cwd: Path | None = None,
) -> DagRunResult:
    """``airflow dags test`` one DAG; events go to ``events_file`` through the real file transport.

    Pass ``events_file=None`` together with your own transport settings in ``env`` (or none at all, for
    the "OpenLineage not configured" case).
    """
    extra = dict(env or {})
    if events_file is not None:
        extra = {**file_transport_env(events_file), **extra}
    result = subprocess.run(
        [str(VENV_BIN / "airflow"), "dags", "test", dag_id, logical_date],
        env=airflow_env(home, dags_folder, extra),
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
    )
    return DagRunResult(
        result.returncode,
        result.stdout + result.stderr,
        read_events(events_file) if events_file is not None else [],
    )
