"""Helpers for the consumer's tests: event builders, graph-response readers and a live uvicorn server.

Valid events are built with openlineage-python's ``event_v2`` classes and ``Serde`` and checked against
../shared/spec; tests of invalid input write their dicts by hand, on purpose.
"""

from __future__ import annotations

import json
import threading
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

from openlineage.client.event_v2 import (
    DatasetEvent,
    InputDataset,
    Job,
    JobEvent,
    OutputDataset,
    Run,
    RunEvent,
    RunState,
    StaticDataset,
)
from openlineage.client.facet_v2 import column_lineage_dataset, schema_dataset
from openlineage.client.serde import Serde

from support.feast_consumer import free_port  # one free-port helper for every test server
from support.olschema import assert_valid_event, shared_available
from support.waiting import wait_until

PRODUCER = "https://github.com/acme/airflow-lineage-provider/tests"
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)


def at(seconds: float) -> str:
    """An event time ``seconds`` after a fixed instant, ISO 8601 with zone."""
    return (T0 + timedelta(seconds=seconds)).isoformat()


def _json(event: Any) -> dict[str, Any]:
    data = json.loads(Serde.to_json(event))
    if shared_available():
        assert_valid_event(data)
    return data


def dataset(name: str, namespace: str = "warehouse", fields: list[str] | None = None, columns: Any = None) -> Any:
    """A dataset dict for :func:`run_event` (namespace, name and optional schema / column lineage)."""
    return {"namespace": namespace, "name": name, "fields": fields, "columns": columns}


def _facets(spec: dict[str, Any]) -> dict[str, Any]:
    facets: dict[str, Any] = {}
    if spec.get("fields"):
        facets["schema"] = schema_dataset.SchemaDatasetFacet(
            fields=[schema_dataset.SchemaDatasetFacetFields(name=f, type="VARCHAR") for f in spec["fields"]]
        )
    if spec.get("columns"):
        facets["columnLineage"] = column_lineage_dataset.ColumnLineageDatasetFacet(
            fields={
                target: column_lineage_dataset.Fields(
                    inputFields=[
                        column_lineage_dataset.InputField(namespace=ns, name=name, field=field)
                        for ns, name, field in sources
                    ],
                    transformationDescription="",
                    transformationType="IDENTITY",
                )
                for target, sources in spec["columns"].items()
            }
        )
    return facets


def run_event(
    event_type: str,
    job: str,
    run_id: str | None = None,
    time: float = 0,
    inputs: list[dict[str, Any]] = (),  # type: ignore[assignment]
    outputs: list[dict[str, Any]] = (),  # type: ignore[assignment]
    namespace: str = "pipelines",
) -> dict[str, Any]:
    """A RunEvent as JSON, built with openlineage-python and checked against ../shared/spec."""
    event = RunEvent(
        eventType=RunState[event_type],
        eventTime=at(time),
        run=Run(runId=run_id or str(uuid.uuid4())),
        job=Job(namespace=namespace, name=job),
        producer=PRODUCER,
        inputs=[InputDataset(namespace=d["namespace"], name=d["name"], facets=_facets(d)) for d in inputs],
        outputs=[OutputDataset(namespace=d["namespace"], name=d["name"], facets=_facets(d)) for d in outputs],
    )
    return _json(event)


def job_event(job: str, inputs: list[dict[str, Any]], outputs: list[dict[str, Any]], time: float = 0) -> dict[str, Any]:
    """A JobEvent as JSON (lineage without a run)."""
    event = JobEvent(
        eventTime=at(time),
        job=Job(namespace="pipelines", name=job),
        producer=PRODUCER,
        inputs=[InputDataset(namespace=d["namespace"], name=d["name"], facets=_facets(d)) for d in inputs],
        outputs=[OutputDataset(namespace=d["namespace"], name=d["name"], facets=_facets(d)) for d in outputs],
    )
    return _json(event)


def dataset_event(spec: dict[str, Any], time: float = 0) -> dict[str, Any]:
    """A DatasetEvent as JSON."""
    event = DatasetEvent(
        eventTime=at(time),
        dataset=StaticDataset(namespace=spec["namespace"], name=spec["name"], facets=_facets(spec)),
        producer=PRODUCER,
    )
    return _json(event)


def graph_ids(response_json: dict[str, Any]) -> set[str]:
    """The node ids of a graph response."""
    return {node["id"] for node in response_json["graph"]}


def graph_edges(response_json: dict[str, Any]) -> set[tuple[str, str]]:
    """Every ``(origin, destination)`` of a graph response, checked to agree between its two ends."""
    out = {(e["origin"], e["destination"]) for node in response_json["graph"] for e in node["outEdges"]}
    incoming = {(e["origin"], e["destination"]) for node in response_json["graph"] for e in node["inEdges"]}
    assert out == incoming, "inEdges and outEdges disagree"
    return out


class LiveServer:
    """The app served by a real uvicorn on 127.0.0.1 in a thread, stopped on exit."""

    def __init__(self, app: Any) -> None:
        import uvicorn

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> LiveServer:
        self.thread.start()

        def started() -> bool:
            assert self.thread.is_alive(), "uvicorn ended before it started"
            return self.server.started

        wait_until(started, "uvicorn did not start", timeout=20)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=20)


def on_a_request_thread() -> bool:
    """Whether the statement being recorded is a request's, not the deferred applier's (which applies earlier
    posts in its own thread, whenever it does: statement counts of a read leave it out)."""
    import threading

    from airflow_lineage_provider.consumer.store.write.deferred_apply import APPLIER_THREAD

    return threading.current_thread().name != APPLIER_THREAD
