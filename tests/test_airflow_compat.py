"""What differs between the supported Airflow minors, on the installed Airflow's real objects (scripts/compat.sh
runs this file on every supported set)."""

from __future__ import annotations

import importlib
from typing import Any

import pendulum
import pytest
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG, Param

from airflow_lineage_provider import airflow_compat
from airflow_lineage_provider.airflow_compat import MOVED, param_is_set, param_source
from airflow_lineage_provider.design.egeria_settings import plain_params

pytestmark = pytest.mark.airflow

START = pendulum.datetime(2026, 1, 1, tz="UTC")


@pytest.mark.parametrize("name", sorted(MOVED))
def test_each_moved_name_is_the_installed_airflows_own(name: str) -> None:
    found = getattr(airflow_compat, name)
    module_name, attribute = next((m, a) for m, a in MOVED[name] if _has(m, a))
    assert found is getattr(importlib.import_module(module_name), attribute)
    assert isinstance(found, type)


def _has(module_name: str, attribute: str) -> bool:
    try:
        return hasattr(importlib.import_module(module_name), attribute)
    except ImportError:
        return False


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="Nothing"):
        airflow_compat.Nothing  # noqa: B018


def test_a_skip_raised_with_the_found_exception_skips_the_task() -> None:
    from airflow.exceptions import AirflowException

    assert issubclass(airflow_compat.AirflowSkipException, AirflowException)


def test_unset_none_and_values_of_real_params() -> None:
    assert not param_is_set(Param())  # no default
    assert param_is_set(Param(None, type=["null", "string"]))  # None opts out: a value here
    assert param_is_set(Param("isc::sales", type="string"))


def task_in_dag(dag_params: dict[str, Any], task_params: dict[str, Any] | None = None) -> Any:
    with DAG("sales", schedule=None, start_date=START, params=dag_params):
        return EmptyOperator(task_id="load", params=task_params)


def test_a_param_set_on_the_dag_is_the_dags_and_one_set_on_the_task_the_tasks() -> None:
    task = task_in_dag({"from_dag": "a", "both": "dag value"}, {"from_task": "b", "both": "task value"})
    dag_params = task.dag.params
    sources = {key: param_source(task.params.get_param(key), key, dag_params) for key in task.params}
    assert sources == {"from_dag": "dag", "from_task": "task", "both": "task"}


def test_plain_params_keep_none_and_leave_out_params_without_a_value() -> None:
    task = task_in_dag({"chain": "isc::sales", "opted_out": Param(None, type=["null", "string"]), "unset": Param()})
    assert plain_params(task.params) == {"chain": "isc::sales", "opted_out": None}
