"""The facet classes against their JSON schemas, the shipped materialization schema, and the facet builders."""

from __future__ import annotations

import fnmatch
import hashlib
import json
from datetime import datetime
from pathlib import Path
from typing import Any

import attr
import pytest
import tomllib
from openlineage.client.event_v2 import Job, Run, RunEvent, RunState
from openlineage.client.serde import Serde
from support.olschema import event_errors

from airflow_lineage_provider.extractors.sql import writes_rows
from airflow_lineage_provider.facets import (
    GOVERNANCE_ACTION_KEY,
    INFORMATION_SUPPLY_CHAIN_KEY,
    MATERIALIZATION_KEY,
    EgeriaGovernanceActionRunFacet,
    EgeriaInformationSupplyChainRunFacet,
    MaterializationRunFacet,
    materialization_facet,
    record_rows_written,
    run_dates,
    schema_document,
)
from airflow_lineage_provider.producer import rows_written
from airflow_lineage_provider.reporting import forget_reported

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "airflow_lineage_provider"
SCHEMA_FILE = PACKAGE / "schemas" / "1-0-0" / "MaterializationRunFacet.json"
#: Published schema documents never change; a changed facet gets a new version folder (and this pin a new line).
PUBLISHED = {"1-0-0/MaterializationRunFacet.json": "b2366e034ec54424ebef1207c35a87b20dbdff63549af9e5fe4282ef93552ab9"}


def event_with(run_facets: dict[str, Any]) -> dict[str, Any]:
    event = RunEvent(
        eventType=RunState.COMPLETE,
        eventTime="2026-02-01T00:10:00+00:00",
        run=Run(runId="019c167f-cc00-7661-816e-91b657750939", facets=run_facets),
        job=Job(namespace="default", name="sales.load"),
        producer="https://pypi.org/project/airflow-lineage-provider/",
    )
    return Serde.to_dict(event)


def full_facets() -> dict[str, Any]:
    return {
        INFORMATION_SUPPLY_CHAIN_KEY: EgeriaInformationSupplyChainRunFacet(iscQualifiedName="isc::sales"),
        GOVERNANCE_ACTION_KEY: EgeriaGovernanceActionRunFacet(
            iscQualifiedName="isc::sales",
            engineActionGUID="5d0e7a3c-6f0b-4a59-9a77-5f1f6b0d1c11",
            governanceEngineName="AssetGovernance",
            requestType="load",
            governanceActionTypeName="LoadOrders",
            processName="SalesPipeline",
            processStepName="load",
        ),
        MATERIALIZATION_KEY: materialization_facet(
            [("postgres://db:5432", "warehouse.public.orders")],
            rows_written=1200,
            data_interval_start=datetime(2026, 1, 31),
            data_interval_end="2026-02-01T00:00:00+00:00",
            logical_date="2026-02-01T00:00:00Z",
        ),
    }


def test_facets_validate_against_the_egeria_and_package_schemas() -> None:
    assert event_errors(event_with(full_facets())) == []


def test_the_validation_does_catch_a_broken_facet() -> None:
    event = event_with(full_facets())
    event["run"]["facets"][MATERIALIZATION_KEY]["rowsWritten"] = -1
    del event["run"]["facets"][INFORMATION_SUPPLY_CHAIN_KEY]["iscQualifiedName"]
    errors = event_errors(event)
    assert any(MATERIALIZATION_KEY in e and "rowsWritten" in e for e in errors), errors
    assert any(INFORMATION_SUPPLY_CHAIN_KEY in e and "iscQualifiedName" in e for e in errors), errors


def test_egeria_schema_urls_are_exactly_egerias() -> None:
    base = "https://egeria-project.org/openlineage/facets/1-0-0"
    facets = full_facets()
    assert facets[INFORMATION_SUPPLY_CHAIN_KEY]._schemaURL == (
        f"{base}/EgeriaInformationSupplyChainRunFacet.json#/$defs/EgeriaInformationSupplyChainRunFacet"
    )
    assert facets[GOVERNANCE_ACTION_KEY]._schemaURL == (
        f"{base}/EgeriaGovernanceActionRunFacet.json#/$defs/EgeriaGovernanceActionRunFacet"
    )


def test_materialization_schema_url_points_into_the_shipped_document() -> None:
    document = schema_document()
    url = full_facets()[MATERIALIZATION_KEY]._schemaURL
    schema_id, pointer = url.split("#")
    assert schema_id == document["$id"] == json.loads(SCHEMA_FILE.read_text())["$id"]
    assert pointer == "/$defs/MaterializationRunFacet"
    assert "/1-0-0/" in schema_id  # the id names the version folder the document lives in


def test_materialization_schema_is_laid_out_like_the_spec_facets() -> None:
    document = schema_document()
    assert document["properties"] == {MATERIALIZATION_KEY: {"$ref": "#/$defs/MaterializationRunFacet"}}
    core, own = document["$defs"]["MaterializationRunFacet"]["allOf"]
    assert core == {"$ref": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunFacet"}
    public_fields = {a.name for a in attr.fields(MaterializationRunFacet) if not a.name.startswith("_")}
    assert set(own["properties"]) == public_fields  # a changed class needs a new schema version


def test_published_schema_documents_never_change() -> None:
    for relative, digest in PUBLISHED.items():
        actual = hashlib.sha256((PACKAGE / "schemas" / relative).read_bytes()).hexdigest()
        assert actual == digest, f"schemas/{relative} changed: publish the change in a new version folder instead"


def test_every_schema_file_is_package_data() -> None:
    globs = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    patterns = globs["airflow_lineage_provider"]
    schema_files = [p.relative_to(PACKAGE).as_posix() for p in (PACKAGE / "schemas").rglob("*.json")]
    assert schema_files
    for relative in schema_files:
        assert any(fnmatch.fnmatch(relative, pattern) for pattern in patterns), relative


def test_materialization_facet_accepts_the_usual_output_forms_and_drops_duplicates() -> None:
    from openlineage.client.event_v2 import OutputDataset

    facet = materialization_facet(
        [
            ("file", "/srv/a.csv"),
            {"namespace": "file", "name": "/srv/b.csv"},
            OutputDataset("file", "/srv/a.csv"),
        ],
        logical_date=datetime(2026, 2, 1, 6, 30),
    )
    assert [(o.namespace, o.name) for o in facet.outputs] == [("file", "/srv/a.csv"), ("file", "/srv/b.csv")]
    assert facet.logicalDate == "2026-02-01T06:30:00+00:00"  # naive datetimes are UTC
    assert facet.rowsWritten is None


def test_materialization_facet_without_outputs_is_none() -> None:
    assert materialization_facet([], rows_written=3) is None


@pytest.mark.parametrize(
    ("kwargs", "error", "named"),
    [
        ({"rows_written": -1}, ValueError, "-1"),
        ({"rows_written": True}, ValueError, "True"),
        ({"rows_written": 2.5}, ValueError, "2.5"),
        ({"logical_date": "yesterday"}, ValueError, "yesterday"),
        ({"logical_date": "2026-02-01"}, ValueError, "2026-02-01"),
        ({"data_interval_end": "2026-02-01T00:00:00"}, ValueError, "2026-02-01T00:00:00"),
        ({"data_interval_start": 20260201}, TypeError, "20260201"),
    ],
)
def test_materialization_facet_rejects_malformed_arguments_naming_them(
    kwargs: dict[str, Any], error: type[Exception], named: str
) -> None:
    with pytest.raises(error, match=named):
        materialization_facet([("file", "/srv/a.csv")], **kwargs)


@pytest.mark.parametrize("output", [("file",), {"namespace": "file"}, ("", "x"), 42])
def test_materialization_facet_rejects_malformed_outputs(output: Any) -> None:
    with pytest.raises((TypeError, ValueError), match="output"):
        materialization_facet([output])


@pytest.mark.parametrize(
    ("statement", "counts"),
    [
        ("INSERT INTO orders SELECT * FROM raw_orders", True),
        ("  -- load\n/* batch */ insert into orders values (1)", True),
        ("UPDATE orders SET amount = 0", True),
        ("MERGE INTO orders USING raw ON orders.id = raw.id WHEN MATCHED THEN UPDATE SET amount = 0", True),
        ("CREATE TABLE orders_copy AS SELECT * FROM orders", True),
        ("WITH recent AS (SELECT 1) INSERT INTO orders SELECT * FROM recent", True),
        ("COPY orders FROM STDIN", True),
        ("COPY orders TO STDOUT", False),
        ("SELECT * FROM orders", False),
        ("DELETE FROM orders WHERE id = 3", False),
        ("TRUNCATE TABLE orders", False),
        ("", False),
        (None, False),
    ],
)
def test_which_statements_count_as_rows_written(statement: Any, counts: bool) -> None:
    assert writes_rows(statement) is counts


def test_record_rows_written_outside_a_task_is_misuse(strict: None) -> None:
    with pytest.raises(ValueError, match=r"record_rows_written\(5\) was called outside a running Airflow task"):
        record_rows_written(5)


@pytest.mark.parametrize("rows", [-3, 1.5, "12", True])
def test_record_rows_written_rejects_what_is_not_a_row_count(strict: None, rows: Any) -> None:
    with pytest.raises(ValueError, match=f"rows written {rows!r}"):
        record_rows_written(rows)


def test_record_rows_written_misuse_is_logged_and_ignored_when_not_strict(caplog: pytest.LogCaptureFixture) -> None:
    forget_reported()
    assert record_rows_written(-3) is None
    assert any("rows written -3" in r.getMessage() for r in caplog.records)
    assert not rows_written._recorded
    forget_reported()


def test_run_dates_outside_a_task_are_empty() -> None:
    assert run_dates() == {}
