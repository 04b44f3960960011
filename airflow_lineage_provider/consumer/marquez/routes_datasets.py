"""Marquez's dataset reads: a namespace's datasets, one dataset, its versions and one version.

Paths, parameters and shapes are Marquez's (``../shared/spec/marquez/openapi.yml``); namespaces and dataset
names come percent-encoded in the path (``postgres%3A%2F%2Fdb%3A5432``, see :mod:`.paths`).
Unknown (or, for a namespace-limited key, hidden) namespaces, datasets and versions answer Marquez's 404
(:mod:`.errors`, with Marquez's messages), the namespace checked first as Marquez does. What each object
says, and where it comes from, is in :mod:`.datasets` and :mod:`.dataset_versions`; its shape in
:mod:`.shapes`.

A dataset known under several names (docs/identity.md) is one Dataset: a namespace's listing shows it once, in
its canonical name's namespace (``totalCount`` counts datasets, not names), with its other names in
``aliases`` (``{namespace, name, via, producers}``, a member Marquez's schema leaves open); asked by any of its
names, the dataset and its versions answer as the canonical one (``id`` and ``name`` are the canonical name's).
A key limited to namespace patterns sees only the names in its namespaces: when the canonical name is hidden,
the first visible name stands for the dataset.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Request, Response
from sqlalchemy import Connection

from airflow_lineage_provider.consumer.deps import Limit, Offset
from airflow_lineage_provider.consumer.limits.answer_limits import answer_bound
from airflow_lineage_provider.consumer.limits.query_names import KnownQuery
from airflow_lineage_provider.consumer.marquez import dataset_versions
from airflow_lineage_provider.consumer.marquez import datasets as marquez_datasets
from airflow_lineage_provider.consumer.marquez.errors import (
    NOT_FOUND,
    MarquezError,
    bounded_answer,
    dataset_not_found,
    marquez_answer,
    namespace_not_found,
)
from airflow_lineage_provider.consumer.marquez.paths import Dataset, Namespace
from airflow_lineage_provider.consumer.marquez.shapes import Dataset as DatasetShape
from airflow_lineage_provider.consumer.marquez.shapes import DatasetList, DatasetVersion, DatasetVersionList
from airflow_lineage_provider.consumer.security.access import Access
from airflow_lineage_provider.consumer.security.auth import requires
from airflow_lineage_provider.consumer.store.read import queries
from airflow_lineage_provider.consumer.store.read.visibility import Visible
from airflow_lineage_provider.consumer.store_view import View

router = APIRouter(tags=["marquez: datasets"], dependencies=[Depends(requires(Access.READ))])

#: A dataset version as Marquez's paths carry it (anything that is no version's id is an unknown version: 404).
Version = Annotated[str, Path(max_length=100, description="The version's UUID.")]


def dataset_id(conn: Connection, namespace: str, dataset: str, visible: Visible) -> int:
    """The dataset's node id; Marquez's 404 for its namespace, then for itself, when unknown or hidden."""
    if not queries.namespace_exists(conn, namespace, visible):
        raise namespace_not_found(namespace)
    found = marquez_datasets.find_dataset(conn, namespace, dataset, visible)
    if found is None:
        raise dataset_not_found(dataset)
    return found


@router.get(
    "/api/v1/namespaces/{namespace}/datasets",
    dependencies=[KnownQuery],
    responses=NOT_FOUND,
    summary="Datasets of a namespace (DatasetList)",
)
async def list_datasets(
    view: View, request: Request, namespace: Namespace, limit: Limit = 100, offset: Offset = 0
) -> Response:
    bound = answer_bound(request)

    def run() -> DatasetList:
        with view.read() as (conn, visible):
            if not queries.namespace_exists(conn, namespace, visible):
                raise namespace_not_found(namespace)
            items, total = marquez_datasets.list_datasets(conn, namespace, limit, offset, visible, admit=bound.admit)
        return DatasetList(datasets=items, total_count=total)

    return await bounded_answer(bound, run)


@router.get("/api/v1/namespaces/{namespace}/datasets/{dataset}", responses=NOT_FOUND, summary="A dataset (Dataset)")
async def get_dataset(view: View, namespace: Namespace, dataset: Dataset) -> Response:
    def run() -> DatasetShape:
        with view.read() as (conn, visible):
            node = dataset_id(conn, namespace, dataset, visible)
            return marquez_datasets.datasets(conn, [node], visible)[node]

    return await marquez_answer(run)


@router.get(
    "/api/v1/namespaces/{namespace}/datasets/{dataset}/versions",
    dependencies=[KnownQuery],
    responses=NOT_FOUND,
    summary="Versions of a dataset, newest first (DatasetVersionList)",
)
async def list_dataset_versions(
    view: View,
    request: Request,
    namespace: Namespace,
    dataset: Dataset,
    limit: Limit = 100,
    offset: Offset = 0,
) -> Response:
    bound = answer_bound(request)

    def run() -> DatasetVersionList:
        with view.read() as (conn, visible):
            node = dataset_id(conn, namespace, dataset, visible)
            items, total = dataset_versions.list_versions(
                conn, node, namespace, dataset, limit, offset, visible, admit=bound.admit
            )
        return DatasetVersionList(versions=items, total_count=total)

    return await bounded_answer(bound, run)


@router.get(
    "/api/v1/namespaces/{namespace}/datasets/{dataset}/versions/{version}",
    responses=NOT_FOUND,
    summary="A version of a dataset (DatasetVersion)",
)
async def get_dataset_version(view: View, namespace: Namespace, dataset: Dataset, version: Version) -> Response:
    def run() -> DatasetVersion:
        with view.read() as (conn, visible):
            node = dataset_id(conn, namespace, dataset, visible)
            found = dataset_versions.get_version(conn, node, namespace, dataset, version, visible)
        if found is None:
            raise MarquezError(404, f"Dataset version '{version}' not found.")
        return found

    return await marquez_answer(run)
