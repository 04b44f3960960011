"""The lineage_run lifecycle: START on entry, COMPLETE on success, FAIL (and ABORT) on error."""

from __future__ import annotations

import uuid

import pytest

from airflow_lineage_provider import EventType, LineageRun, emit_lineage, lineage_run, schema_facet


def test_start_then_complete_share_one_run_id(events):
    with lineage_run("orders.load", inputs=["raw/orders"], outputs=["main/orders"]) as run:
        pass
    emitted = events.of_job("orders.load")
    assert [e["eventType"] for e in emitted] == ["START", "COMPLETE"]
    assert {e["run"]["runId"] for e in emitted} == {run.run_id}
    assert emitted[0]["inputs"][0] == {"namespace": "default", "name": "raw/orders", "facets": {}, "inputFacets": {}}
    assert emitted[1]["outputs"][0]["name"] == "main/orders"


def test_generated_run_id_is_a_uuid7_from_openlineage(events):
    with lineage_run("orders.load") as run:
        pass
    assert isinstance(run, LineageRun)
    assert uuid.UUID(run.run_id).version == 7


def test_given_run_id_is_used(events):
    given = str(uuid.uuid4())
    with lineage_run("orders.load", run_id=given) as run:
        pass
    assert run.run_id == given
    assert {e["run"]["runId"] for e in events.all()} == {given}


def test_block_result_is_unchanged(events):
    def work():
        with lineage_run("orders.load", outputs=["main/orders"]):
            return {"rows": 3}

    assert work() == {"rows": 3}


def test_failure_emits_fail_with_error_message_and_reraises_the_same_exception(events):
    error = KeyError("customer_id")
    with pytest.raises(KeyError) as raised, lineage_run("orders.load", outputs=["main/orders"]):
        raise error
    assert raised.value is error
    fail = events.of_job("orders.load")[-1]
    assert fail["eventType"] == "FAIL"
    facet = fail["run"]["facets"]["errorMessage"]
    assert facet["message"] == "KeyError: 'customer_id'"
    assert facet["programmingLanguage"] == "python"
    assert "raise error" in facet["stackTrace"]
    assert fail["outputs"][0]["name"] == "main/orders"


def test_interrupt_emits_abort_and_propagates(events):
    with pytest.raises(KeyboardInterrupt), lineage_run("orders.load"):
        raise KeyboardInterrupt
    assert events.types("orders.load") == ["START", "ABORT"]


def test_outputs_added_inside_the_block_appear_on_complete(events):
    with lineage_run("orders.partition", inputs=["raw/orders"]) as run:
        run.add_output("main/orders_2026_02_01")
        run.add_run_facet("processing_note", {"note": "late data"})
    # a user's own facet: checked against the core RunFacet schema only
    start, complete = events.all(ignore_facets={"processing_note"})
    assert start["outputs"] == []
    assert [d["name"] for d in complete["outputs"]] == ["main/orders_2026_02_01"]
    assert complete["run"]["facets"]["processing_note"]["note"] == "late data"


def test_nested_run_points_at_the_outer_run(events):
    with lineage_run("pipeline") as outer, lineage_run("pipeline.step") as inner:
        pass
    inner_start = events.of_job("pipeline.step")[0]
    parent = inner_start["run"]["facets"]["parent"]
    assert parent["run"]["runId"] == outer.run_id
    assert (parent["job"]["namespace"], parent["job"]["name"]) == ("default", "pipeline")
    assert parent["root"]["run"]["runId"] == outer.run_id
    assert inner.run_id != outer.run_id
    assert "parent" not in events.of_job("pipeline")[0]["run"]["facets"]


def test_job_and_run_facets_are_carried(events):
    with lineage_run(
        "orders.load",
        job_facets={"documentation": {"description": "Loads orders", "_schemaURL": DOC_URL}},
        run_facets={"nominalTime": {"nominalStartTime": "2026-02-01T00:00:00Z", "_schemaURL": NOMINAL_URL}},
    ):
        pass
    start, complete = events.of_job("orders.load")
    assert start["job"]["facets"]["documentation"]["description"] == "Loads orders"
    assert complete["run"]["facets"]["nominalTime"]["nominalStartTime"] == "2026-02-01T00:00:00Z"
    assert complete["job"]["facets"]["jobType"]["integration"] == "PYTHON"


DOC_URL = "https://openlineage.io/spec/facets/1-1-0/DocumentationJobFacet.json#/$defs/DocumentationJobFacet"
NOMINAL_URL = "https://openlineage.io/spec/facets/1-0-1/NominalTimeRunFacet.json#/$defs/NominalTimeRunFacet"


@pytest.mark.parametrize("event_type", [EventType.RUNNING, "running", "OTHER", "abort"])
def test_emit_lineage_accepts_event_types_and_names(events, event_type):
    run_id = emit_lineage(event_type, "orders.monitor", inputs=[schema_facet("main/orders", {"id": "INTEGER"})])
    (event,) = events.all()
    assert event["eventType"] == (event_type.name if isinstance(event_type, EventType) else event_type.upper())
    assert event["run"]["runId"] == run_id
    assert event["inputs"][0]["facets"]["schema"]["fields"] == [{"name": "id", "type": "INTEGER"}]


def test_emit_lineage_event_time_is_kept(events):
    emit_lineage("COMPLETE", "orders.backfill", event_time="2026-01-31T23:59:59+00:00")
    assert events.all()[0]["eventTime"] == "2026-01-31T23:59:59+00:00"


def test_rows_written_outside_airflow_gives_a_materialization_facet(events):
    with lineage_run("orders.load", inputs=["raw/orders"], outputs=["main/orders"]) as run:
        run.rows_written = 1200
    start, complete = events.all()
    assert "airflowLineageProvider_materialization" not in start["run"]["facets"]
    facet = complete["run"]["facets"]["airflowLineageProvider_materialization"]
    assert facet["rowsWritten"] == 1200
    assert facet["outputs"] == [{"namespace": "default", "name": "main/orders"}]
    assert facet["_schemaURL"].endswith("/1-0-0/MaterializationRunFacet.json#/$defs/MaterializationRunFacet")


def test_no_rows_written_and_no_airflow_means_no_materialization_facet(events):
    with lineage_run("orders.load", outputs=["main/orders"]):
        pass
    assert "airflowLineageProvider_materialization" not in events.all()[-1]["run"]["facets"]


def test_negative_rows_written_is_misuse(events, caplog):
    with lineage_run("orders.load", outputs=["main/orders"]) as run:
        run.rows_written = -3
    assert "airflowLineageProvider_materialization" not in events.all()[-1]["run"]["facets"]
    assert "-3" in caplog.text
