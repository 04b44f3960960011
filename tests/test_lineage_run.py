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


# -- redaction: lineage_run's events are redacted as the stock api.emit redacts them -------------


def _same_event_both_routes(event):
    """Send copies of ``event`` through this package's route and the stock ``api.emit``."""
    import copy

    from airflow.providers.openlineage.api import emit

    from airflow_lineage_provider.producer import client

    client.send(copy.deepcopy(event))
    emit(copy.deepcopy(event))


def _event_with(job_name: str, run_facets: dict, parent=None):
    from airflow_lineage_provider.producer.emit import EventType, build_run_event

    return build_run_event(
        EventType.COMPLETE,
        job_namespace="default",
        job_name=job_name,
        run_id=str(uuid.uuid4()),
        inputs=[],
        outputs=[],
        run_facets=run_facets,
        parent=parent,
    )


def test_a_masked_secret_is_redacted_as_the_stock_route_redacts_it_and_shared_facets_stay_intact(events):
    from airflow.sdk.log import mask_secret

    from airflow_lineage_provider import conf
    from airflow_lineage_provider.parent_run import RunLink
    from airflow_lineage_provider.producer import client

    secret = "s3cr3t-value-4711"
    mask_secret(secret)
    client.reset()  # the listener's adapter takes the masker's secrets when it is created
    link = RunLink("default", f"job-{secret}", str(uuid.uuid4()))
    event = _event_with("orders.load", {"note": {"text": f"token {secret} used"}}, parent=link)
    _same_event_both_routes(event)
    ours, stock = events.all(ignore_facets={"note"})
    assert ours == stock
    assert ours["run"]["facets"]["note"]["text"] == "token *** used"
    # The parent facet object is shared by a run's events: the stock redactor was given a copy.
    assert link.parent_facet(conf.producer()).job.name == f"job-{secret}"
    with lineage_run("orders.load", run_facets={"note": {"text": secret}}):
        pass
    assert events.all(ignore_facets={"note"})[-1]["run"]["facets"]["note"]["text"] == "***"


def test_sensitive_keys_are_redacted_as_the_stock_route_does(events):
    with lineage_run("orders.load", run_facets={"vendor": {"password": "hunter2-longer", "region": "eu"}}):
        pass
    vendor = events.all(ignore_facets={"vendor"})[-1]["run"]["facets"]["vendor"]
    assert (vendor["password"], vendor["region"]) == ("***", "eu")


def test_clean_events_come_out_as_the_stock_route_leaves_them(events):
    from airflow_lineage_provider.parent_run import RunLink

    event = _event_with(
        "orders.load",
        {"vendor": {"region": "eu", "tags": ["a", None]}, **schema_facet("x", {"id": "INT"})["facets"]},
        parent=RunLink("default", "outer", str(uuid.uuid4())),
    )
    _same_event_both_routes(event)
    ours, stock = events.all(ignore_facets={"vendor", "schema"})
    assert ours == stock


def test_a_secret_only_in_fields_the_stock_redactor_skips_is_left_as_the_stock_route_leaves_it(events):
    """Job and dataset names, the run id, the producer: openlineage-python marks them ``skip_redact`` and the stock
    redactor leaves them as they are; both routes agree."""
    from airflow.sdk.log import mask_secret

    from airflow_lineage_provider.producer import client
    from airflow_lineage_provider.producer.dataset_refs import to_dataset_refs
    from airflow_lineage_provider.producer.emit import EventType, build_run_event

    secret = "sk1pped-s3cret-0815"
    mask_secret(secret)
    client.reset()
    event = build_run_event(
        EventType.COMPLETE,
        job_namespace="default",
        job_name=f"job-{secret}",
        run_id=str(uuid.uuid4()),
        inputs=to_dataset_refs([f"db/{secret}"], "inputs"),
        outputs=[],
    )
    _same_event_both_routes(event)
    ours, stock = events.all()
    assert ours == stock
    assert ours["job"]["name"] == f"job-{secret}"


def test_a_dict_facet_keeps_its_own_schema_url_through_the_stock_route(events):
    """A facet dict's ``_schemaURL`` becomes a facet class naming it (openlineage-python's ``_get_schema``), and
    survives the copy the stock redactor is given."""
    url = "https://example.com/schemas/Vendor.json#/$defs/VendorRunFacet"
    with lineage_run("orders.load", run_facets={"vendor": {"_schemaURL": url, "region": "eu"}}):
        pass
    complete = events.all(ignore_facets={"vendor"})[-1]  # run facets go on the terminal event
    assert complete["eventType"] == "COMPLETE"
    assert complete["run"]["facets"]["vendor"] == {"_producer": complete["producer"], "_schemaURL": url, "region": "eu"}
