"""``event_json`` (the outbox's encoder) gives the JSON ``Serde.to_json`` gives, parsed: every event type and
facet this package emits, odd values, and every event of ``../shared/corpus`` (on the dict route)."""

from __future__ import annotations

import enum
import json
import math
import uuid
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any

import attr
import pytest
import sqlalchemy as sa
from openlineage.client.event_v2 import DatasetEvent, InputDataset, Job, JobEvent, OutputDataset, StaticDataset
from openlineage.client.facet_v2 import (
    DatasetFacet,
    RunFacet,
    documentation_job,
    ownership_job,
    schema_dataset,
    sql_job,
)
from openlineage.client.serde import Serde
from openlineage.client.transport.transport import Config, Transport
from support.environment import IN_CI
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
from airflow_lineage_provider.producer.event_json import event_dict, event_json

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


def assert_same_json(event: Any) -> None:
    ours = event_json(event)
    assert json.loads(ours) == json.loads(Serde.to_json(event))
    assert event_dict(event) == Serde.to_dict(event)


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


def test_every_event_the_package_emits_encodes_as_serde_does(captured: list[Any], tmp_path: Path) -> None:
    events = package_events(tmp_path)
    kinds = {(e.job.name, e.eventType.value) for e in events}
    assert {("encoder.outer", "START"), ("encoder.outer", "COMPLETE"), ("encoder.inner", "COMPLETE")} <= kinds
    assert {("encoder.failing", "FAIL"), ("encoder.single", "RUNNING"), ("encoder.single", "ABORT")} <= kinds
    complete = next(e for e in events if (e.job.name, e.eventType.value) == ("encoder.outer", "COMPLETE"))
    run_facets = set(complete.run.facets)
    assert {
        "airflowLineageProvider_materialization",
        "egeria_informationSupplyChain",
        "egeria_governanceAction",
    } <= run_facets
    assert "schema" in complete.inputs[0].facets and "columnLineage" in complete.outputs[1].facets
    inner = next(e for e in events if e.job.name == "encoder.inner")
    assert inner.run.facets["parent"].job.name == "encoder.outer"
    failed = next(e for e in events if e.eventType.value == "FAIL")
    assert "errorMessage" in failed.run.facets
    for event in events + design_time_events():
        assert_same_json(event)


def test_the_outbox_stores_the_encoders_json(captured: list[Any], tmp_path: Path) -> None:
    events = package_events(tmp_path) + design_time_events()
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
    assert [json.loads(p) for p in payloads] == [json.loads(Serde.to_json(e)) for e in events]


class Colour(enum.Enum):
    RED = "red"
    NOTHING = None


class Weird(str):
    def __str__(self) -> str:
        return "not what json.dumps writes"


@attr.define
class OddFacet(RunFacet):
    values: Any = None
    kept: Any = None


@pytest.mark.parametrize(
    "values",
    [
        {"enum": Colour.RED, "none_enum": Colour.NOTHING, "list": [Colour.NOTHING, Colour.RED]},
        {"when": datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc), "day": date(2026, 1, 2), "id": uuid.uuid4()},
        {"tuple": (1, None, {}), "set": frozenset({"a"}), "empties": [{}, [], "", 0, False, {"a": None}]},
        {"unicode": "é ☃ \u2028 \U0001f600", "escape": 'quote " backslash \\ tab \t nul \x00'},
        {"big": 2**70, "float": 0.1 + 0.2, "neg": -1e-300, "exp": 1e16},
        {"nan": math.nan, "inf": math.inf},
        {"weird": Weird("x"), "numbers": [1, 2.5]},
        {"object": object()},
        {"lone surrogate": "\ud800"},
    ],
    ids=["enums", "dates-uuid", "collections", "unicode", "numbers", "nan", "str-subclass", "object", "surrogate"],
)
def test_odd_values_encode_as_serde_does(values: dict[str, Any]) -> None:
    facet = OddFacet(values=values, kept={"a": 1}, producer="https://x/")
    extra = DatasetFacet(producer="https://x/").with_additional_properties(flag=True, missing=None, items=[None, 1])
    event = DatasetEvent(
        eventTime="2026-01-01T00:00:00+00:00",
        dataset=StaticDataset("ns", "n", facets={"odd": facet, "extra": extra}),  # type: ignore[dict-item]
    )
    ours = json.loads(event_json(event))
    theirs = json.loads(Serde.to_json(event))
    if "nan" in values:  # NaN != NaN: compare what they are written as
        assert json.dumps(ours, sort_keys=True) == json.dumps(theirs, sort_keys=True)
    else:
        assert ours == theirs
    assert ours["dataset"]["facets"]["extra"] == {
        "_producer": "https://x/",
        "_schemaURL": extra._schemaURL,
        "flag": True,
        "items": [1],
    }


def corpus_documents() -> list[tuple[str, Any]]:
    if not CORPUS.is_dir():
        reason = f"the event corpus is not at {CORPUS} (clone the project with ../shared beside it)"
        if IN_CI:
            pytest.fail(reason)
        pytest.skip(reason)
    found = []
    for path in sorted(CORPUS.rglob("*.json")):
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            continue  # deliberately broken files: nothing to encode
        found.append((str(path.relative_to(CORPUS)), document))
    return found


def test_every_corpus_event_encodes_as_serde_does() -> None:
    documents = corpus_documents()
    assert len(documents) > 100
    encoded = 0
    for name, document in documents:
        for event in document if isinstance(document, list) else [document]:
            if not isinstance(event, dict):
                continue
            assert json.loads(event_json(event)) == json.loads(Serde.to_json(event)), name
            assert event_dict(event) == Serde.to_dict(event), name
            encoded += 1
    assert encoded > 100
