"""Marquez's answer shapes as typed structs, encoded as Marquez writes them.

Members are declared in the order Marquez's JSON lists them and named in Python's case (``physical_name``
encodes as ``physicalName``). Marquez serializes without nulls: an optional member is left out when None
(``omit_defaults``); every other member is always written, an empty list or object included. Facets and other
open objects stay as the events said them (``dict``). See docs/marquez-api.md for where each value comes from.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec


class Shape(msgspec.Struct, omit_defaults=True, rename="camel"):
    """A Marquez object: camelCase members, None members left out. Each shape is keyword-only (``kw_only``
    applies to the class that says it), so optional members stand where Marquez lists them."""


class NodeId(Shape, kw_only=True):
    """A job's or dataset's ``id``: ``{namespace, name}``."""

    namespace: str
    name: str


class VersionId(Shape, kw_only=True):
    """A job version's or dataset version's ``id``: ``{namespace, name, version}``."""

    namespace: str
    name: str
    version: str


class Field(Shape, kw_only=True):
    """A dataset's schema field, with the tags put on it; ``fields``: nested fields, when it has some."""

    name: str
    type: str
    tags: list[str]
    description: str | None = None
    fields: list[Field] | None = None


class Run(Shape, kw_only=True):
    """Marquez's ``Run``: a run of a job, with the job version it ran when known."""

    id: str
    created_at: str
    updated_at: str
    nominal_start_time: str | None = None
    nominal_end_time: str | None = None
    state: str
    started_at: str | None = None
    ended_at: str | None = None
    duration_ms: int | None = None
    args: dict[str, Any]
    job_version: VersionId | None = None
    facets: dict[str, Any]


class Job(Shape, kw_only=True):
    """Marquez's ``Job``, with the consumer's ``nodeId`` (the graph node it is)."""

    id: NodeId
    type: str
    name: str
    simple_name: str
    created_at: str
    updated_at: str
    namespace: str
    inputs: list[NodeId]
    outputs: list[NodeId]
    location: str | None = None
    description: str | None = None
    latest_run: Run | None = None
    latest_runs: list[Run]
    facets: dict[str, Any]
    current_version: str | None = None
    tags: list[str]
    node_id: str


class JobVersion(Shape, kw_only=True):
    """Marquez's ``JobVersion``: what one run of a job read, wrote and said about the job."""

    id: VersionId
    name: str
    version: str
    created_at: str
    namespace: str
    type: str
    inputs: list[NodeId]
    outputs: list[NodeId]
    location: str | None = None
    description: str | None = None
    latest_run: Run
    facets: dict[str, Any]


class Dataset(Shape, kw_only=True):
    """Marquez's ``Dataset``, with ``aliases``: its other names (``{namespace, name, via, producers}``)."""

    id: NodeId
    type: str
    name: str
    physical_name: str
    created_at: str
    updated_at: str
    namespace: str
    source_name: str
    fields: list[Field]
    tags: list[str]
    last_modified_at: str | None = None
    last_lifecycle_state: str | None = None
    description: str | None = None
    facets: dict[str, Any]
    current_version: str | None = None
    deleted: bool
    aliases: list[dict[str, Any]]


class DatasetVersion(Shape, kw_only=True):
    """Marquez's ``DatasetVersion``: a dataset as one run that wrote it left it."""

    id: VersionId
    type: str
    name: str
    physical_name: str
    created_at: str
    version: str
    namespace: str
    source_name: str
    fields: list[Field]
    description: str
    created_by_run: Run
    facets: dict[str, Any]


class RunFacets(Shape, kw_only=True):
    """Marquez's ``FacetsResult``: a run's run or job facets."""

    run_id: str
    facets: dict[str, Any]


class JobList(Shape, kw_only=True):
    """A page of jobs (encoded ones from the job cache among them) and how many there are."""

    jobs: Sequence[Job | msgspec.Raw]
    total_count: int


class JobVersionList(Shape, kw_only=True):
    """A page of a job's versions and how many it has."""

    versions: Sequence[JobVersion]
    total_count: int


class RunList(Shape, kw_only=True):
    """A page of a job's runs and how many it has."""

    runs: Sequence[Run]
    total_count: int


class DatasetList(Shape, kw_only=True):
    """A page of a namespace's datasets and how many there are."""

    datasets: Sequence[Dataset]
    total_count: int


class DatasetVersionList(Shape, kw_only=True):
    """A page of a dataset's versions and how many it has."""

    versions: Sequence[DatasetVersion]
    total_count: int
