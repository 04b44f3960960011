"""The answers of Feast's OpenLineage consumer API, as Feast 0.67 shapes them (documented in the OpenAPI text;
the routes answer plain values encoded with msgspec, see :func:`..deps.stored_answer`)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class FeastJob(BaseModel):
    """A job row: its latest facets as JSON text, times in epoch milliseconds."""

    job_namespace: str
    job_name: str
    job_type: str | None = None
    producer: str | None = None
    description: str | None = None
    facets_json: str | None = None
    latest_run_id: str | None = None
    updated_at: int


class FeastDataset(BaseModel):
    """A dataset row: its latest facets and schema as JSON text, the Feast object it is, its owner."""

    dataset_namespace: str
    dataset_name: str
    source_type: str | None = None
    producer: str | None = None
    description: str | None = None
    schema_text: str | None = Field(default=None, alias="schema_json", description="The schema facet as JSON text.")
    facets_json: str | None = None
    feast_object_type: str | None = None
    feast_object_name: str | None = None
    feast_project: str | None = None
    owner_name: str | None = None
    owner_type: str | None = None
    lifecycle_state: str | None = None
    current_version: int | None = Field(default=None, description="Completed runs that wrote the dataset.")
    updated_at: int


class FeastRun(BaseModel):
    """A run row with its latest state and run facets."""

    run_id: str
    job_namespace: str
    job_name: str
    state: str
    started_at: int | None = None
    ended_at: int | None = None
    facets_json: str | None = None
    parent_run_id: str | None = None
    root_run_id: str | None = None
    updated_at: int


class FeastEvent(BaseModel):
    """A stored event: the event itself as JSON text, with what it names."""

    event_id: str = Field(description="The event's content key (identical events are stored once).")
    event_type: str
    event_time: int
    producer: str | None = None
    job_namespace: str
    job_name: str
    run_id: str | None = None
    event_json: str
    created_at: int | None = None


class FeastEdge(BaseModel):
    """An edge between names: input, output, derived, parent or symlink."""

    source_type: str
    source_namespace: str
    source_name: str
    target_type: str
    target_namespace: str
    target_name: str
    edge_type: str | None = None
    updated_at: int | None = None


class FeastSymlink(BaseModel):
    dataset_namespace: str
    dataset_name: str
    linked_namespace: str
    linked_name: str
    link_type: str
    updated_at: int | None = None


class FeastJobs(BaseModel):
    jobs: list[FeastJob]


class FeastDatasets(BaseModel):
    datasets: list[FeastDataset]


class FeastRuns(BaseModel):
    runs: list[FeastRun]
    total: int = Field(description="The runs on this page (as Feast counts them).")


class FeastEvents(BaseModel):
    events: list[FeastEvent]
    total: int = Field(description="The events on this page (as Feast counts them).")


class FeastNamespaces(BaseModel):
    namespaces: list[str]


class FeastGraph(BaseModel):
    """The whole graph (nodes: datasets, then jobs) with every edge among the page's namespaces."""

    nodes: list[dict[str, Any]]
    edges: list[FeastEdge]
    symlinks: list[FeastSymlink]
    total_nodes: int


class FeastSubgraph(BaseModel):
    """The nodes and edges reached from one node."""

    nodes: list[dict[str, Any]]
    edges: list[FeastEdge]


class FeastDatasetVersion(BaseModel):
    """One version of a dataset: what a completed run's event gave it."""

    version_id: int = Field(description="The stored event's row id (Feast: its version table's row id).")
    dataset_namespace: str
    dataset_name: str
    version: int
    created_by_run_id: str | None = None
    dataset_schema: dict[str, Any] | None = Field(default=None, alias="schema")
    facets: dict[str, Any] | None = None
    created_at: int | None = None


class FeastDatasetVersions(BaseModel):
    versions: list[FeastDatasetVersion]
    total: int


class FeastColumnLink(BaseModel):
    """One input field → output field link, upstream (into the dataset) or downstream (out of it)."""

    dataset_namespace: str
    dataset_name: str
    output_field: str
    input_namespace: str
    input_name: str
    input_field: str
    transformation_type: str | None = None
    transformation_description: str | None = None
    transformations_json: str | None = None
    run_id: str | None = None
    updated_at: int | None = None
    direction: str


class FeastColumnLineage(BaseModel):
    column_lineage: list[FeastColumnLink]


class FeastRetention(BaseModel):
    retention_days: float
    retention_enabled: bool
    check_interval_hours: float
    storage: dict[str, dict[str, int]]


class FeastPruned(BaseModel):
    message: str
    deleted: dict[str, int] | None = None


class FeastReset(BaseModel):
    status: str
    message: str
