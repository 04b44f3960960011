"""Egeria facets on real Airflow runs through the stock listener and ``custom_run_facets``."""

from __future__ import annotations

import pytest
from support.airflow_run import DagRunResult
from support.facets_airflow import (
    CUSTOM_RUN_FACETS_ENV,
    assert_events_valid,
    run_dag,
    run_facets_of,
    task_events,
)

from airflow_lineage_provider.facets import GOVERNANCE_ACTION_KEY, INFORMATION_SUPPLY_CHAIN_KEY, MATERIALIZATION_KEY

pytestmark = pytest.mark.airflow

EGERIA = "facets_egeria"
DEFAULTS = "facets_defaults"
DAG_SUPPLY_CHAIN = "InformationSupplyChain::sales-orders"
TASK_SUPPLY_CHAIN = "InformationSupplyChain::finance-ledger"
DAG_ACTION = {
    "iscQualifiedName": DAG_SUPPLY_CHAIN,
    "engineActionGUID": "5d0e7a3c-6f0b-4a59-9a77-5f1f6b0d1c11",
    "governanceEngineName": "AssetGovernance",
    "requestType": "nightly-load",
    "governanceActionTypeName": "LoadOrders",
    "processName": "SalesOrdersPipeline",
    "processStepName": "load",
}
PLATFORM_SUPPLY_CHAIN = "InformationSupplyChain::platform-default"
PLATFORM_ACTION = {"governanceEngineName": "PlatformGovernance", "requestType": "scheduled"}


@pytest.fixture(scope="module")
def egeria_run(tmp_path_factory: pytest.TempPathFactory) -> DagRunResult:
    return run_dag(tmp_path_factory, "facets_egeria_dag.py", EGERIA, CUSTOM_RUN_FACETS_ENV)


@pytest.fixture(scope="module")
def defaults_run(tmp_path_factory: pytest.TempPathFactory) -> DagRunResult:
    env = {
        **CUSTOM_RUN_FACETS_ENV,
        "AIRFLOW__LINEAGE_PROVIDER__INFORMATION_SUPPLY_CHAIN": PLATFORM_SUPPLY_CHAIN,
        "AIRFLOW__LINEAGE_PROVIDER__EGERIA_GOVERNANCE_ACTION": '{"governanceEngineName": "PlatformGovernance", '
        '"requestType": "scheduled"}',
    }
    return run_dag(tmp_path_factory, "facets_defaults_dag.py", DEFAULTS, env)


def supply_chain(event: dict) -> str | None:
    facet = run_facets_of(event).get(INFORMATION_SUPPLY_CHAIN_KEY)
    return facet["iscQualifiedName"] if facet else None


def action_fields(event: dict) -> dict | None:
    facet = run_facets_of(event).get(GOVERNANCE_ACTION_KEY)
    return {k: v for k, v in facet.items() if not k.startswith("_")} if facet else None


def test_every_event_validates_against_the_specs(egeria_run: DagRunResult, defaults_run: DagRunResult) -> None:
    assert_events_valid(egeria_run)
    assert_events_valid(defaults_run)


@pytest.mark.parametrize("task_id", ["plain", "stock_bash"])
def test_dag_params_reach_every_event_of_plain_tasks_and_stock_operators(
    egeria_run: DagRunResult, task_id: str
) -> None:
    events = task_events(egeria_run, EGERIA, task_id)
    assert set(events) == {"START", "COMPLETE"}
    for event in events.values():
        assert supply_chain(event) == DAG_SUPPLY_CHAIN
        assert action_fields(event) == DAG_ACTION


def test_task_param_overrides_the_dag_param(egeria_run: DagRunResult) -> None:
    for event in task_events(egeria_run, EGERIA, "overridden").values():
        assert supply_chain(event) == TASK_SUPPLY_CHAIN
        assert action_fields(event) == DAG_ACTION


def test_a_task_param_of_none_opts_the_task_out(egeria_run: DagRunResult) -> None:
    for event in task_events(egeria_run, EGERIA, "opted_out").values():
        assert INFORMATION_SUPPLY_CHAIN_KEY not in run_facets_of(event)
        assert GOVERNANCE_ACTION_KEY not in run_facets_of(event)


def test_failed_task_events_carry_the_facets_but_no_materialization(egeria_run: DagRunResult) -> None:
    events = task_events(egeria_run, EGERIA, "failing")
    assert set(events) == {"START", "FAIL"}
    assert supply_chain(events["FAIL"]) == DAG_SUPPLY_CHAIN
    assert action_fields(events["FAIL"]) == DAG_ACTION
    assert MATERIALIZATION_KEY not in run_facets_of(events["FAIL"])


def test_malformed_supply_chain_warns_with_dag_task_and_value_and_the_task_still_succeeds(
    egeria_run: DagRunResult,
) -> None:
    events = task_events(egeria_run, EGERIA, "bad_supply_chain")
    assert set(events) == {"START", "COMPLETE"}  # the task succeeded
    for event in events.values():
        assert INFORMATION_SUPPLY_CHAIN_KEY not in run_facets_of(event)
        assert action_fields(event) == DAG_ACTION  # the well-formed setting still applies
    assert (
        "param 'information_supply_chain' of task 'bad_supply_chain' in DAG 'facets_egeria' is 42 (int): "
        "it must be a non-empty string" in egeria_run.output
    )


def test_malformed_governance_action_warns_naming_the_unknown_key(egeria_run: DagRunResult) -> None:
    events = task_events(egeria_run, EGERIA, "bad_governance_action")
    assert set(events) == {"START", "COMPLETE"}
    for event in events.values():
        assert GOVERNANCE_ACTION_KEY not in run_facets_of(event)
        assert supply_chain(event) == DAG_SUPPLY_CHAIN
    assert (
        "param 'egeria_governance_action' of task 'bad_governance_action' in DAG 'facets_egeria' is "
        "{'engineActionGuid': 'misspelt key'} (dict): unknown key(s) engineActionGuid" in egeria_run.output
    )


def test_operators_that_attach_the_facets_themselves_are_left_alone(egeria_run: DagRunResult) -> None:
    for event in task_events(egeria_run, EGERIA, "self_describing").values():
        assert not {INFORMATION_SUPPLY_CHAIN_KEY, GOVERNANCE_ACTION_KEY, MATERIALIZATION_KEY} & set(
            run_facets_of(event)
        )


def test_only_the_failing_task_failed(egeria_run: DagRunResult) -> None:
    failed = {e["job"]["name"] for e in egeria_run.events if e["eventType"] == "FAIL"}
    assert failed == {f"{EGERIA}.failing", EGERIA}


@pytest.mark.parametrize("task_id", ["plain", "stock_bash"])
def test_configured_defaults_apply_when_no_param_is_set(defaults_run: DagRunResult, task_id: str) -> None:
    events = task_events(defaults_run, DEFAULTS, task_id)
    assert set(events) == {"START", "COMPLETE"}
    for event in events.values():
        assert supply_chain(event) == PLATFORM_SUPPLY_CHAIN
        assert action_fields(event) == PLATFORM_ACTION


def test_task_param_overrides_the_configured_default(defaults_run: DagRunResult) -> None:
    for event in task_events(defaults_run, DEFAULTS, "task_level").values():
        assert supply_chain(event) == "InformationSupplyChain::task-level"
        assert action_fields(event) == PLATFORM_ACTION
