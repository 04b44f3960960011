"""A real deployment, set up by ``docs/deploy.md``: scheduler, DAG processor, triggerer and API server as processes,
LocalExecutor, SimpleAuthManager, the outbox transport, the consumer mounted in the API server.

The example DAGs are unpaused and triggered through the REST API with ``"logical_date": null`` (as Airflow 3's
UI does) with an Airflow JWT, then the export DAG ships the outbox to the consumer in the same API server, and
the lineage is read back with a token: every event in the outbox delivered and stored, every parent link
resolving to a run the consumer has.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from support.deployment import (
    Deadline,
    Deployment,
    airflow_deployment,
    recipe_blocks,
    recipe_settings,
    run_python,
    run_recipe_shell,
)
from support.environment import require_shared
from support.olschema import STOCK_PROVIDER_FACETS, assert_valid_event

pytestmark = pytest.mark.airflow

DAGS = Path(__file__).resolve().parents[1] / "dags"
EXAMPLES = ("example_lineage_run", "example_task_lineage")
EXPORT = "openlineage_export"
#: The custom jobs ``lineage_run`` opens inside example_lineage_run's tasks.
LINEAGE_RUN_JOBS = (
    "example_lineage_run.load_raw.bulk_insert",
    "example_lineage_run.build_customer_totals.join",
    "example_lineage_run.export_report.csv",
)
#: The whole test's time budget: deployment, runs, export and read-back (it takes 1.5-2.5 minutes).
BUDGET_SECONDS = 300.0
TERMINAL_RUN_STATES = {"success", "failed"}


@dataclass
class Outcome:
    """What the deployment did, read once; the processes keep running for the read-back tests."""

    deployment: Deployment
    namespace: str
    manual_runs: dict[str, dict[str, Any]]
    runs: dict[str, list[dict[str, Any]]]
    outbox_events: list[dict[str, Any]]
    deliveries: Counter[tuple[str, str]]
    consumer_events: list[dict[str, Any]]
    seconds: float


def _dag_runs(client: httpx.Client, dag_id: str) -> list[dict[str, Any]]:
    answer = client.get(f"/api/v2/dags/{dag_id}/dagRuns", params={"limit": 100})
    answer.raise_for_status()
    return list(answer.json()["dag_runs"])


def _task_instances(client: httpx.Client, dag_id: str, run_id: str) -> list[dict[str, Any]]:
    answer = client.get(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances", params={"limit": 100})
    answer.raise_for_status()
    return list(answer.json()["task_instances"])


def _listed(client: httpx.Client) -> bool:
    answer = client.get("/api/v2/dags", params={"limit": 100})
    return answer.status_code == 200 and {d["dag_id"] for d in answer.json()["dags"]} >= {*EXAMPLES, EXPORT}


def _unpause_and_trigger(client: httpx.Client, dag_id: str) -> dict[str, Any]:
    client.patch(f"/api/v2/dags/{dag_id}", json={"is_paused": False}).raise_for_status()
    answer = client.post(f"/api/v2/dags/{dag_id}/dagRuns", json={"logical_date": None})
    assert answer.status_code == 200, answer.text
    run = answer.json()
    assert run["logical_date"] is None, run
    return dict(run)


def _settled(
    client: httpx.Client, deployment: Deployment, dag_id: str, manual_run_id: str, scheduled: bool
) -> list[dict[str, Any]] | None:
    """The DAG's runs once the manual run, and the scheduled run unpausing creates when the DAG has a schedule,
    have ended and no other is queued or running; else ``None``."""
    deployment.check_alive()
    deployment.note_listening()
    runs = _dag_runs(client, dag_id)
    if any(run["state"] not in TERMINAL_RUN_STATES for run in runs):
        return None
    kinds = {run["run_type"] for run in runs}
    done = manual_run_id in {run["dag_run_id"] for run in runs} and (not scheduled or "scheduled" in kinds)
    return runs if done else None


def _outbox_engine(deployment: Deployment) -> sa.Engine:
    return sa.create_engine(f"sqlite:///file:{deployment.home / 'lineage_outbox.db'}?mode=ro&uri=true")


def _outbox_events(deployment: Deployment) -> list[dict[str, Any]]:
    from airflow_lineage_provider.outbox.tables import events

    if not (deployment.home / "lineage_outbox.db").exists():
        return []
    engine = _outbox_engine(deployment)
    try:
        with engine.connect() as conn:
            return [json.loads(payload) for (payload,) in conn.execute(sa.select(events.c.payload))]
    finally:
        engine.dispose()


def _outbox_deliveries(deployment: Deployment) -> Counter[tuple[str, str]]:
    from airflow_lineage_provider.outbox.tables import deliveries, destinations

    engine = _outbox_engine(deployment)
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                sa.select(destinations.c.name, deliveries.c.status, sa.func.count())
                .join(destinations, destinations.c.id == deliveries.c.destination_id)
                .group_by(destinations.c.name, deliveries.c.status)
            )
            return Counter({(name, status): count for name, status, count in rows})
    finally:
        engine.dispose()


def _expected_terminal_events(client: httpx.Client, runs: dict[str, list[dict[str, Any]]]) -> Counter[str]:
    """Per job name, the terminal events (COMPLETE/FAIL) the runs must have emitted: one per DAG run, one per
    task instance (mapped ones per index), one per ``lineage_run`` block."""
    expected: Counter[str] = Counter()
    for dag_id, dag_runs in runs.items():
        for run in dag_runs:
            expected[dag_id] += 1
            for instance in _task_instances(client, dag_id, run["dag_run_id"]):
                expected[f"{dag_id}.{instance['task_id']}"] += 1
            if dag_id == "example_lineage_run":
                expected.update(LINEAGE_RUN_JOBS)
    return expected


def _terminal_events(events: list[dict[str, Any]]) -> Counter[str]:
    return Counter(e["job"]["name"] for e in events if e.get("eventType") in ("COMPLETE", "FAIL", "ABORT"))


def _consumer_events(client: httpx.Client) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    while True:
        answer = client.get("/lineage/api/v1/events", params={"limit": 1000, "offset": len(found)})
        assert answer.status_code == 200, answer.text
        page = answer.json()["events"]
        found.extend(page)
        if not page:
            return found


def _identity(event: dict[str, Any]) -> tuple[Any, ...]:
    run = event.get("run") or {}
    job = event["job"]
    return (event.get("eventType"), run.get("runId"), event["eventTime"], job["namespace"], job["name"])


@pytest.fixture(scope="module")
def outcome(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Outcome]:
    require_shared()
    started = time.monotonic()
    deadline = Deadline(BUDGET_SECONDS)
    root = tmp_path_factory.mktemp("deployment")
    namespace = recipe_settings(recipe_blocks())["openlineage"]["namespace"]
    with airflow_deployment(root, [DAGS / f"{dag_id}.py" for dag_id in EXAMPLES], deadline) as deployment:
        with deployment.client() as client:
            deadline.wait_for("the DAG processor to list the DAGs", lambda: _listed(client))
            manual = {dag_id: _unpause_and_trigger(client, dag_id) for dag_id in EXAMPLES}
            runs: dict[str, list[dict[str, Any]]] = {}
            for dag_id, run in manual.items():
                scheduled = dag_id == "example_task_lineage"
                runs[dag_id] = deadline.wait_for(
                    f"the runs of {dag_id}",
                    lambda: _settled(client, deployment, dag_id, run["dag_run_id"], scheduled),  # noqa: B023
                    interval=2,
                )
            expected = _expected_terminal_events(client, runs)
            # The scheduler emits a DAG run's COMPLETE and the tasks their last events after the API shows the
            # run ended: ship once they are all in the outbox.
            deadline.wait_for(
                "every run's and task's terminal event in the outbox",
                lambda: not expected - _terminal_events(_outbox_events(deployment)),
                detail=lambda: f"missing {expected - _terminal_events(_outbox_events(deployment))}",
            )
            export = _unpause_and_trigger(client, EXPORT)
            runs[EXPORT] = deadline.wait_for(
                "the export DAG's runs",
                lambda: _settled(client, deployment, EXPORT, export["dag_run_id"], scheduled=True),
                interval=2,
            )
            seconds = time.monotonic() - started
            yield Outcome(
                deployment,
                namespace,
                manual,
                runs,
                _outbox_events(deployment),
                _outbox_deliveries(deployment),
                _consumer_events(client),
                seconds,
            )


def test_runs_triggered_through_the_rest_api_without_a_logical_date_succeed(outcome: Outcome) -> None:
    for dag_id in (*EXAMPLES, EXPORT):
        states = {(run["run_type"], run["state"]) for run in outcome.runs[dag_id]}
        assert states <= {("manual", "success"), ("scheduled", "success")}, (states, outcome.deployment.report())
    for run in outcome.manual_runs.values():
        assert run["run_after"] and run["logical_date"] is None


def test_the_scheduled_run_unpausing_starts_does_not_race_the_manual_one(outcome: Outcome) -> None:
    runs = outcome.runs["example_task_lineage"]
    kinds = Counter(run["run_type"] for run in runs)
    assert kinds["manual"] == 1 and kinds["scheduled"] >= 1, kinds  # two scheduled runs across midnight
    spans = sorted((run["start_date"], run["end_date"]) for run in runs)
    for earlier, later in pairwise(spans):
        assert earlier[1] <= later[0], f"runs overlapped: {spans}"


def test_templated_names_of_a_run_without_logical_date_come_from_its_run_after(outcome: Outcome) -> None:
    manual = outcome.manual_runs["example_task_lineage"]
    day = manual["run_after"][:10].replace("-", "")
    partitions = {
        output["name"]
        for event in outcome.outbox_events
        if event["job"]["name"] == "example_task_lineage.partition_orders"
        and "run" in event  # the task's run events, not its design-time JobEvent
        and event["run"]["facets"]["airflow"]["dagRun"]["run_id"] == manual["dag_run_id"]
        for output in event["outputs"]
    }
    assert partitions == {f"main.orders_{day}"}


def test_every_event_emitted_is_delivered_to_the_consumer_in_the_api_server(outcome: Outcome) -> None:
    emitted = Counter(_identity(event) for event in outcome.outbox_events)
    stored = Counter(_identity(event) for event in outcome.consumer_events)
    assert len(outcome.outbox_events) > 30
    assert stored == emitted, (emitted - stored, stored - emitted)
    statuses = {status for (_, status) in outcome.deliveries}
    assert statuses == {"delivered"}, outcome.deliveries
    host = re.search(r"--conn-host (\S+)", recipe_blocks()["connections"])
    assert host, "the recipe's connection names no host"
    destinations = {name for (name, _) in outcome.deliveries}
    assert destinations == {f"{outcome.deployment.url.replace('127.0.0.1', host[1])}/lineage/api/v1/lineage"}
    print(f"{len(emitted)} events emitted, {sum(stored.values())} delivered; whole test {outcome.seconds:.0f} s")


def test_every_event_is_valid_and_task_events_carry_the_recipes_egeria_supply_chain(outcome: Outcome) -> None:
    chain = recipe_settings(recipe_blocks())["lineage_provider"]["information_supply_chain"]
    for event in outcome.consumer_events:
        assert_valid_event(event, ignore=STOCK_PROVIDER_FACETS)
    task_events = [e for e in outcome.consumer_events if e["job"]["name"].count(".") == 1 and "run" in e]
    assert task_events
    for event in task_events:
        facet = event["run"]["facets"].get("egeria_informationSupplyChain")
        assert facet == {**facet, "iscQualifiedName": chain}, (event["job"]["name"], event["eventType"])
    assert {e["job"]["namespace"] for e in outcome.consumer_events if "run" in e} == {outcome.namespace}


def test_the_export_dag_publishes_the_declared_lineage_of_the_dags(outcome: Outcome) -> None:
    declared = {e["job"]["name"]: e for e in outcome.consumer_events if "run" not in e}  # JobEvents
    tasks = {f"{dag_id}.{t}" for dag_id in EXAMPLES for t in ("stage_orders", "partition_orders", "load_raw")}
    assert {name for name in tasks if name in declared} == {
        "example_task_lineage.stage_orders",
        "example_task_lineage.partition_orders",
        "example_lineage_run.load_raw",
    }
    (output,) = declared["example_task_lineage.partition_orders"]["outputs"]
    assert (output["namespace"], output["name"]) == (
        f"sqlite://{outcome.deployment.home / 'warehouse.db'}",
        "main.orders_{{ ds_nodash }}",
    )


def test_every_parent_link_resolves_to_a_run_the_consumer_has(outcome: Outcome) -> None:
    links = {
        (event["run"]["runId"], event["run"]["facets"]["parent"]["run"]["runId"])
        for event in outcome.consumer_events
        if "parent" in event.get("run", {}).get("facets", {})
    }
    nested = {e["run"]["runId"] for e in outcome.consumer_events if "run" in e and "." in e["job"]["name"]}
    assert {child for child, _ in links} == nested  # every task's and lineage_run block's run has its parent
    with outcome.deployment.client() as client:
        for child, parent in sorted(links):
            answer = client.get(f"/lineage/api/v1/runs/{child}")
            assert answer.status_code == 200, answer.text
            assert answer.json()["parentRunId"] == parent
            assert client.get(f"/lineage/api/v1/runs/{parent}").status_code == 200, f"parent run {parent} unknown"
    print(f"{len(links)} parent links resolve")


def test_the_lineage_reads_back_with_a_token_and_not_without(outcome: Outcome) -> None:
    warehouse = f"sqlite://{outcome.deployment.home / 'warehouse.db'}"  # the recipe's example connection
    node = f"dataset:{warehouse}:main.customer_totals"
    with outcome.deployment.client() as client:
        graph = client.get("/lineage/api/v1/lineage", params={"nodeId": node, "depth": 2})
        assert graph.status_code == 200, graph.text
        runs = client.get(
            "/lineage/api/v1/runs",
            params={"jobNamespace": outcome.namespace, "jobName": "example_lineage_run.load_raw"},
        )
        assert runs.status_code == 200, runs.text
        assert runs.json()["totalCount"] == 1
    writers = {edge["origin"] for item in graph.json()["graph"] if item["id"] == node for edge in item["inEdges"]}
    assert writers == {f"job:{outcome.namespace}:example_lineage_run.build_customer_totals.join"}
    anonymous = httpx.get(f"{outcome.deployment.url}/lineage/api/v1/lineage", params={"nodeId": node}, timeout=30)
    assert anonymous.status_code == 401


def test_nothing_listens_beyond_loopback(outcome: Outcome) -> None:
    listening = outcome.deployment.note_listening()
    assert any(process.startswith("api-server") for process, _, _ in listening), listening
    assert {address for _, address, _ in listening} == {"127.0.0.1"}, listening


def test_the_recipes_connections_take_a_key_that_begins_with_a_dash(outcome: Outcome) -> None:
    """``secrets.token_urlsafe`` begins a key with ``-`` about once in 64: the recipe's commands must take it as a
    value, not as an option. The block runs again as written, on fresh connection
    ids, with the generated key replaced by one that begins with ``-``."""
    key = "-dash-" + "k" * 37
    block = recipe_blocks()["connections"]
    assert block.startswith("LINEAGE_KEY=$("), "the recipe no longer generates its key on its first line"
    script = f"LINEAGE_KEY='{key}'\n" + block.split("\n", 1)[1]
    script = script.replace("openlineage_default", "openlineage_dash_key").replace(
        "airflow_metadata_readonly", "airflow_metadata_dash_key"
    )
    run_recipe_shell(script, outcome.deployment.env, outcome.deployment.root)
    read = (
        "from airflow.models.connection import Connection\n"
        "print('password=' + Connection.get_connection_from_secrets('openlineage_dash_key').password)"
    )
    shown = run_python(read, outcome.deployment.env, outcome.deployment.root)
    assert f"password={key}" in shown.splitlines(), shown
