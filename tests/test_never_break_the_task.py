"""Lineage never breaks the user's code: emission failures are logged once; misuse is reported."""

from __future__ import annotations

import http.server
import logging
import threading
import uuid

import pytest

from airflow_lineage_provider import emit_lineage, lineage_run


@pytest.fixture
def failing_consumer():
    """A real HTTP consumer on 127.0.0.1 that answers every POST with 500."""
    hits = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            hits.append(self.rfile.read(int(self.headers["Content-Length"])))
            self.send_response(500)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}", hits
    server.shutdown()


def test_failing_transport_never_reaches_the_block(failing_consumer, monkeypatch, lineage_client_reset, caplog):
    url, hits = failing_consumer
    monkeypatch.setenv("OPENLINEAGE__TRANSPORT__TYPE", "http")
    monkeypatch.setenv("OPENLINEAGE__TRANSPORT__URL", url)
    monkeypatch.setenv("OPENLINEAGE__TRANSPORT__RETRY", '{"total": 0}')
    results = []
    for _ in range(3):
        with lineage_run("orders.load", outputs=["main/orders"]):
            results.append("done")
    assert results == ["done"] * 3
    assert len(hits) == 6  # every event really reached the failing consumer


def test_unusable_facets_are_dropped_and_logged_once(events, caplog):
    caplog.set_level(logging.DEBUG, logger="airflow_lineage_provider")
    for _ in range(2):
        with lineage_run("orders.load", run_facets={"bad": 42, "opaque": {"value": object()}}) as run:
            run.add_run_facet("rows", {"count": 3})
    emitted = events.all(ignore_facets={"rows"})
    assert [e["eventType"] for e in emitted] == ["START", "COMPLETE"] * 2
    complete = emitted[-1]
    assert "bad" not in complete["run"]["facets"] and "opaque" not in complete["run"]["facets"]
    assert complete["run"]["facets"]["rows"]["count"] == 3
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert sum("facet 'bad' is 42 (int)" in w for w in warnings) == 1
    assert sum("facet 'opaque' is not JSON-serializable" in w for w in warnings) == 1


def test_unusable_facet_raises_before_the_block_in_strict_mode(events, strict):
    with pytest.raises(TypeError, match="facet 'bad' is 42"):
        lineage_run("orders.load", run_facets={"bad": 42})


def test_disabled_openlineage_emits_nothing(events, monkeypatch):
    monkeypatch.setenv("AIRFLOW__OPENLINEAGE__DISABLED", "True")
    with lineage_run("orders.load", outputs=["main/orders"]) as run:
        pass
    assert emit_lineage("COMPLETE", "orders.load") is not None
    assert uuid.UUID(run.run_id)
    assert events.all() == []


def test_legacy_disabled_variable_emits_nothing(events, monkeypatch):
    monkeypatch.setenv("OPENLINEAGE_DISABLED", "true")
    with lineage_run("orders.load"):
        pass
    assert events.all() == []


# Misuse: reported with the value and the accepted forms; skipped by default, raised when strict.


def test_non_uuid_run_id_is_replaced_and_logged(events, caplog):
    with lineage_run("orders.load", run_id="run-42") as run:
        pass
    assert uuid.UUID(run.run_id).version == 7
    assert "run_id 'run-42' is not a UUID" in caplog.text
    assert {e["run"]["runId"] for e in events.all()} == {run.run_id}


def test_non_uuid_run_id_raises_before_the_block_in_strict_mode(events, strict):
    ran = []
    with (
        pytest.raises(ValueError, match="run_id 'run-42' is not a UUID; pass a UUID string"),
        lineage_run("orders.load", run_id="run-42"),
    ):
        ran.append(True)
    assert ran == []
    assert events.all() == []


def test_unsupported_dataset_is_skipped_and_the_others_kept(events, caplog):
    with lineage_run("orders.load", inputs=["raw/orders", 42, "raw/customers"]):
        pass
    assert [d["name"] for d in events.all()[0]["inputs"]] == ["raw/orders", "raw/customers"]
    assert "inputs: dataset 42 (int) is not a supported form; pass a 'database/table' string" in caplog.text


def test_unsupported_dataset_raises_type_error_in_strict_mode(events, strict):
    with pytest.raises(TypeError, match=r"outputs: dataset \{1, 2\} \(set\) is not a supported form"):
        lineage_run("orders.load", outputs=[{1, 2}])


def test_unknown_event_type_is_skipped(events, caplog):
    assert emit_lineage("FINISHED", "orders.load") is None
    assert events.all() == []
    assert "event type 'FINISHED' is not one of START, RUNNING, COMPLETE, ABORT, FAIL, OTHER" in caplog.text


def test_unknown_event_type_raises_in_strict_mode(events, strict):
    with pytest.raises(ValueError, match="event type 'FINISHED' is not one of"):
        emit_lineage("FINISHED", "orders.load")


def test_unsupported_connector_is_reported(events, strict):
    with pytest.raises(TypeError, match=r"connector for 'main' is 3\.14 \(float\); pass a SQLAlchemy Engine"):
        lineage_run("orders.load", connector={"main": 3.14})
