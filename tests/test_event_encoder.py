"""The outbox stores each event as openlineage-python's ``Serde.to_json`` writes it: every event type and facet
this package emits, and the design-time events (the outbox's JSON is the library's, byte for byte)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from openlineage.client.event_v2 import DatasetEvent, InputDataset, Job, JobEvent, OutputDataset, StaticDataset
from openlineage.client.facet_v2 import (
    documentation_job,
    ownership_job,
    schema_dataset,
    sql_job,
)
from openlineage.client.serde import Serde
from openlineage.client.transport.transport import Config, Transport
from support.olschema import SHARED

from airflow_lineage_provider import column_lineage_facet, emit_lineage, lineage_run, schema_facet
from airflow_lineage_provider.facets.design_time import (
    DeclaredLineageJobFacet,
    TemplatedNameDatasetFacet,
    supply_chain_job_facet,
)
from airflow_lineage_provider.facets.egeria import governance_action_facet, information_supply_chain_facet
from airflow_lineage_provider.outbox import OutboxConfig, OutboxTransport
from airflow_lineage_provider.outbox.database import dispose_engines
from airflow_lineage_provider.producer import client

CORPUS = SHARED / "corpus"
CAPTURED: list[Any] = []


class Capture(Transport):
    """A transport keeping the event objects it is given (selected by class path, as users select theirs)."""

    kind = "capture"
    config_class = Config

    def __init__(self, config: Config) -> None:
        self.config = config

    def emit(self, event: Any) -> None:
        CAPTURED.append(event)


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("OPENLINEAGE__TRANSPORT__TYPE", f"{__name__}.Capture")
    client.reset()
    CAPTURED.clear()
    yield CAPTURED
    client.reset()
    CAPTURED.clear()


def package_events(tmp_path: Path) -> list[Any]:
    """What ``lineage_run``/``emit_lineage`` send, with every facet the package adds, plus the design-time events."""
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'warehouse.db'}")
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE orders (id INTEGER PRIMARY KEY, amount NUMERIC(10, 2), note TEXT)")
        conn.exec_driver_sql("CREATE TABLE totals (customer TEXT, total REAL)")
    egeria = {
        "egeria_informationSupplyChain": information_supply_chain_facet("InformationSupplyChain::sales"),
        "egeria_governanceAction": governance_action_facet(
            {"governanceEngineName": "Lädt", "requestType": "load", "processName": None}
        ),
    }
    inputs = [
        "main/orders",
        schema_facet("raw/customers", {"id": "INTEGER", "name": "TEXT"}),
        "s3://bucket/key/part-0.parquet",
        {"namespace": "kafka://broker:9092", "name": "events", "facets": {"custom": {"x": [1, None, {}], "y": None}}},
    ]
    outputs = [
        "main/totals",
        column_lineage_facet(
            "main/totals",
            {
                "customer": {"source": "main/orders", "field": "id"},
                "total": [{"source": "main/orders", "field": "amount", "operation": "SUM"}],
            },
        ),
    ]
    with lineage_run(
        "encoder.outer",
        inputs=inputs,
        outputs=outputs,
        connector={"main": engine},
        job_facets={"sql": sql_job.SQLJobFacet(query="SELECT 1"), "owner": {"team": "data", "on_call": None}},
        run_facets={**egeria, "custom_dict": {"nested": {"deep": [1.5, "é", True]}, "gone": None}},
    ) as outer:
        outer.rows_written = 12
        with lineage_run("encoder.inner", inputs=["main/orders"], outputs=["file:///tmp/out.csv"]):
            pass
    with pytest.raises(ZeroDivisionError):
        with lineage_run("encoder.failing", inputs=["main/orders"], connector={"main": engine}):
            1 / 0  # noqa: B018
    emit_lineage("RUNNING", "encoder.single", inputs=["main/orders"], event_time=datetime(2026, 1, 1, 12, 0))
    emit_lineage("ABORT", "encoder.single", outputs=["main/totals"])
    engine.dispose()
    return list(CAPTURED)


def design_time_events() -> list[Any]:
    templated = TemplatedNameDatasetFacet(
        nameTemplate="out_{{ ds_nodash }}", nameRegex="^out_.*$", variables=["ds_nodash"], producer="https://x/"
    )
    job_facets = {
        "airflowLineageProvider_declaredLineage": DeclaredLineageJobFacet(
            dagId="d", taskId="t", dagHash="abc", incomplete=["sql"], producer="https://x/"
        ),
        "airflowLineageProvider_informationSupplyChain": supply_chain_job_facet(
            "InformationSupplyChain::sales", {"requestType": "load"}
        ),
        "documentation": documentation_job.DocumentationJobFacet(description="Loads orders"),
        "ownership": ownership_job.OwnershipJobFacet(owners=[ownership_job.Owner(name="data", type=None)]),
    }
    retired = DeclaredLineageJobFacet(dagId="d", taskId="gone", retired=True, producer="https://x/")
    return [
        JobEvent(
            eventTime="2026-01-01T00:00:00+00:00",
            job=Job(namespace="airflow", name="d.t", facets=job_facets),
            inputs=[InputDataset("sqlite:///w.db", "main.orders")],
            outputs=[OutputDataset("sqlite:///w.db", "out_{{ ds_nodash }}", facets={"templatedName": templated})],
            producer="https://x/",
        ),
        JobEvent(
            eventTime="2026-01-01T00:00:00+00:00",
            job=Job(namespace="airflow", name="d.gone", facets={"airflowLineageProvider_declaredLineage": retired}),
            inputs=[],
            outputs=[],
        ),
        DatasetEvent(
            eventTime="2026-01-01T00:00:00+00:00",
            dataset=StaticDataset(
                "postgres://db:5432",
                "w.public.orders",
                facets={
                    "schema": schema_dataset.SchemaDatasetFacet(
                        fields=[schema_dataset.SchemaDatasetFacetFields("id", "INT")]
                    )
                },
            ),
            producer="https://x/",
        ),
    ]


def test_the_outbox_stores_serdes_json(captured: list[Any], tmp_path: Path) -> None:
    events = package_events(tmp_path)
    kinds = {(e.job.name, e.eventType.value) for e in events}
    assert {("encoder.outer", "START"), ("encoder.outer", "COMPLETE"), ("encoder.inner", "COMPLETE")} <= kinds
    assert {("encoder.failing", "FAIL"), ("encoder.single", "RUNNING"), ("encoder.single", "ABORT")} <= kinds
    events += design_time_events()
    url = f"sqlite:///{tmp_path / 'outbox.db'}"
    outbox = OutboxTransport(OutboxConfig.from_dict({"url": url}))
    try:
        for event in events:
            outbox.emit(event)
        engine = sa.create_engine(url)
        with engine.connect() as conn:
            payloads = [row[0] for row in conn.exec_driver_sql("SELECT payload FROM lineage_outbox_events ORDER BY id")]
        engine.dispose()
    finally:
        dispose_engines()
    assert payloads == [Serde.to_json(e) for e in events]
