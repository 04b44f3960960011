"""Where a task's Egeria settings come from, on real Airflow DAG and operator objects (no run needed)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pendulum
import pytest
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG, Param

from airflow_lineage_provider.facets import (
    GOVERNANCE_ACTION_KEY,
    INFORMATION_SUPPLY_CHAIN_KEY,
    EgeriaGovernanceActionRunFacet,
    EgeriaInformationSupplyChainRunFacet,
    egeria_facets,
)
from airflow_lineage_provider.reporting import forget_reported

START = pendulum.datetime(2026, 1, 1, tz="UTC")


@pytest.fixture(autouse=True)
def fresh_warnings(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    forget_reported()
    caplog.set_level(logging.DEBUG, logger="airflow_lineage_provider")
    yield
    forget_reported()


def task_in_dag(dag_params: dict[str, Any] | None = None, task_params: dict[str, Any] | None = None, **dag_kw: Any):
    with DAG("sales", schedule=None, start_date=START, params=dag_params, **dag_kw):
        return EmptyOperator(task_id="load", params=task_params)


def supply_chain(facets: dict[str, Any]) -> str | None:
    facet = facets.get(INFORMATION_SUPPLY_CHAIN_KEY)
    return facet.iscQualifiedName if facet is not None else None


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_dag_param_gives_the_supply_chain_facet() -> None:
    facets = egeria_facets(task_in_dag({"information_supply_chain": "isc::sales"}))
    assert isinstance(facets[INFORMATION_SUPPLY_CHAIN_KEY], EgeriaInformationSupplyChainRunFacet)
    assert supply_chain(facets) == "isc::sales"
    assert GOVERNANCE_ACTION_KEY not in facets


def test_task_param_overrides_dag_param() -> None:
    task = task_in_dag({"information_supply_chain": "isc::sales"}, {"information_supply_chain": "isc::finance"})
    assert supply_chain(egeria_facets(task)) == "isc::finance"


def test_params_from_default_args_count_as_dag_params() -> None:
    task = task_in_dag(default_args={"params": {"information_supply_chain": "isc::from-default-args"}})
    assert supply_chain(egeria_facets(task)) == "isc::from-default-args"


def test_param_objects_are_read_by_value() -> None:
    task = task_in_dag({"information_supply_chain": Param("isc::typed", type="string")})
    assert supply_chain(egeria_facets(task)) == "isc::typed"


def test_run_params_override_declared_params() -> None:
    task = task_in_dag({"information_supply_chain": "isc::sales"})
    facets = egeria_facets(task, {"information_supply_chain": "isc::from-run-conf"})
    assert supply_chain(facets) == "isc::from-run-conf"


def test_governance_action_dict_gives_the_governance_action_facet() -> None:
    action = {"governanceEngineName": "AssetGovernance", "requestType": "load", "processStepName": "step-1"}
    facet = egeria_facets(task_in_dag({"egeria_governance_action": action}))[GOVERNANCE_ACTION_KEY]
    assert isinstance(facet, EgeriaGovernanceActionRunFacet)
    assert (facet.governanceEngineName, facet.requestType, facet.processStepName) == (
        "AssetGovernance",
        "load",
        "step-1",
    )
    assert facet.engineActionGUID is None


def test_nothing_set_gives_no_facets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AIRFLOW__LINEAGE_PROVIDER__INFORMATION_SUPPLY_CHAIN", raising=False)
    assert egeria_facets(task_in_dag()) == {}


def test_configured_defaults_apply_when_no_param_is_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__LINEAGE_PROVIDER__INFORMATION_SUPPLY_CHAIN", "isc::platform")
    monkeypatch.setenv("AIRFLOW__LINEAGE_PROVIDER__EGERIA_GOVERNANCE_ACTION", '{"requestType": "scheduled"}')
    facets = egeria_facets(task_in_dag())
    assert supply_chain(facets) == "isc::platform"
    assert facets[GOVERNANCE_ACTION_KEY].requestType == "scheduled"
    assert supply_chain(egeria_facets(task_in_dag({"information_supply_chain": "isc::dag"}))) == "isc::dag"


def test_none_opts_out_even_of_the_configured_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__LINEAGE_PROVIDER__INFORMATION_SUPPLY_CHAIN", "isc::platform")
    assert (
        egeria_facets(task_in_dag({"information_supply_chain": "isc::dag"}, {"information_supply_chain": None})) == {}
    )


@pytest.mark.parametrize(
    ("value", "shown", "problem"),
    [
        (42, "42 (int)", "must be a non-empty string"),
        (["isc::a", "isc::b"], "['isc::a', 'isc::b'] (list)", "must be a non-empty string"),
        ("   ", "'   ' (str)", "must be a non-empty string"),
    ],
)
def test_malformed_supply_chain_warns_naming_dag_task_and_value(
    caplog: pytest.LogCaptureFixture, value: Any, shown: str, problem: str
) -> None:
    task = task_in_dag(task_params={"information_supply_chain": value})
    assert egeria_facets(task) == {}
    [message] = warnings(caplog)
    assert f"param 'information_supply_chain' of task 'load' in DAG 'sales' is {shown}" in message
    assert problem in message


def test_malformed_dag_param_names_the_dag(caplog: pytest.LogCaptureFixture) -> None:
    assert egeria_facets(task_in_dag({"information_supply_chain": 7})) == {}
    [message] = warnings(caplog)
    assert "param 'information_supply_chain' of DAG 'sales' (task 'load') is 7 (int)" in message


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("AssetGovernance", "must be a non-empty dict"),
        ({}, "must be a non-empty dict"),
        ({"governanceEngine": "AssetGovernance"}, "unknown key(s) governanceEngine; the accepted keys are"),
        ({"requestType": 3}, "the value of requestType must be a non-empty string"),
        ({"requestType": None}, "every field is None"),
    ],
)
def test_malformed_governance_action_warns_and_gives_no_facet(
    caplog: pytest.LogCaptureFixture, value: Any, problem: str
) -> None:
    task = task_in_dag({"information_supply_chain": "isc::sales", "egeria_governance_action": value})
    facets = egeria_facets(task)
    assert GOVERNANCE_ACTION_KEY not in facets
    assert supply_chain(facets) == "isc::sales"  # the other setting is unaffected
    [message] = warnings(caplog)
    assert "param 'egeria_governance_action' of DAG 'sales' (task 'load')" in message
    assert problem in message


def test_malformed_configured_default_names_the_option(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("AIRFLOW__LINEAGE_PROVIDER__EGERIA_GOVERNANCE_ACTION", "{requestType: scheduled}")
    assert egeria_facets(task_in_dag()) == {}
    [message] = warnings(caplog)
    assert "[lineage_provider] egeria_governance_action is '{requestType: scheduled}' (text): it is not JSON" in message


def test_the_same_problem_is_logged_at_warning_once(caplog: pytest.LogCaptureFixture) -> None:
    task = task_in_dag({"information_supply_chain": 7})
    egeria_facets(task)
    egeria_facets(task)
    assert len(warnings(caplog)) == 1


def test_malformed_value_from_the_run_names_the_run(caplog: pytest.LogCaptureFixture) -> None:
    task = task_in_dag({"information_supply_chain": "isc::sales"})
    assert egeria_facets(task, {"information_supply_chain": {"name": "isc::conf"}}) == {}
    [message] = warnings(caplog)
    assert (
        "param 'information_supply_chain' of the run of DAG 'sales' (task 'load') is {'name': 'isc::conf'}" in message
    )
