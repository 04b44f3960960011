"""``DeclaredLineageExtractor`` on a real Airflow run (stock listener, ``[openlineage] extractors``), and its
registration with the stock ``ExtractorManager``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from support.airflow_run import DagRunResult
from support.facets_airflow import EXTRACTOR_ENV, assert_events_valid, run_dag, run_facets_of, task_events

from airflow_lineage_provider.facets import GOVERNANCE_ACTION_KEY, INFORMATION_SUPPLY_CHAIN_KEY, MATERIALIZATION_KEY

DAG_ID = "facets_extractor"
SUPPLY_CHAIN = "InformationSupplyChain::sales-orders"
OUR_FACETS = {INFORMATION_SUPPLY_CHAIN_KEY, GOVERNANCE_ACTION_KEY, MATERIALIZATION_KEY}


@pytest.fixture(scope="module")
def sqlite_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("warehouse") / "warehouse.db"


@pytest.fixture(scope="module")
def extractor_run(tmp_path_factory: pytest.TempPathFactory, sqlite_file: Path) -> DagRunResult:
    env = {
        **EXTRACTOR_ENV,
        "AIRFLOW__LINEAGE_PROVIDER__EXTRACTOR_OPERATORS": "CopyRowsOperator; PublishOperator",
        "AIRFLOW_CONN_FACETS_SQLITE": json.dumps({"conn_type": "sqlite", "host": str(sqlite_file)}),
    }
    return run_dag(tmp_path_factory, "facets_extractor_dag.py", DAG_ID, env)


def names(datasets: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(d["namespace"], d["name"]) for d in datasets]


@pytest.mark.airflow
def test_every_event_validates_against_the_specs(extractor_run: DagRunResult) -> None:
    assert_events_valid(extractor_run)


@pytest.mark.airflow
def test_sql_operator_without_lineage_gets_datasets_from_its_sql(
    extractor_run: DagRunResult, sqlite_file: Path
) -> None:
    events = task_events(extractor_run, DAG_ID, "copy_orders")
    assert set(events) == {"START", "COMPLETE"}
    namespace = f"sqlite://{sqlite_file}"
    for event in events.values():
        assert names(event["inputs"]) == [(namespace, "main.raw_orders")]
        assert names(event["outputs"]) == [(namespace, "main.orders")]
        assert "INSERT INTO orders" in event["job"]["facets"]["sql"]["query"]


@pytest.mark.airflow
def test_extractor_adds_egeria_facets_from_dag_and_task_params(extractor_run: DagRunResult) -> None:
    for event in task_events(extractor_run, DAG_ID, "copy_orders").values():
        facets = run_facets_of(event)
        assert facets[INFORMATION_SUPPLY_CHAIN_KEY]["iscQualifiedName"] == SUPPLY_CHAIN
        assert facets[GOVERNANCE_ACTION_KEY]["governanceEngineName"] == "AssetGovernance"
        assert facets[GOVERNANCE_ACTION_KEY]["requestType"] == "copy"


@pytest.mark.airflow
def test_extractor_adds_materialization_with_the_cursor_row_count(
    extractor_run: DagRunResult, sqlite_file: Path
) -> None:
    engine = sa.create_engine(f"sqlite:///{sqlite_file}")
    with engine.connect() as conn:
        copied = conn.execute(sa.text("SELECT id FROM orders ORDER BY id")).scalars().all()
    engine.dispose()
    assert copied == [2, 3, 4]

    complete = task_events(extractor_run, DAG_ID, "copy_orders")["COMPLETE"]
    facet = run_facets_of(complete)[MATERIALIZATION_KEY]
    assert facet["rowsWritten"] == len(copied)
    assert facet["outputs"] == [{"namespace": o["namespace"], "name": o["name"]} for o in complete["outputs"]]
    assert (facet["dataIntervalStart"], facet["dataIntervalEnd"]) == (
        "2026-01-31T00:00:00+00:00",
        "2026-02-01T00:00:00+00:00",
    )


@pytest.mark.airflow
def test_operator_declaring_inlets_and_outlets_gets_them_as_datasets(extractor_run: DagRunResult) -> None:
    events = task_events(extractor_run, DAG_ID, "publish")
    for event in events.values():
        assert names(event["inputs"]) == [("file", "/srv/exports/orders.csv")]
        assert names(event["outputs"]) == [("file", "/srv/published/orders.csv")]
        assert run_facets_of(event)[INFORMATION_SUPPLY_CHAIN_KEY]["iscQualifiedName"] == SUPPLY_CHAIN
    facet = run_facets_of(events["COMPLETE"])[MATERIALIZATION_KEY]
    assert facet["outputs"] == [{"namespace": "file", "name": "/srv/published/orders.csv"}]
    assert "rowsWritten" not in facet


@pytest.mark.airflow
def test_failed_operator_gets_egeria_facets_but_no_materialization(extractor_run: DagRunResult) -> None:
    events = task_events(extractor_run, DAG_ID, "broken_copy")
    assert set(events) == {"START", "FAIL"}
    facets = run_facets_of(events["FAIL"])
    assert facets[INFORMATION_SUPPLY_CHAIN_KEY]["iscQualifiedName"] == SUPPLY_CHAIN
    assert MATERIALIZATION_KEY not in facets
    assert ("main.missing_table") in [d["name"] for d in events["FAIL"]["inputs"]]


@pytest.mark.airflow
def test_operators_not_listed_are_left_to_the_stock_extractors(extractor_run: DagRunResult) -> None:
    for event in task_events(extractor_run, DAG_ID, "not_listed").values():
        assert not OUR_FACETS & set(run_facets_of(event))


@pytest.fixture
def extractor_settings(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    from airflow.providers.openlineage import conf as ol_conf

    monkeypatch.setenv("AIRFLOW__OPENLINEAGE__EXTRACTORS", EXTRACTOR_ENV["AIRFLOW__OPENLINEAGE__EXTRACTORS"])
    monkeypatch.setenv("AIRFLOW__LINEAGE_PROVIDER__EXTRACTOR_OPERATORS", "CopyRowsOperator, PublishOperator")
    clear = getattr(ol_conf.custom_extractors, "cache_clear", lambda: None)  # not cached in unit-test mode
    clear()
    yield
    clear()


def test_stock_extractor_manager_registers_it_for_the_configured_classes(extractor_settings: None) -> None:
    from airflow.providers.openlineage.extractors.manager import ExtractorManager

    from airflow_lineage_provider.extractors import DeclaredLineageExtractor

    manager = ExtractorManager()
    assert manager.extractors["CopyRowsOperator"] is DeclaredLineageExtractor
    assert manager.extractors["PublishOperator"] is DeclaredLineageExtractor
    assert (
        "BashOperator" not in manager.extractors or manager.extractors["BashOperator"] is not DeclaredLineageExtractor
    )


def test_run_facets_defers_to_the_extractor_for_the_classes_it_handles(extractor_settings: None) -> None:
    from airflow.providers.standard.operators.bash import BashOperator
    from airflow.sdk import BaseOperator

    from airflow_lineage_provider.extractors.task_facets import handled_by_extractor

    class PublishOperator(BaseOperator):
        pass

    assert handled_by_extractor(PublishOperator(task_id="publish"))
    assert not handled_by_extractor(BashOperator(task_id="bash", bash_command="true"))
