"""The consumer benchmark's workload: 10 layers of jobs, each reading 2-3 datasets of the layer before.

Every job runs once: a START and a COMPLETE event, both with inputs and outputs, the COMPLETE carrying a
``schema`` facet on its output. Events are built with openlineage-python's ``event_v2``/``facet_v2``
classes and serialized by ``Serde``, as a real producer would send them.
"""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any, TypeVar

from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.facet_v2 import schema_dataset
from openlineage.client.serde import Serde

T = TypeVar("T")

LAYERS = 10
NAMESPACE = "bench"
PRODUCER = "https://github.com/acme/airflow-lineage-provider/bench"
START = datetime(2026, 1, 1, tzinfo=timezone.utc)


def dataset_name(layer: int, index: int) -> str:
    """Name of the dataset job ``index`` of ``layer`` writes (layer -1 holds the raw sources)."""
    return f"raw.source_{index}" if layer < 0 else f"layer{layer}.table_{index}"


def _schema(layer: int, index: int) -> schema_dataset.SchemaDatasetFacet:
    count = 3 + (layer + index) % 3
    fields = [schema_dataset.SchemaDatasetFacetFields(name=f"col_{i}", type="VARCHAR") for i in range(count)]
    return schema_dataset.SchemaDatasetFacet(fields=fields)


def workload(n_jobs: int, seed: int = 7) -> list[dict[str, Any]]:
    """START and COMPLETE events of ``n_jobs`` jobs in 10 layers, in emission order, as JSON dicts."""
    rng = random.Random(seed)
    per_layer = max(1, n_jobs // LAYERS)
    at = START
    events: list[dict[str, Any]] = []
    for layer in range(LAYERS):
        for index in range(per_layer):
            reads = rng.sample(range(per_layer), rng.choice((2, 3)) if per_layer >= 3 else 1)
            inputs = [InputDataset(namespace=NAMESPACE, name=dataset_name(layer - 1, i)) for i in reads]
            name = dataset_name(layer, index)
            run = Run(runId=str(uuid.UUID(int=rng.getrandbits(128), version=4)))
            job = Job(namespace=NAMESPACE, name=f"layer{layer}.job_{index}")
            start = RunEvent(
                eventType=RunState.START,
                eventTime=at.isoformat(),
                run=run,
                job=job,
                producer=PRODUCER,
                inputs=inputs,
                outputs=[OutputDataset(namespace=NAMESPACE, name=name)],
            )
            complete = RunEvent(
                eventType=RunState.COMPLETE,
                eventTime=(at + timedelta(seconds=30)).isoformat(),
                run=run,
                job=job,
                producer=PRODUCER,
                inputs=inputs,
                outputs=[OutputDataset(namespace=NAMESPACE, name=name, facets={"schema": _schema(layer, index)})],
            )
            events += [json.loads(Serde.to_json(start)), json.loads(Serde.to_json(complete))]
            at += timedelta(seconds=1)
    return events


def walk_root(n_jobs: int) -> tuple[str, str]:
    """``(namespace, name)`` of the dataset the walks start from: the first one of the last layer."""
    return NAMESPACE, dataset_name(LAYERS - 1, 0)


def split_by_job(events: list[T], clients: int, job: Callable[[T], str]) -> list[list[T]]:
    """``events`` split among ``clients`` senders, each job's events to one sender in their order: jobs dealt out in
    turn by first appearance (``job`` names an event's job), as ``single_event_ingest.py``'s clients get them."""
    shares: list[list[T]] = [[] for _ in range(clients)]
    jobs: dict[str, int] = {}
    for event in events:
        shares[jobs.setdefault(job(event), len(jobs) % clients)].append(event)
    return shares
