"""Egeria's facets on the stock listener's own DAG-run events, added by ``EgeriaDagRunTransformer`` in
openlineage-python's ``transform`` transport around the real file transport, in real ``airflow dags test`` runs."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from openlineage.client.transport import Config, Transport
from support.airflow_run import VENV_BIN, DagRunResult, airflow_env
from support.capture import read_events
from support.facets_airflow import (
    CUSTOM_RUN_FACETS_ENV,
    DAGS,
    LOGICAL_DATE,
    _migrated_database,
    assert_events_valid,
    run_facets_of,
    task_events,
)

from airflow_lineage_provider.design.dag_run_transformer import (
    EgeriaDagRunTransformer,
    EgeriaDagRunTransport,
    transformer_configured,
)
from airflow_lineage_provider.facets import GOVERNANCE_ACTION_KEY, INFORMATION_SUPPLY_CHAIN_KEY

TRANSFORMER = f"{EgeriaDagRunTransformer.__module__}.{EgeriaDagRunTransformer.__qualname__}"
TRANSPORT = f"{EgeriaDagRunTransport.__module__}.{EgeriaDagRunTransport.__qualname__}"
DAG_SUPPLY_CHAIN = "InformationSupplyChain::sales-orders"
TASK_SUPPLY_CHAIN = "InformationSupplyChain::finance-ledger"
PLATFORM_SUPPLY_CHAIN = "InformationSupplyChain::platform-default"
REPLAY_SUPPLY_CHAIN = "InformationSupplyChain::replay"


def egeria_transport(events_file: Path, generic: bool = False) -> dict[str, Any]:
    """The recipe's transport around the real file transport: ``EgeriaDagRunTransport``, or with ``generic``
    openlineage-python's own ``transform`` transport naming the transformer."""
    inner = {"type": "file", "log_file_path": str(events_file), "append": True}
    if generic:
        return {"type": "transform", "transformer_class": TRANSFORMER, "transport": inner}
    return {"type": TRANSPORT, "transport": inner}


class DagsTest:
    """One ``airflow dags test`` on a fresh copy of the migrated metadata database; the home stays for reads."""

    def __init__(self, root: Path, dag_file: str, migrated: Path) -> None:
        self.home, self.dags, self.events_file = root / "home", root / "dags", root / "events.ndjson"
        self.home.mkdir()
        self.dags.mkdir()
        shutil.copy(migrated, self.home / "airflow.db")
        shutil.copy(DAGS / dag_file, self.dags / dag_file)

    def env(self, extra: dict[str, str], generic: bool = False) -> dict[str, str]:
        transport = {"AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(egeria_transport(self.events_file, generic))}
        return airflow_env(self.home, self.dags, {**CUSTOM_RUN_FACETS_ENV, **transport, **extra})

    def test(
        self, dag_id: str, extra: dict[str, str], run_conf: dict[str, Any] | None = None, generic: bool = False
    ) -> DagRunResult:
        command = [str(VENV_BIN / "airflow"), "dags", "test", dag_id, LOGICAL_DATE]
        if run_conf is not None:
            command += ["--conf", json.dumps(run_conf)]
        done = subprocess.run(command, env=self.env(extra, generic), capture_output=True, text=True, timeout=300)
        return DagRunResult(done.returncode, done.stdout + done.stderr, read_events(self.events_file))


#: A finished ``airflow dags test`` and what it sent.
Finished = tuple[DagsTest, DagRunResult]


def dag_run_events(result: DagRunResult, dag_id: str) -> dict[str, dict[str, Any]]:
    """The DAG run's own events by type; exactly one of each kind sent."""
    events = result.of_job(dag_id)
    by_type = {e["eventType"]: e for e in events}
    assert len(by_type) == len(events), [e["eventType"] for e in events]
    return by_type


@pytest.fixture(scope="module")
def failing_run(tmp_path_factory: pytest.TempPathFactory) -> Finished:
    run = DagsTest(
        tmp_path_factory.mktemp("egeria-transform-fail"), "facets_egeria_dag.py", _migrated_database(tmp_path_factory)
    )
    return run, run.test("facets_egeria", {})


@pytest.mark.airflow
def test_the_failed_dag_runs_fail_event_carries_the_dags_egeria_facets(
    failing_run: Finished,
) -> None:
    _, result = failing_run
    assert_events_valid(result)
    events = dag_run_events(result, "facets_egeria")
    assert "FAIL" in events, result.output[-4000:]  # one task of the DAG fails on purpose
    facets = run_facets_of(events["FAIL"])
    assert facets[INFORMATION_SUPPLY_CHAIN_KEY]["iscQualifiedName"] == DAG_SUPPLY_CHAIN
    assert facets[GOVERNANCE_ACTION_KEY]["processName"] == "SalesOrdersPipeline"
    assert facets[GOVERNANCE_ACTION_KEY]["engineActionGUID"] == "5d0e7a3c-6f0b-4a59-9a77-5f1f6b0d1c11"
    assert "airflowDagRun" in facets and "errorMessage" in facets  # the stock event, not one of ours
    # The facets are on the stock event itself: the listener's extra RUNNING event is not sent.
    assert "RUNNING" not in events


@pytest.mark.airflow
def test_task_events_pass_the_transformer_unchanged(failing_run: Finished) -> None:
    _, result = failing_run
    overridden = task_events(result, "facets_egeria", "overridden")["COMPLETE"]
    assert run_facets_of(overridden)[INFORMATION_SUPPLY_CHAIN_KEY]["iscQualifiedName"] == TASK_SUPPLY_CHAIN
    opted_out = task_events(result, "facets_egeria", "opted_out")["COMPLETE"]
    assert INFORMATION_SUPPLY_CHAIN_KEY not in run_facets_of(opted_out)
    assert GOVERNANCE_ACTION_KEY not in run_facets_of(opted_out)


@pytest.mark.airflow
def test_the_completed_dag_runs_event_carries_the_runs_conf_over_the_platform_default(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    run = DagsTest(
        tmp_path_factory.mktemp("egeria-transform-ok"), "facets_defaults_dag.py", _migrated_database(tmp_path_factory)
    )
    extra = {"AIRFLOW__LINEAGE_PROVIDER__INFORMATION_SUPPLY_CHAIN": PLATFORM_SUPPLY_CHAIN}
    # openlineage-python's own transform transport naming the transformer: the same events.
    result = run.test("facets_defaults", extra, {"information_supply_chain": REPLAY_SUPPLY_CHAIN}, generic=True)
    assert result.returncode == 0, result.output[-4000:]
    assert_events_valid(result)
    events = dag_run_events(result, "facets_defaults")
    assert "COMPLETE" in events and "RUNNING" not in events, result.output[-4000:]
    facets = run_facets_of(events["COMPLETE"])
    assert facets[INFORMATION_SUPPLY_CHAIN_KEY]["iscQualifiedName"] == REPLAY_SUPPLY_CHAIN
    assert GOVERNANCE_ACTION_KEY not in facets  # neither the DAG nor the platform names one


@pytest.mark.airflow
def test_a_scheduled_runs_start_and_complete_carry_the_facets_from_the_scheduler(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """The production path: the scheduler's stock listener sends START and COMPLETE from its process pool."""
    migrated = _migrated_database(tmp_path_factory)
    run = DagsTest(tmp_path_factory.mktemp("egeria-transform-scheduler"), "egeria_dag_run_dag.py", migrated)
    env = run.env({})

    def airflow(*arguments: str) -> None:
        done = subprocess.run([str(VENV_BIN / "airflow"), *arguments], env=env, capture_output=True, text=True)
        assert done.returncode == 0, f"airflow {' '.join(arguments)}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}"

    airflow("dags", "reserialize")
    airflow("dags", "unpause", "egeria_dag_run")
    run_conf = {"information_supply_chain": REPLAY_SUPPLY_CHAIN}
    airflow("dags", "trigger", "egeria_dag_run", "--conf", json.dumps(run_conf))
    log_path = run.home / "scheduler.log"
    with log_path.open("w") as log:
        command = [str(VENV_BIN / "airflow"), "scheduler", "--skip-serve-logs"]
        scheduler = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while "COMPLETE" not in {e["eventType"] for e in read_events(run.events_file)}:
            assert scheduler.poll() is None and time.monotonic() < deadline, log_path.read_text()[-4000:]
            time.sleep(0.5)
    finally:
        os.killpg(scheduler.pid, signal.SIGTERM)
        scheduler.wait(timeout=60)
    result = DagRunResult(0, log_path.read_text(), read_events(run.events_file))
    assert_events_valid(result)
    events = dag_run_events(result, "egeria_dag_run")
    assert set(events) == {"START", "COMPLETE"}, result.output[-4000:]  # and no extra RUNNING event
    for event in events.values():
        facets = run_facets_of(event)
        assert facets[INFORMATION_SUPPLY_CHAIN_KEY]["iscQualifiedName"] == REPLAY_SUPPLY_CHAIN  # the run's conf
        assert facets[GOVERNANCE_ACTION_KEY] == {  # the DAG's params
            "_producer": facets[GOVERNANCE_ACTION_KEY]["_producer"],
            "_schemaURL": facets[GOVERNANCE_ACTION_KEY]["_schemaURL"],
            "processName": "SalesOrdersPipeline",
            "processStepName": "load",
        }


#: Sends two stock-shaped DAG-run events through ``EgeriaDagRunTransport`` around the file transport, in the
#: metadata database of a finished run: one naming the DAG's serialized version 1 (the DAG's params apply), one
#: naming a version that does not exist (reading the DAG fails: the event must still be sent, unchanged).
_SEND_BY_VERSION = """
import sys
from airflow.providers.openlineage.plugins.facets import AirflowDagRunFacet
from openlineage.client.event_v2 import Job, Run, RunEvent, RunState
from openlineage.client.transport import get_default_factory

transport_type, events_file = sys.argv[1], sys.argv[2]
inner = {"type": "file", "log_file_path": events_file, "append": True}
transport = get_default_factory().create({"type": transport_type, "transport": inner})
for run_id, version in (("01a24982-0000-7000-8000-000000000001", 1), ("01a24982-0000-7000-8000-000000000002", 999)):
    dag_run = {"dag_id": "facets_egeria", "run_id": "manual", "conf": {}, "dag_version_number": version}
    facet = AirflowDagRunFacet(dag={"dag_id": "facets_egeria"}, dagRun=dag_run)
    transport.emit(RunEvent(eventType=RunState.START, eventTime="2026-02-01T00:00:00+00:00",
        run=Run(runId=run_id, facets={"airflowDagRun": facet}), job=Job(namespace="default", name="facets_egeria"),
        producer="https://example.com/stock-listener"))
"""


@pytest.mark.airflow
def test_a_versions_params_are_read_and_a_failure_to_read_them_loses_no_event(
    failing_run: Finished, tmp_path: Path
) -> None:
    run, _ = failing_run
    events_file = tmp_path / "start.ndjson"
    done = subprocess.run(
        [sys.executable, "-c", _SEND_BY_VERSION, TRANSPORT, str(events_file)],
        env=airflow_env(run.home, run.dags),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    found, missing = read_events(events_file)
    assert run_facets_of(found)[INFORMATION_SUPPLY_CHAIN_KEY]["iscQualifiedName"] == DAG_SUPPLY_CHAIN
    assert set(run_facets_of(missing)) == {"airflowDagRun"}  # sent as it came
    output = done.stdout + done.stderr
    assert "were not added to its event" in output and "version 999" in output, output[-4000:]


def test_the_transformer_is_found_wherever_the_configuration_nests_it() -> None:
    http = {"type": "http", "url": "http://127.0.0.1:5000"}
    ours = {"type": "transform", "transformer_class": TRANSFORMER, "transport": http}
    other = "openlineage.client.transport.transform.JobNamespaceReplaceTransformer"
    assert transformer_configured({"transport": ours})
    assert transformer_configured({"transport": {"type": TRANSPORT, "transport": http}})
    assert transformer_configured({"transport": {"type": "composite", "transports": [{"type": TRANSPORT}]}})
    assert transformer_configured({"transport": {"type": "composite", "transports": [http, ours]}})
    assert transformer_configured({"transport": {"type": "composite", "transports": {"a": http, "b": ours}}})
    assert transformer_configured({"transport": {"type": "transform", "transformer_class": other, "transport": ours}})
    assert not transformer_configured({"transport": http})
    assert not transformer_configured({"transport": {**ours, "transformer_class": other}})
    assert not transformer_configured({"transport": {**ours, "transformer_class": "no.such.Transformer"}})
    assert not transformer_configured(None)


def test_events_of_tasks_and_events_that_carry_the_facets_pass_untouched() -> None:
    from openlineage.client.event_v2 import Job, Run, RunEvent, RunState

    from airflow_lineage_provider.facets.egeria import information_supply_chain_facet

    def event(facets: dict[str, Any]) -> RunEvent:
        return RunEvent(
            eventType=RunState.COMPLETE,
            eventTime="2026-02-01T00:00:00+00:00",
            run=Run(runId="01a24982-0000-7000-8000-000000000003", facets=facets),
            job=Job(namespace="default", name="a_dag.a_task"),
            producer="https://example.com/stock-listener",
        )

    transformer = EgeriaDagRunTransformer(properties={})
    task_event = event({})
    assert transformer.transform(task_event) is task_event and task_event.run.facets == {}
    own = {INFORMATION_SUPPLY_CHAIN_KEY: information_supply_chain_facet(DAG_SUPPLY_CHAIN), "airflowDagRun": object()}
    carrying = event(dict(own))
    assert transformer.transform(carrying).run.facets == own


def test_the_documented_recipes_name_the_transformer() -> None:
    import re

    page = (Path(__file__).resolve().parents[1] / "docs" / "egeria.md").read_text()
    recipes = [block for block in re.findall(r"```ini\n(.*?)```", page, re.DOTALL) if "EgeriaDagRun" in block]
    assert len(recipes) == 2  # EgeriaDagRunTransport, and openlineage-python's transform transport
    for recipe in recipes:
        transport = json.loads(recipe.split("transport =", 1)[1])
        assert transformer_configured({"transport": transport}), recipe
        assert transport["transport"]["type"] == "http"  # the user's own transport, wrapped


class RecordingTransport(Transport):
    """A transport keeping what it is given, to see which objects reach it."""

    kind = "recording"
    config_class = Config

    def __init__(self, config: Config) -> None:
        self.sent: list[Any] = []

    def emit(self, event: Any) -> None:
        self.sent.append(event)


def test_the_egeria_transport_hands_task_events_on_as_they_came_and_copies_only_dag_run_events() -> None:
    from openlineage.client.event_v2 import Job, Run, RunEvent, RunState
    from openlineage.client.transport import get_default_factory

    transport = get_default_factory().create(
        {"type": TRANSPORT, "transport": {"type": f"{__name__}.RecordingTransport"}}
    )
    inner = transport.transport
    assert isinstance(inner, RecordingTransport)

    def event(facets: dict[str, Any]) -> RunEvent:
        return RunEvent(
            eventType=RunState.START,
            eventTime="2026-02-01T00:00:00+00:00",
            run=Run(runId="01a24982-0000-7000-8000-000000000004", facets=facets),
            job=Job(namespace="default", name="a_dag"),
            producer="https://example.com/stock-listener",
        )

    task_event = event({})
    transport.emit(task_event)
    assert inner.sent == [task_event] and inner.sent[0] is task_event  # not copied, not transformed
    from airflow.providers.openlineage.plugins.facets import AirflowDagRunFacet

    switched_off = {"AIRFLOW__LINEAGE_PROVIDER__DAG_RUN_EGERIA_FACETS": "False"}
    dag_run_event = event({"airflowDagRun": AirflowDagRunFacet(dag={"dag_id": "a_dag"}, dagRun={"dag_id": "a_dag"})})
    with pytest.MonkeyPatch.context() as patch:
        for key, value in switched_off.items():
            patch.setenv(key, value)
        transport.emit(dag_run_event)
    assert inner.sent[1] is not dag_run_event and inner.sent[1] == dag_run_event  # the transform transport's copy
