"""Real Airflow runs for the facet and extractor tests, on top of :mod:`support.airflow_run`.

One ``airflow dags test`` per DAG file (about 10 s each): the metadata database is migrated once per test
session and copied into each run's own AIRFLOW_HOME, and each run sees only its own DAG file.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from support.airflow_run import DagRunResult, dags_test, migrate
from support.olschema import assert_valid_event

DAGS = Path(__file__).resolve().parents[1] / "dags"
LOGICAL_DATE = "2026-02-01"

#: ``[openlineage] custom_run_facets`` pointing at this package's function.
CUSTOM_RUN_FACETS_ENV = {"AIRFLOW__OPENLINEAGE__CUSTOM_RUN_FACETS": "airflow_lineage_provider.extractors.run_facets"}
#: ``[openlineage] extractors`` registering this package's extractor.
EXTRACTOR_ENV = {"AIRFLOW__OPENLINEAGE__EXTRACTORS": "airflow_lineage_provider.extractors.DeclaredLineageExtractor"}
#: Run facets of the stock Airflow provider whose schemas are not in ../shared/spec.
STOCK_AIRFLOW_FACETS = frozenset(
    {"airflow", "airflowDagRun", "airflowState", "airflow_mappedTask", "unknownSourceAttribute", "debug", "tags"}
)

_template: dict[str, Path] = {}


def _migrated_database(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if "db" not in _template:
        home = tmp_path_factory.mktemp("facets-airflow-template")
        migrate(home)
        _template["db"] = home / "airflow.db"
    return _template["db"]


def run_dag(tmp_path_factory: pytest.TempPathFactory, dag_file: str, dag_id: str, env: dict[str, str]) -> DagRunResult:
    """``airflow dags test`` the DAG in ``tests/dags/<dag_file>`` with ``env``, events through the file transport."""
    run = tmp_path_factory.mktemp(dag_id)
    home, dags = run / "home", run / "dags"
    home.mkdir()
    dags.mkdir()
    shutil.copy(_migrated_database(tmp_path_factory), home / "airflow.db")
    shutil.copy(DAGS / dag_file, dags / dag_file)
    return dags_test(home, dags, dag_id, LOGICAL_DATE, env=env, events_file=run / "events.ndjson")


def assert_events_valid(result: DagRunResult) -> None:
    """Every event of the run validates against ../shared/spec and this package's facet schemas."""
    assert result.events, f"the run emitted no events:\n{result.output[-4000:]}"
    for event in result.events:
        assert_valid_event(event, ignore=STOCK_AIRFLOW_FACETS)


def task_events(result: DagRunResult, dag_id: str, task_id: str) -> dict[str, dict[str, Any]]:
    """The task's events by type (``START``, ``COMPLETE``, ``FAIL``); exactly one of each kind sent."""
    events = result.of_job(f"{dag_id}.{task_id}")
    by_type = {e["eventType"]: e for e in events}
    assert len(by_type) == len(events), f"{task_id}: repeated event types {[e['eventType'] for e in events]}"
    assert "START" in by_type, f"{task_id}: no START event:\n{result.output[-4000:]}"
    return by_type


def run_facets_of(event: dict[str, Any]) -> dict[str, Any]:
    return event["run"].get("facets") or {}
