"""Response models: the API contract shown in the OpenAPI document at ``/docs``.

Graph responses follow Marquez's shape so tools written for Marquez can read them. Large responses are
serialized straight from dicts for speed; these models document them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field


class IngestSummary(BaseModel):
    """Outcome of a batch: how many events came, were stored (new or already stored) and failed."""

    status: Literal["success", "partial_success"] = Field(description="Feast's consumer's status of a batch.")
    summary: BatchCounts = Field(description="Feast's consumer's counts (the same as the fields below).")
    received: int
    successful: int
    failed: int
    duplicates: int = Field(description="Events already stored before (counted in successful; nothing changed).")
    errors: list[EventFailure] = Field(default_factory=list)
    results: list[EventResult] | None = Field(
        default=None, description="When some events failed: one result per posted event, in order."
    )


class BatchCounts(BaseModel):
    """A batch's counts as Feast's consumer answers them."""

    received: int
    successful: int
    failed: int


class EventFailure(BaseModel):
    """Why one event of a batch was not stored."""

    index: int = Field(description="Position of the event in the posted array.")
    error: str


class EventResult(BaseModel):
    """The outcome of one event of a partial batch: status 201 (stored) or 400 with the error."""

    index: int
    status: int
    error: str | None = None


class StoredEvent(BaseModel):
    """Outcome of a single event: ``stored`` (new) or ``duplicate`` (stored before, nothing changed)."""

    status: Literal["stored", "duplicate"]


class Problem(BaseModel):
    """An error response."""

    detail: Any


class Edge(BaseModel):
    origin: str
    destination: str


class LineageEdge(Edge):
    """An edge of the job/dataset graph, with how it is known (see docs/declared-lineage.md)."""

    declared: bool = Field(description="A JobEvent (lineage without a run) declared this edge.")
    observed: bool = Field(description="A RunEvent observed this edge.")


class GraphNode(BaseModel):
    """A node of a lineage graph: ``dataset:<ns>:<name>`` or ``job:<ns>:<name>``."""

    id: str
    type: Literal["DATASET", "JOB"]
    data: dict[str, Any] = Field(
        description="Dataset: id, name, namespace, type, updatedAt and fields (latest schema). "
        "Job: id, name, namespace, type, simpleName, updatedAt and latestRun (id, state, startedAt, endedAt); "
        "parentJob (namespace, name) when its latest run has a parent run, airflowTask (dagId, taskId, runId, "
        "mapIndex) when it is an Airflow task's."
    )
    inEdges: list[LineageEdge]
    outEdges: list[LineageEdge]
    declaredOnly: bool | None = Field(
        None, description="true when no RunEvent named the node (known only by declaration); left out otherwise."
    )


class LineageGraph(BaseModel):
    graph: list[GraphNode]


class ColumnNode(BaseModel):
    """A node of a column-lineage graph: ``datasetField:<ns>:<name>:<field>``."""

    id: str
    type: Literal["DATASET_FIELD"]
    data: dict[str, Any] = Field(
        description="namespace, dataset, field, fieldType, and inputFields (namespace, dataset, field, "
        "transformations) within the returned graph."
    )
    inEdges: list[LineageEdge]
    outEdges: list[LineageEdge]


class ColumnLineageGraph(BaseModel):
    graph: list[ColumnNode]


class Namespaces(BaseModel):
    namespaces: list[dict[str, Any]]
    totalCount: int


class Jobs(BaseModel):
    jobs: list[dict[str, Any]]
    totalCount: int


class Datasets(BaseModel):
    datasets: list[dict[str, Any]]
    totalCount: int


class Runs(BaseModel):
    runs: list[dict[str, Any]]
    totalCount: int


class Events(BaseModel):
    events: list[dict[str, Any]]
    totalCount: int


class SearchResults(BaseModel):
    results: list[dict[str, Any]]
    totalCount: int


class Pruned(BaseModel):
    """Rows removed by retention."""

    events: int
    runs: int


class RetentionConfiguration(BaseModel):
    """How this consumer prunes (``retention_days``, ``retention_check_interval_hours``) and its timer's state."""

    retentionDays: float | None = Field(description="Days raw events and runs are kept; null: kept forever.")
    enabled: bool = Field(description="Whether retention is on (retentionDays is set).")
    checkIntervalHours: float = Field(description="How often the timer prunes, in hours.")
    timerRunning: bool = Field(description="Whether this process's retention timer is running.")
    nextCheckAt: str | None = Field(description="When this process's timer checks next (UTC); null without one.")


class StoreStatistics(BaseModel):
    """What the store holds now; the times are null when it holds no event."""

    events: int
    runs: int
    jobs: int
    datasets: int
    oldestEventTime: str | None = Field(description="The earliest eventTime of the stored events.")
    newestEventTime: str | None
    oldestReceivedAt: str | None = Field(description="When the earliest stored event arrived.")
    newestReceivedAt: str | None
    pendingEvents: int = Field(
        0, description="Events stored and not applied to the graph yet (ingest_apply=deferred; 0 when inline)."
    )
    unappliedEvents: int = Field(
        0,
        description="Stored events the graph refused when applied alone (ingest_apply=deferred): kept, never "
        "applied; the server's log names each with the reason, as lineage_unapplied_events holds it.",
    )


class PruneReport(BaseModel):
    """One prune: when it ran, its cut-off, what started it and what it removed."""

    prunedAt: str
    cutoff: str = Field(description="Events that happened or arrived before this, and runs last seen before it.")
    trigger: Literal["timer", "api", "ingest"]
    events: int
    runs: int
    durationSeconds: float


class RetentionStatus(BaseModel):
    """``GET /api/v1/retention``: the configuration, the store's statistics and the last prune (by any process)."""

    configuration: RetentionConfiguration
    statistics: StoreStatistics
    lastPrune: PruneReport | None


class ResetCounts(BaseModel):
    """Rows of each kind a reset removed (or, in a dry run, would remove)."""

    events: int
    runs: int
    jobs: int
    datasets: int
    edges: int
    ioGroups: int = Field(description="Table-lineage io groups removed (or merged into an equal one).")
    ioGroupsNarrowed: int = Field(
        description="io groups of other namespaces' jobs that lost the namespace's datasets and were kept for "
        "their other pairs."
    )
    fields: int = Field(description="Dataset fields of column lineage.")
    columnEdges: int
    tags: int = Field(description="Tags on the removed jobs, datasets and fields (the tag names stay).")
    symlinks: int


class ResetResult(BaseModel):
    """``POST /api/v1/reset``: what went (or, with ``dryRun``, would go)."""

    dryRun: bool
    namespace: str | None = Field(description="The namespace reset; null for the whole store.")
    counts: ResetCounts


class GraphListingNode(BaseModel):
    """A node of the whole-graph listing: a graph walk's node without its edges."""

    id: str = Field(description="dataset:<namespace>:<name> or job:<namespace>:<name>.")
    type: Literal["DATASET", "JOB"]
    data: dict[str, Any] = Field(description="As in the nodes of GET /api/v1/lineage.")


class GraphListingEdge(BaseModel):
    """An edge (input dataset → job, job → output dataset), with when events showed it, and whether a JobEvent
    declared it and a RunEvent observed it."""

    origin: str
    destination: str
    firstSeen: str
    lastSeen: str
    declared: bool
    observed: bool


class GraphListingSymlink(BaseModel):
    """Another name of a dataset on the page (a ``symlinks`` facet's identifier)."""

    dataset: str = Field(description="The id of the dataset on the page.")
    namespace: str
    name: str
    type: str | None


class GraphListing(BaseModel):
    """``GET /api/v1/graph``: one page of the whole graph."""

    nodes: list[GraphListingNode] = Field(description="In kind, namespace, name order.")
    edges: list[GraphListingEdge] = Field(description="The edges whose origin is on this page.")
    symlinks: list[GraphListingSymlink]
    totalCount: int = Field(description="Nodes of every page.")


IngestSummary.model_rebuild()


class DriftJob(BaseModel):
    """A job of a drift answer: ``{"namespace", "name"}``."""

    namespace: str
    name: str


class DriftEdge(BaseModel):
    """One edge of a job in a drift answer: which way, the dataset, when last declared and observed."""

    direction: Literal["input", "output"]
    namespace: str
    name: str
    declaredAt: str | None = Field(description="The latest JobEvent that declared the edge (null: never).")
    lastObservedAt: str | None = Field(description="The latest RunEvent that observed the edge (null: never).")


class JobDrift(BaseModel):
    """A job's drift: declared edges no run observed in the window, edges runs observed that nothing declared."""

    job: DriftJob
    declaredNotObserved: list[DriftEdge]
    observedNotDeclared: list[DriftEdge]


class Drift(BaseModel):
    """``GET /api/v1/drift``: a page of jobs with drift, and how many jobs have some."""

    jobs: list[JobDrift]
    totalCount: int


class UnappliedEvent(BaseModel):
    """An event deferred apply set aside: the graph could not take it alone (its raw event is kept)."""

    eventKey: str = Field(description="The event's key in the store (a hash of its content).")
    failedAt: str = Field(description="When it was set aside (UTC).")
    reason: str = Field(description="Why: what the database or the apply said.")
    eventType: str | None = Field(description="From its raw event; null for job and dataset events, or when gone.")
    eventTime: str | None
    jobNamespace: str | None
    jobName: str | None
    producer: str | None


class UnappliedEvents(BaseModel):
    """``GET /api/v1/ingest-log/unapplied``: the most recently set-aside events, and how many there are."""

    unapplied: list[UnappliedEvent]
    totalCount: int


class Requeued(BaseModel):
    """``POST /api/v1/ingest-log/unapplied/requeue``: what was put back in the ingest log and what came of it."""

    requeued: int = Field(description="Set-aside events put back in the ingest log and applied again.")
    gone: int = Field(description="Set-aside rows removed because their raw event had gone (a reset, a prune).")
    unapplied: int = Field(description="Events set aside after the requeue (refused again, or set aside meanwhile).")
