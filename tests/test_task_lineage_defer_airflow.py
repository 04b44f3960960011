"""A LineageMixin task that defers, emitting its own events under real Airflow: one START when it starts, the
terminal event (COMPLETE, or FAIL) when the resumed part ends, same run — nothing at the deferral, which is not
an end (before, a deferring task sent COMPLETE, with the materialization facet, when it deferred, and nothing
when it resumed)."""

from __future__ import annotations

import pytest
from support.airflow_run import dags_test, listener_off_home
from support.capture import read_events
from support.environment import TEST_DAGS
from support.olschema import event_errors

pytestmark = pytest.mark.airflow

MATERIALIZATION = "airflowLineageProvider_materialization"


@pytest.fixture(scope="module")
def deferred_run(tmp_path_factory: pytest.TempPathFactory):
    """OpenLineage not configured for Airflow: the tasks emit their own events (openlineage.yml)."""
    home = tmp_path_factory.mktemp("airflow-home-defer")
    events_file = listener_off_home(home)
    result = dags_test(home, TEST_DAGS, "lineage_defer", cwd=home)
    result.events = read_events(events_file)
    return result


def test_a_resumed_task_sends_one_start_then_complete_of_the_same_run(deferred_run):
    assert "running trigger in line" in deferred_run.output, deferred_run.output[-3000:]
    events = deferred_run.of_job("lineage_defer.resumed_export")
    assert [e["eventType"] for e in events] == ["START", "COMPLETE"], deferred_run.output[-3000:]
    start, complete = events
    assert start["run"]["runId"] == complete["run"]["runId"]
    materialization = complete["run"]["facets"][MATERIALIZATION]
    assert [d["name"] for d in materialization["outputs"]] == ["/exports/orders.csv"]
    assert materialization["rowsWritten"] == 42  # recorded by the resumed part: COMPLETE was sent after it
    assert [d["name"] for d in complete["outputs"]] == ["/exports/orders.csv"]
    for event in events:
        assert event_errors(event) == []


def test_a_task_failing_after_it_resumed_sends_fail_of_the_same_run(deferred_run):
    events = deferred_run.of_job("lineage_defer.failed_export")
    assert [e["eventType"] for e in events] == ["START", "FAIL"], deferred_run.output[-3000:]
    start, fail = events
    assert start["run"]["runId"] == fail["run"]["runId"]
    assert "the export target refused the file" in fail["run"]["facets"]["errorMessage"]["message"]
    assert MATERIALIZATION not in fail["run"]["facets"]
    for event in events:
        assert event_errors(event) == []
