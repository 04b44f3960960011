"""Egeria's facets on DAG runs without the transform transport's transformer: the stock listener applies custom
run facets to task events only, so this package's listener sends a RUNNING event of the DAG run's job and run id
carrying them (with the transformer: tests/test_egeria_dag_run_transformer.py)."""

from __future__ import annotations

from datetime import datetime, timezone
from types import SimpleNamespace
from typing import Any

import pytest
from support.airflow_run import DagRunResult
from support.facets_airflow import CUSTOM_RUN_FACETS_ENV, assert_events_valid, run_dag, run_facets_of

from airflow_lineage_provider.facets import GOVERNANCE_ACTION_KEY, INFORMATION_SUPPLY_CHAIN_KEY

pytestmark = pytest.mark.airflow

DAG_SUPPLY_CHAIN = "InformationSupplyChain::sales-orders"
PLATFORM_SUPPLY_CHAIN = "InformationSupplyChain::platform-default"


def dag_job_events(result: DagRunResult, dag_id: str) -> dict[str, dict[str, Any]]:
    events = result.of_job(dag_id)
    by_type = {e["eventType"]: e for e in events}
    assert len(by_type) == len(events), [e["eventType"] for e in events]
    return by_type


@pytest.fixture(scope="module")
def egeria_run(tmp_path_factory: pytest.TempPathFactory) -> DagRunResult:
    return run_dag(tmp_path_factory, "facets_egeria_dag.py", "facets_egeria", CUSTOM_RUN_FACETS_ENV)


def test_the_dag_run_gets_a_running_event_with_the_dags_egeria_facets(egeria_run: DagRunResult) -> None:
    assert_events_valid(egeria_run)
    events = dag_job_events(egeria_run, "facets_egeria")
    ours, stock_end = events["RUNNING"], events["FAIL"]  # one task of the DAG fails on purpose
    assert ours["run"]["runId"] == stock_end["run"]["runId"]
    assert ours["job"]["namespace"] == stock_end["job"]["namespace"]
    assert ours["job"]["facets"]["jobType"]["jobType"] == "DAG"
    facets = run_facets_of(ours)
    assert facets[INFORMATION_SUPPLY_CHAIN_KEY]["iscQualifiedName"] == DAG_SUPPLY_CHAIN
    assert facets[GOVERNANCE_ACTION_KEY]["processName"] == "SalesOrdersPipeline"
    # Ordered by event time it sits inside the run, never after its end.
    assert datetime.fromisoformat(ours["eventTime"]) < datetime.fromisoformat(stock_end["eventTime"])
    assert INFORMATION_SUPPLY_CHAIN_KEY not in run_facets_of(stock_end)  # the stock event itself has no hook


def test_platform_defaults_reach_the_dag_run_of_a_dag_that_sets_nothing(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    env = {**CUSTOM_RUN_FACETS_ENV, "AIRFLOW__LINEAGE_PROVIDER__INFORMATION_SUPPLY_CHAIN": PLATFORM_SUPPLY_CHAIN}
    result = run_dag(tmp_path_factory, "facets_defaults_dag.py", "facets_defaults", env)
    assert result.returncode == 0, result.output[-4000:]
    assert_events_valid(result)
    events = dag_job_events(result, "facets_defaults")
    assert events["RUNNING"]["run"]["runId"] == events["COMPLETE"]["run"]["runId"]
    assert run_facets_of(events["RUNNING"])[INFORMATION_SUPPLY_CHAIN_KEY]["iscQualifiedName"] == PLATFORM_SUPPLY_CHAIN


def test_switched_off_the_dag_run_gets_nothing(tmp_path_factory: pytest.TempPathFactory) -> None:
    env = {**CUSTOM_RUN_FACETS_ENV, "AIRFLOW__LINEAGE_PROVIDER__DAG_RUN_EGERIA_FACETS": "False"}
    result = run_dag(tmp_path_factory, "facets_egeria_dag.py", "facets_egeria", env)
    events = dag_job_events(result, "facets_egeria")
    assert "FAIL" in events, result.output[-4000:]
    assert "RUNNING" not in events


def _dag_run(dag: Any, conf: dict[str, Any] | None = None) -> Any:
    start = datetime(2026, 2, 1, tzinfo=timezone.utc)
    return SimpleNamespace(
        dag=dag,
        dag_id=dag.dag_id,
        run_id="manual__1",
        conf=conf or {},
        logical_date=start,
        run_after=start,
        clear_number=0,
        start_date=start,
    )


def test_a_dag_without_egeria_settings_gets_no_event_and_the_runs_conf_overrides_the_param() -> None:
    from airflow.sdk import DAG

    from airflow_lineage_provider.plugins.dag_run_facets import dag_run_event

    assert dag_run_event(_dag_run(DAG("no_settings", schedule=None))) is None
    dag = DAG("with_settings", schedule=None, params={"information_supply_chain": DAG_SUPPLY_CHAIN})
    event = dag_run_event(_dag_run(dag, {"information_supply_chain": "InformationSupplyChain::replay"}))
    assert event.run.facets[INFORMATION_SUPPLY_CHAIN_KEY].iscQualifiedName == "InformationSupplyChain::replay"
    assert dag_run_event(_dag_run(dag, {"information_supply_chain": None})) is None  # the run opts out
