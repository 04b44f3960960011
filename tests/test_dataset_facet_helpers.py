"""schema_facet and column_lineage_facet: the dicts they return and the facets they become."""

from __future__ import annotations

import pytest
from support.olschema import assert_valid_event

from airflow_lineage_provider import column_lineage_facet, lineage_run, schema_facet
from airflow_lineage_provider.conf import DEFAULT_PRODUCER

SCHEMA_URL = "https://openlineage.io/spec/facets/1-2-0/SchemaDatasetFacet.json#/$defs/SchemaDatasetFacet"
LINEAGE_URL = "https://openlineage.io/spec/facets/1-2-0/ColumnLineageDatasetFacet.json#/$defs/ColumnLineageDatasetFacet"


@pytest.mark.parametrize(
    "fields",
    [
        {"id": "INTEGER", "name": "TEXT"},
        [("id", "INTEGER"), ("name", "TEXT")],
        [{"name": "id", "type": "INTEGER"}, {"name": "name", "type": "TEXT"}],
    ],
)
def test_schema_facet_accepts_mappings_pairs_and_dicts(fields):
    assert schema_facet("main/customers", fields) == {
        "name": "main/customers",
        "facets": {
            "schema": {
                "_producer": DEFAULT_PRODUCER,
                "_schemaURL": SCHEMA_URL,
                "fields": [{"name": "id", "type": "INTEGER"}, {"name": "name", "type": "TEXT"}],
            }
        },
    }


def test_schema_facet_rejects_a_field_without_name(strict):
    with pytest.raises(TypeError, match=r"schema field \{'type': 'INTEGER'\} \(position 2\) has no name"):
        schema_facet("main/customers", [("id", "INTEGER"), {"type": "INTEGER"}])


def test_outside_strict_mode_a_bad_facet_is_logged_and_the_dataset_kept(caplog):
    """Nothing here can fail the task: the user's code goes on with the dataset, without the facet."""
    caplog.set_level("WARNING", logger="airflow_lineage_provider")
    assert schema_facet("main/customers", [{"type": "INTEGER"}]) == {"name": "main/customers"}
    assert column_lineage_facet("main/totals", {"total": "main/orders.amount"}) == {"name": "main/totals"}
    messages = [r.getMessage() for r in caplog.records]
    assert any("has no name" in m and "strict" in m for m in messages)
    assert any("needs 'source' and 'field'" in m for m in messages)


@pytest.mark.parametrize(
    ("operation", "transformation"),
    [
        (None, {"type": "DIRECT", "subtype": "IDENTITY"}),
        ("SUM", {"type": "DIRECT", "subtype": "AGGREGATION", "description": "SUM"}),
        ("JOIN", {"type": "INDIRECT", "subtype": "JOIN", "description": "JOIN"}),
        ("filter", {"type": "INDIRECT", "subtype": "FILTER", "description": "filter"}),
        ("amount * fx_rate", {"type": "DIRECT", "subtype": "TRANSFORMATION", "description": "amount * fx_rate"}),
    ],
)
def test_operation_becomes_the_field_transformation(operation, transformation):
    source = {"source": "main/orders", "field": "amount"}
    if operation:
        source["operation"] = operation
    facet = column_lineage_facet("main/totals", {"total": source})["facets"]["columnLineage"]
    assert facet["_schemaURL"] == LINEAGE_URL
    assert facet["fields"]["total"]["inputFields"] == [
        {"namespace": "default", "name": "main/orders", "field": "amount", "transformations": [transformation]}
    ]


def test_join_maps_one_output_field_to_several_sources(events):
    joined = column_lineage_facet(
        "main/order_report",
        {
            "customer_name": [
                {"source": "main/customers", "field": "name"},
                {"source": "main/orders", "field": "customer_id", "operation": "JOIN"},
            ],
            "amount": {"source": "main/orders", "field": "amount"},
        },
    )
    with lineage_run("report", inputs=["main/orders", "main/customers"], outputs=[joined]):
        pass
    complete = events.of_job("report")[-1]
    fields = complete["outputs"][0]["facets"]["columnLineage"]["fields"]
    assert [f["field"] for f in fields["customer_name"]["inputFields"]] == ["name", "customer_id"]
    assert fields["customer_name"]["inputFields"][1]["transformations"][0]["subtype"] == "JOIN"


def test_helpers_combine_on_one_dataset(events):
    columns = column_lineage_facet("main/totals", {"total": {"source": "main/orders", "field": "amount"}})
    schema = schema_facet("main/totals", {"total": "NUMERIC"})
    merged = {"name": "main/totals", "facets": {**columns["facets"], **schema["facets"]}}
    with lineage_run("totals", outputs=[merged]):
        pass
    complete = events.of_job("totals")[-1]
    assert set(complete["outputs"][0]["facets"]) == {"columnLineage", "schema"}
    assert_valid_event(complete, ignore={"tags"})


@pytest.mark.parametrize(
    ("mappings", "message"),
    [
        (["total"], "column lineage mappings"),
        ({"total": {"field": "amount"}}, "needs 'source' and 'field'"),
        ({"total": "main/orders.amount"}, "needs 'source' and 'field'"),
    ],
)
def test_column_lineage_facet_names_the_bad_mapping(mappings, message, strict):
    with pytest.raises(TypeError, match=message):
        column_lineage_facet("main/totals", mappings)
