"""The pieces of design-time lineage that need no metadata database: how a LineageMixin task's declarations
travel in the serialized DAG, templated names, and the facets' shipped schemas."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from support.environment import require_shared
from support.olschema import PACKAGE_SCHEMAS, event_errors

from airflow_lineage_provider.design.declaration import (
    DECLARATION_FIELD,
    decode_declaration,
    encode_connector,
    encode_declaration,
)
from airflow_lineage_provider.facets import design_time
from airflow_lineage_provider.name_templates import Protected, is_templated, name_regex, template_variables


def _serialized_task(operator: Any) -> dict[str, Any]:
    from airflow.serialization.serialized_objects import OperatorSerialization

    return OperatorSerialization.serialize_operator(operator)


def _copy_rows(**kwargs: Any) -> Any:
    from airflow.sdk import DAG, BaseOperator

    from airflow_lineage_provider import LineageMixin

    class CopyRows(LineageMixin, BaseOperator):
        def execute(self, context: Any) -> None: ...

    with DAG("declarations", schedule=None):
        return CopyRows(task_id="copy", **kwargs)


def test_a_mixin_tasks_declarations_are_in_its_serialized_form_as_written() -> None:
    task = _copy_rows(
        lineage_inputs=["warehouse/orders_{{ ds_nodash }}"],
        lineage_outputs=[{"namespace": "s3://b", "name": "k"}],
        lineage_connector="warehouse",
    )
    document = json.loads(_serialized_task(task)[DECLARATION_FIELD])
    assert document == {
        "v": 1,
        "inputs": ["warehouse/orders_{{ ds_nodash }}"],
        "outputs": [{"namespace": "s3://b", "name": "k", "facets": {}}],
        "connector": "warehouse",
    }
    assert DECLARATION_FIELD not in _serialized_task(_copy_rows())  # nothing declared: nothing added


def test_the_serialized_declaration_is_the_same_for_every_parse() -> None:
    import sqlalchemy as sa
    from airflow.sdk import Asset

    def declared() -> str | None:
        engine = sa.create_engine("postgresql://loader:secret@db:5432/shop")
        return _copy_rows(
            lineage_inputs=[Asset("s3://raw/orders.csv"), {"name": "main/x", "facets": {"k": {"a": 1, "b": 2}}}],
            lineage_connector={"shop": engine, "lake": "lake_conn"},
        ).lineage_declaration

    first = declared()
    assert first == declared()  # new engine objects, same document: no new DAG version per parse
    assert "secret" not in first and "***" in first
    decoded = decode_declaration(first)
    assert decoded is not None and decoded.inputs[0].uri == "s3://raw/orders.csv"


def test_objects_that_cannot_be_written_down_are_recorded_by_type() -> None:
    class SchemaSource:
        def get_table_schema(self, table: str) -> list[str]:
            return ["id"]

    assert encode_connector(SchemaSource()) == {"unsupported": "SchemaSource"}
    decoded = decode_declaration(encode_declaration([object()], None, None))
    assert decoded is not None and decoded.inputs == [] and decoded.unsupported == ["object"]


@pytest.mark.parametrize(
    ("template", "rendered", "matches"),
    [
        ("main.orders_{{ ds_nodash }}", "main.orders_20260201", True),
        ("main.orders_{{ ds_nodash }}", "main.orders_20260201.old", True),
        ("main.orders_{{ ds_nodash }}", "other.orders_20260201", False),
        ("part_{{ ti.map_index }}_{{ ds }}", "part_3_2026-02-01", True),
        ("{% if x %}a{% endif %}.b", "a.b", True),
        ("{% if x %}a{% endif %}.b", ".b", True),
        ("{% if x %}a{% endif %}.b", "a.c", False),
        ("t{# a comment #}_{{ ds }}", "t_1", True),
        ("a.b+c_{{ ds }}", "a.b+c_x", True),
        ("a.b+c_{{ ds }}", "aXb+c_x", False),
    ],
)
def test_the_name_regex_matches_every_rendering_and_nothing_else(template: str, rendered: str, matches: bool) -> None:
    assert bool(re.fullmatch(name_regex(template), rendered)) is matches


def test_templates_survive_naming_through_placeholders() -> None:
    protected = Protected()
    text = protected.protect("warehouse/part_{{ ti.map_index }}.{{ ds }}")
    assert text is not None and "{" not in text and "." not in text.removeprefix("warehouse/part_").split("x.")[0]
    assert protected.restore(f"main.{text.removeprefix('warehouse/')}") == "main.part_{{ ti.map_index }}.{{ ds }}"
    assert protected.protect("plain") == "plain" and not is_templated("plain")
    assert template_variables("{{ ds_nodash }}_{{ ti.map_index }}") == ("ds_nodash", "ti")
    assert template_variables("{{ unclosed") == ()


@pytest.mark.parametrize(
    "schema_name",
    [design_time.TEMPLATED_NAME_SCHEMA, design_time.SUPPLY_CHAIN_JOB_SCHEMA, design_time.DECLARED_LINEAGE_SCHEMA],
)
def test_each_facet_schema_ships_with_the_id_its_schema_url_names(schema_name: str) -> None:
    document = design_time.schema_document(schema_name)
    assert design_time.schema_url(schema_name) == f"{document['$id']}#/$defs/{schema_name}"
    assert (PACKAGE_SCHEMAS / "1-0-0" / f"{schema_name}.json").is_file()


def _job_event(job_facets: dict[str, Any], dataset_facets: dict[str, Any] | None = None) -> dict[str, Any]:
    from openlineage.client.event_v2 import InputDataset, Job, JobEvent
    from openlineage.client.serde import Serde

    event = JobEvent(
        eventTime="2026-02-01T00:00:00+00:00",
        producer="https://example.com/producer",
        job=Job(namespace="default", name="dag.task", facets=job_facets),
        inputs=[InputDataset("s3://b", "k_{{ ds }}", facets=dataset_facets or {})],
        outputs=[],
    )
    return Serde.to_dict(event)


def test_the_facets_validate_and_a_malformed_one_does_not() -> None:
    require_shared()
    supply_chain = design_time.supply_chain_job_facet(None, {"processName": "Orders"})
    assert supply_chain is not None and supply_chain.iscQualifiedName is None
    good = _job_event(
        {
            design_time.SUPPLY_CHAIN_JOB_KEY: supply_chain,
            design_time.DECLARED_LINEAGE_KEY: design_time.DeclaredLineageJobFacet(dagId="dag", taskId="task"),
        },
        {
            design_time.TEMPLATED_NAME_KEY: design_time.TemplatedNameDatasetFacet(
                nameTemplate="k_{{ ds }}", nameRegex=name_regex("k_{{ ds }}"), variables=["ds"]
            )
        },
    )
    assert event_errors(good) == []
    bad_action = json.loads(json.dumps(good))
    bad_action["job"]["facets"][design_time.SUPPLY_CHAIN_JOB_KEY]["governanceAction"] = {"processname": "x"}
    bad_template = json.loads(json.dumps(good))
    del bad_template["inputs"][0]["facets"][design_time.TEMPLATED_NAME_KEY]["nameRegex"]
    assert event_errors(bad_action) and event_errors(bad_template)
    assert design_time.supply_chain_job_facet(None, None) is None
