"""The task-emission plugin imports, when an Airflow job starts, what a task's first lineage event would import, so
that task processes forked from the scheduler have it (docs/deploy.md, "Task cost").

Each case runs in a fresh Python process with its own ``AIRFLOW_HOME`` and ``[openlineage]`` settings, creates a
real ``airflow.jobs.job.Job`` (whose constructor calls the listeners' ``on_starting``, as the scheduler's does)
and reports which modules were imported.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.airflow_run import airflow_env

pytestmark = pytest.mark.airflow

TRANSPORT = "airflow_lineage_provider.outbox.transport"
RUN_FACETS = "airflow_lineage_provider.extractors.task_facets"
RUN_FACETS_PATH = "airflow_lineage_provider.extractors.run_facets"

_PROBE = """
import json, sys
from airflow.listeners.listener import get_listener_manager

watched = sys.argv[1:]
before = {name: name in sys.modules for name in watched}
component = sys.stdin.read().strip()
if component == "job":
    from airflow.jobs.job import Job

    Job()  # its constructor calls on_starting(component=job)
else:

    class TaskRunnerMarker:
        pass

    get_listener_manager().hook.on_starting(component=TaskRunnerMarker())
print(json.dumps({"before": before, "after": {name: name in sys.modules for name in watched}}))
"""


def _starting(tmp_path: Path, settings: dict[str, str], component: str = "job") -> dict[str, dict[str, bool]]:
    env = airflow_env(
        tmp_path / "home",
        tmp_path / "dags",
        {
            "AIRFLOW__OPENLINEAGE__NAMESPACE": "test",
            "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(
                {"type": "airflow_lineage_provider.outbox.OutboxTransport", "url": f"sqlite:///{tmp_path}/outbox.db"}
            ),
            "AIRFLOW__OPENLINEAGE__CUSTOM_RUN_FACETS": RUN_FACETS_PATH,
            **settings,
        },
    )
    result = subprocess.run(
        [sys.executable, "-c", _PROBE, TRANSPORT, RUN_FACETS],
        input=component,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return dict(json.loads(result.stdout.strip().splitlines()[-1]))


def test_a_starting_job_imports_the_transport_and_the_custom_run_facets(tmp_path: Path) -> None:
    seen = _starting(tmp_path, {})
    assert seen["before"] == {TRANSPORT: False, RUN_FACETS: False}
    assert seen["after"] == {TRANSPORT: True, RUN_FACETS: True}


def test_nothing_is_imported_with_openlineage_disabled(tmp_path: Path) -> None:
    seen = _starting(tmp_path, {"AIRFLOW__OPENLINEAGE__DISABLED": "true"})
    assert seen["after"] == {TRANSPORT: False, RUN_FACETS: False}


def test_nothing_is_imported_when_switched_off(tmp_path: Path) -> None:
    seen = _starting(tmp_path, {"AIRFLOW__LINEAGE_PROVIDER__PREPARE_TASK_PROCESSES": "False"})
    assert seen["after"] == {TRANSPORT: False, RUN_FACETS: False}


def test_a_task_process_starting_is_left_alone(tmp_path: Path) -> None:
    seen = _starting(tmp_path, {}, component="task")
    assert seen["after"] == {TRANSPORT: False, RUN_FACETS: False}


def test_a_path_that_cannot_be_imported_is_reported_and_the_rest_still_imported(tmp_path: Path) -> None:
    env = airflow_env(
        tmp_path / "home",
        tmp_path / "dags",
        {"AIRFLOW__OPENLINEAGE__CUSTOM_RUN_FACETS": f"no_such_module.facets;{RUN_FACETS_PATH}"},
    )
    code = (
        "import json, sys\n"
        "from airflow_lineage_provider.plugins.task_emission import prepare_task_processes\n"
        f"failed = prepare_task_processes()\nprint(json.dumps([failed, {RUN_FACETS!r} in sys.modules]))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    failed, imported = json.loads(result.stdout.strip().splitlines()[-1])
    assert failed == ["no_such_module.facets"]
    assert imported


def test_an_outbox_wrapped_in_the_egeria_dag_run_transport_is_still_prepared(tmp_path: Path) -> None:
    """The Egeria recipe wraps the outbox in a ``transform`` transport: what it wraps is imported and opened too."""
    outbox = tmp_path / "wrapped-outbox.db"
    wrapped = {
        "type": "airflow_lineage_provider.design.dag_run_transformer.EgeriaDagRunTransport",
        "transport": {"type": "airflow_lineage_provider.outbox.OutboxTransport", "url": f"sqlite:///{outbox}"},
    }
    seen = _starting(tmp_path, {"AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(wrapped)})
    assert seen["after"] == {TRANSPORT: True, RUN_FACETS: True}
    assert outbox.exists()  # opened, its schema created, before any task ran
