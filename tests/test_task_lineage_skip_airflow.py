"""A skipped @task.lineage / LineageMixin task under real Airflow: COMPLETE, as the stock listener reports a skipped
task, with the Egeria facets and without the materialization facet (docs/materialization.md: never on the
COMPLETE event of a skipped task) — whether the listener or the task itself emits the events."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.airflow_run import dags_test, listener_off_home
from support.capture import read_events
from support.environment import TEST_DAGS

pytestmark = pytest.mark.airflow

TASKS = ("lineage_skip.skipped_function", "lineage_skip.skipped_operator")
MATERIALIZATION = "airflowLineageProvider_materialization"


@pytest.fixture(scope="module")
def listener_off(tmp_path_factory: pytest.TempPathFactory):
    """OpenLineage not configured for Airflow: the tasks emit their own events (openlineage.yml)."""
    home = tmp_path_factory.mktemp("airflow-home-skip-off")
    events_file = listener_off_home(home)
    result = dags_test(home, TEST_DAGS, "lineage_skip", cwd=home)
    result.events = read_events(events_file)
    return result


@pytest.fixture(scope="module")
def listener_on(airflow_home: Path, tmp_path_factory: pytest.TempPathFactory):
    """The stock listener active: it reports the skip and asks the mixin for the COMPLETE lineage."""
    events_file = tmp_path_factory.mktemp("skip-on") / "events.ndjson"
    return dags_test(airflow_home, TEST_DAGS, "lineage_skip", events_file=events_file)


@pytest.mark.parametrize("mode", ["listener_off", "listener_on"])
def test_a_skipped_task_sends_complete_without_the_materialization_facet(mode, request):
    result = request.getfixturevalue(mode)
    assert result.returncode == 0, result.output[-4000:]
    for job in TASKS:
        events = result.of_job(job)
        assert [e["eventType"] for e in events] == ["START", "COMPLETE"], (job, result.output[-3000:])
        complete = events[-1]
        assert MATERIALIZATION not in complete["run"]["facets"], job
        assert complete["outputs"], job  # the declared outputs are still reported
        assert complete["run"]["facets"]["egeria_informationSupplyChain"]["iscQualifiedName"] == (
            "InformationSupplyChain::exports"
        )
