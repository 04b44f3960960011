"""Marquez's tags: list and create tags, put them on and take them off datasets, dataset fields and jobs.

* ``GET /api/v1/tags`` (TagList, by name, paged) and ``PUT /api/v1/tags/{tag}`` (body ``CreatedTag``: an
  optional ``description``; answers the ``Tag``, as Marquez does).
* ``POST`` (add) and ``DELETE`` (take off) ``/api/v1/namespaces/{namespace}/datasets/{dataset}/tags/{tag}``,
  ``.../datasets/{dataset}/fields/{field}/tags/{tag}`` and ``/api/v1/namespaces/{namespace}/jobs/{job}/tags/{tag}``,
  answering the updated ``Dataset`` or ``Job``. Adding an unknown tag creates it (without a description);
  taking off a tag that is not there changes nothing. As Marquez does, a field's tags are upper-cased
  (``pii`` on a field is ``PII``), a dataset's and a job's are kept as given.

Reads need read access, writes write access; a namespace-limited key cannot see, so cannot tag, a node in a
namespace it may not see (404, as for a missing one). Tags themselves are not in a namespace: a tag's
definition (its name and description) is global, as in Marquez; a limited key lists the tags on what it sees and
those on nothing (a tag used only on hidden nodes is hidden, like them). Creating or describing one needs a
principal without namespace limits: a limited key is refused ``PUT /api/v1/tags`` and
putting a tag that does not exist yet on a node (403), and may put existing tags on, and take any off, what
it sees. A tag name is checked (:func:`..store.read.tags.check_tag_name`): 400 in Marquez's shape naming the
problem. Every tag write is one line in the audit log.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Depends, Path, Response
from pydantic import BaseModel, Field

from airflow_lineage_provider.consumer.deps import NO_NUL, Limit, Offset, Store
from airflow_lineage_provider.consumer.limits.query_names import KnownQuery
from airflow_lineage_provider.consumer.marquez import datasets as marquez_datasets
from airflow_lineage_provider.consumer.marquez import jobs as marquez_jobs
from airflow_lineage_provider.consumer.marquez import shapes
from airflow_lineage_provider.consumer.marquez.errors import NOT_FOUND, MarquezError, marquez_answer
from airflow_lineage_provider.consumer.marquez.paths import Dataset, Job, Namespace, path_name
from airflow_lineage_provider.consumer.marquez.paths import Field as FieldName
from airflow_lineage_provider.consumer.marquez.routes_datasets import dataset_id
from airflow_lineage_provider.consumer.marquez.routes_jobs import job_id
from airflow_lineage_provider.consumer.security import audit
from airflow_lineage_provider.consumer.security.access import Access, Principal
from airflow_lineage_provider.consumer.security.auth import Writer, requires
from airflow_lineage_provider.consumer.store.read import tags
from airflow_lineage_provider.consumer.store_view import StoreView, View

router = APIRouter(tags=["marquez: tags"])

READ = [Depends(requires(Access.READ))]
WRITE = [Depends(requires(Access.WRITE))]
#: 400 (a bad tag name), 403 (a limited key defining a tag) and 404 (an unknown node), in Marquez's shape.
ANSWERS: dict[int | str, dict] = {
    400: {**NOT_FOUND[404], "description": "A bad tag name"},
    403: {**NOT_FOUND[404], "description": "A namespace-limited key creating or describing a tag"},
    **NOT_FOUND,
}

#: The ``{tag}`` of a node's tag path, decoded (see :mod:`..marquez.paths`).
Tag = Annotated[str, path_name("tag")]
#: The ``{tag}`` of ``/api/v1/tags/{tag}`` (may hold ``/``).
TagName = Annotated[str, Path(max_length=1000, pattern=NO_NUL, description="The tag's name.")]


class CreatedTag(BaseModel):
    """Marquez's ``CreatedTag``: the body of ``PUT /api/v1/tags/{tag}``."""

    description: str | None = Field(
        default=None, max_length=10_000, pattern=NO_NUL, description="The description of the tag (no NUL)."
    )


def _checked(tag: str) -> str:
    try:
        return tags.check_tag_name(tag)
    except ValueError as error:
        raise MarquezError(400, str(error)) from None


def _refuse_definition(principal: Principal, name: str, what: str) -> None:
    """403 for a namespace-limited principal: tag definitions are global, like the tag list every key reads."""
    if principal.namespaces is not None:
        raise MarquezError(
            403,
            f"{principal.who} is limited to some namespaces and may not {what}: tag definitions are global "
            f"(every key lists them), so tag {name!r} is created or described (PUT /api/v1/tags/...) by a "
            "principal without namespace limits; this key may then put it on what it sees",
        )


def _tag_answer(name: str, description: str | None) -> dict:
    return {"name": name} if description is None else {"name": name, "description": description}


@router.get("/api/v1/tags", dependencies=[*READ, KnownQuery], summary="Tags by name (TagList)")
async def list_tags(view: View, limit: Limit = 100, offset: Offset = 0) -> Response:
    def run() -> dict:
        with view.read() as (conn, visible):
            items, total = tags.list_tags(conn, limit, offset, visible)
        return {"tags": [_tag_answer(item["name"], item["description"]) for item in items], "totalCount": total}

    return await marquez_answer(run)


@router.put("/api/v1/tags/{tag}", dependencies=WRITE, responses=ANSWERS, summary="Create or describe a tag (Tag)")
# A name holding "/" (sent as %2F, decoded by the server): the path's rest. ``{tag:path}`` alone would not match a
# name holding a line break (its pattern is ``.*``), which must be refused with a 400 naming the problem.
@router.put("/api/v1/tags/{tag:path}", dependencies=WRITE, responses=ANSWERS, include_in_schema=False)
async def put_tag(
    store: Store, principal: Writer, tag: TagName, body: Annotated[CreatedTag | None, Body()] = None
) -> Response:
    description = body.description if body is not None else None

    def run() -> dict:
        name = _checked(tag)
        _refuse_definition(principal, name, "create or describe a tag")
        with store.write() as conn:
            tags.put_tag(conn, name, description)
        _audit(principal, f"put tag {name!r}")
        return _tag_answer(name, description)

    return await marquez_answer(run)


async def _tag_dataset(
    store: Store, principal: Principal, namespace: str, dataset: str, field: str | None, tag: str, add: bool
) -> Response:
    def run() -> shapes.Dataset:
        name = _checked(tag)
        if field is not None:
            name = _checked(name.upper())  # as Marquez: a field's tags in upper case
        with store.write() as conn:
            visible = StoreView(store, principal.namespaces).visible(conn)  # what the writer sees, as a read would
            node = dataset_id(conn, namespace, dataset, visible)
            if field is not None and not marquez_datasets.has_field(conn, node, field):
                raise MarquezError(404, f"Field '{field}' not found for dataset '{dataset}'.")
            if add and principal.namespaces is not None and not tags.tag_exists(conn, name):
                _refuse_definition(principal, name, "put a tag that does not exist yet")
            (tags.add_tag if add else tags.remove_tag)(conn, node, name, field)
            answer = marquez_datasets.datasets(conn, [node], visible)[node]
        where = f"dataset {namespace!r} / {dataset!r}" + (f" field {field!r}" if field is not None else "")
        _audit(principal, f"{'add' if add else 'remove'} tag {name!r} on {where}")
        return answer

    return await marquez_answer(run)


async def _tag_job(store: Store, principal: Principal, namespace: str, job: str, tag: str, add: bool) -> Response:
    def run() -> shapes.Job:
        name = _checked(tag)
        with store.write() as conn:
            visible = StoreView(store, principal.namespaces).visible(conn)  # what the writer sees, as a read would
            node = job_id(conn, namespace, job, visible)
            if add and principal.namespaces is not None and not tags.tag_exists(conn, name):
                _refuse_definition(principal, name, "put a tag that does not exist yet")
            (tags.add_tag if add else tags.remove_tag)(conn, node, name)
            answer = marquez_jobs.job_objects(conn, [node], visible)[node]
        _audit(principal, f"{'add' if add else 'remove'} tag {name!r} on job {namespace!r} / {job!r}")
        return answer

    return await marquez_answer(run)


def _audit(principal: Principal, what: str) -> None:
    audit.log.info("lineage audit: %s by %s -> 200", what, principal.who)


DATASET_TAG = "/api/v1/namespaces/{namespace}/datasets/{dataset}/tags/{tag}"
FIELD_TAG = "/api/v1/namespaces/{namespace}/datasets/{dataset}/fields/{field}/tags/{tag}"
JOB_TAG = "/api/v1/namespaces/{namespace}/jobs/{job}/tags/{tag}"


@router.post(DATASET_TAG, dependencies=WRITE, responses=ANSWERS, summary="Tag a dataset (Dataset)")
async def tag_dataset(store: Store, principal: Writer, namespace: Namespace, dataset: Dataset, tag: Tag) -> Response:
    return await _tag_dataset(store, principal, namespace, dataset, None, tag, add=True)


@router.delete(DATASET_TAG, dependencies=WRITE, responses=ANSWERS, summary="Take a tag off a dataset (Dataset)")
async def untag_dataset(store: Store, principal: Writer, namespace: Namespace, dataset: Dataset, tag: Tag) -> Response:
    return await _tag_dataset(store, principal, namespace, dataset, None, tag, add=False)


@router.post(FIELD_TAG, dependencies=WRITE, responses=ANSWERS, summary="Tag a field of a dataset (Dataset)")
async def tag_field(
    store: Store, principal: Writer, namespace: Namespace, dataset: Dataset, field: FieldName, tag: Tag
) -> Response:
    return await _tag_dataset(store, principal, namespace, dataset, field, tag, add=True)


@router.delete(FIELD_TAG, dependencies=WRITE, responses=ANSWERS, summary="Take a tag off a field (Dataset)")
async def untag_field(
    store: Store, principal: Writer, namespace: Namespace, dataset: Dataset, field: FieldName, tag: Tag
) -> Response:
    return await _tag_dataset(store, principal, namespace, dataset, field, tag, add=False)


@router.post(JOB_TAG, dependencies=WRITE, responses=ANSWERS, summary="Tag a job (Job)")
async def tag_job(store: Store, principal: Writer, namespace: Namespace, job: Job, tag: Tag) -> Response:
    return await _tag_job(store, principal, namespace, job, tag, add=True)


@router.delete(JOB_TAG, dependencies=WRITE, responses=ANSWERS, summary="Take a tag off a job (Job)")
async def untag_job(store: Store, principal: Writer, namespace: Namespace, job: Job, tag: Tag) -> Response:
    return await _tag_job(store, principal, namespace, job, tag, add=False)
