"""Inside a real Airflow task, lineage_run events nest under the task's run with the listener's ids."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.airflow_run import dags_test
from support.environment import TEST_DAGS, require_shared
from support.olschema import STOCK_PROVIDER_FACETS, assert_valid_event

pytestmark = pytest.mark.airflow


@pytest.fixture(scope="module")
def listener_run(airflow_home: Path, tmp_path_factory: pytest.TempPathFactory):
    events_file = tmp_path_factory.mktemp("parent-links") / "events.ndjson"
    result = dags_test(airflow_home, TEST_DAGS, "parent_link", events_file=events_file)
    assert result.returncode == 0, result.output[-4000:]
    return result


def _run_ids(events, job):
    return {e["run"]["runId"] for e in events if e["job"]["name"] == job}


def test_every_event_validates(listener_run):
    require_shared()
    for event in listener_run.events:
        assert_valid_event(event, ignore=STOCK_PROVIDER_FACETS)


def test_custom_job_parent_is_the_listeners_task_run(listener_run):
    (task_run_id,) = _run_ids(listener_run.events, "parent_link.transform")
    ours = listener_run.of_job("parent_link.transform.orders")
    assert [e["eventType"] for e in ours] == ["START", "COMPLETE"]
    for event in ours:
        parent = event["run"]["facets"]["parent"]
        assert parent["run"]["runId"] == task_run_id
        assert parent["job"]["name"] == "parent_link.transform"
        task_event = listener_run.of_job("parent_link.transform")[0]
        assert parent["job"]["namespace"] == task_event["job"]["namespace"]
        assert event["job"]["namespace"] == task_event["job"]["namespace"]
        assert event["job"]["facets"]["jobType"]["integration"] == "AIRFLOW"


def test_root_is_the_listeners_dag_run(listener_run):
    (dag_run_id,) = _run_ids(listener_run.events, "parent_link")
    task_root = listener_run.of_job("parent_link.transform")[0]["run"]["facets"]["parent"]["root"]
    for event in listener_run.of_job("parent_link.transform.orders"):
        root = event["run"]["facets"]["parent"]["root"]
        assert root["run"]["runId"] == dag_run_id == task_root["run"]["runId"]
        assert root["job"]["name"] == "parent_link"


def test_each_map_index_nests_under_its_own_task_run(listener_run):
    mapped_runs = _run_ids(listener_run.events, "parent_link.mapped")
    assert len(mapped_runs) == 2
    parents = {
        listener_run.of_job(f"parent_link.mapped.part_{n}")[0]["run"]["facets"]["parent"]["run"]["runId"]
        for n in (1, 2)
    }
    assert parents == mapped_runs


def test_disabled_openlineage_emits_nothing_in_airflow(airflow_home: Path, tmp_path: Path):
    events_file = tmp_path / "events.ndjson"
    result = dags_test(
        airflow_home, TEST_DAGS, "parent_link", events_file=events_file, env={"AIRFLOW__OPENLINEAGE__DISABLED": "True"}
    )
    assert result.returncode == 0, result.output[-4000:]
    assert result.events == []
    assert "Successfully emitted OpenLineage" not in result.output


def test_nested_runs_carry_the_dags_supply_chain_and_materialization(listener_run):
    start, complete = listener_run.of_job("parent_link.transform.orders")
    for event in (start, complete):
        facet = event["run"]["facets"]["egeria_informationSupplyChain"]
        assert facet["iscQualifiedName"] == "InformationSupplyChain::parent-links"
    assert "airflowLineageProvider_materialization" not in start["run"]["facets"]
    materialization = complete["run"]["facets"]["airflowLineageProvider_materialization"]
    assert materialization["rowsWritten"] == 42
    assert materialization["outputs"] == [{"namespace": "default", "name": "main/orders"}]
    assert materialization["logicalDate"].startswith("2026-02-01T00:00:00")
    assert materialization["dataIntervalStart"].startswith("2026-02-01T00:00:00")
    # the mapped tasks' runs declare outputs but no row count: the facet is there, without rowsWritten
    mapped = listener_run.of_job("parent_link.mapped.part_1")[-1]["run"]["facets"][
        "airflowLineageProvider_materialization"
    ]
    assert "rowsWritten" not in mapped
