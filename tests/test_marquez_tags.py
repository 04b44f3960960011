"""Marquez's tag API over the real app and stores (SQLite and PostgreSQL): tags created, put on datasets,
fields and jobs, shown in the objects, taken off; write access needed; namespace-limited keys confined.

The store is :func:`test_marquez_datasets.events`: ``postgres://db:5432`` / ``public.orders`` written by job
``etl/load`` in ``pipelines``, a Kafka topic, ``warehouse`` / ``raw_orders`` (every name percent-encoded in
the paths).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from support.marquez_spec import assert_marquez
from test_marquez_datasets import KAFKA, NS, ORDERS, TOPIC, events, path, post

from airflow_lineage_provider.consumer import create_app
from airflow_lineage_provider.consumer.security.access import Access, ApiKey, NamespaceScope

pytest_plugins = ("support.consumer_fixtures",)

JOB_NS, JOB = "pipelines", "etl/load"
ADMIN = {"X-API-Key": "admin-secret-value"}
WRITER = {"X-API-Key": "writer-secret-value"}
READER = {"X-API-Key": "reader-secret-value"}
DB_WRITER = {"X-API-Key": "db-writer-secret-value"}
KEYS = (
    ApiKey("admin", Access.ADMIN, ADMIN["X-API-Key"]),
    ApiKey("writer", Access.WRITE, WRITER["X-API-Key"]),
    ApiKey("reader", Access.READ, READER["X-API-Key"]),
    ApiKey("db-writer", Access.WRITE, DB_WRITER["X-API-Key"], NamespaceScope(("postgres://*",))),
)


def job_path(namespace: str, job: str, *rest: str) -> str:
    """A Marquez job path with ``namespace`` and ``job`` percent-encoded."""
    return "/".join((f"/api/v1/namespaces/{quote(namespace, safe='')}/jobs/{quote(job, safe='')}", *rest))


def tag_path(base: str, tag: str) -> str:
    """``base`` + ``/tags/<tag percent-encoded>``."""
    return f"{base}/tags/{quote(tag, safe='')}"


def field_path(field: str) -> str:
    """The path of field ``field`` of ``public.orders``."""
    return path(NS, ORDERS, "fields", quote(field, safe=""))


@pytest.fixture
def keyed(store_url: str) -> Iterator[TestClient]:
    """A client of an app with the :data:`KEYS`, over a store holding the datasets test's events."""
    app = create_app(store_url=store_url, keys=KEYS)
    with TestClient(app) as client:
        post(client, events(), ADMIN)
        yield client
    app.state.store.dispose()


def call(client: TestClient, method: str, url: str, schema: str, headers: dict[str, str] = WRITER, **kw: Any) -> Any:
    """``method`` ``url``: 200 and a body conforming to Marquez's ``schema``."""
    answer = client.request(method, url, headers=headers, **kw)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert_marquez(schema, body)
    return body


def dataset(client: TestClient, headers: dict[str, str] = READER) -> dict[str, Any]:
    """``public.orders`` as GET answers it."""
    return call(client, "GET", path(NS, ORDERS), "Dataset", headers)


def tags_of_fields(found: dict[str, Any]) -> dict[str, list[str]]:
    """Each field's tags."""
    return {field["name"]: field["tags"] for field in found["fields"]}


def test_tags_are_created_described_and_listed(keyed: TestClient) -> None:
    empty = call(keyed, "GET", "/api/v1/tags", "TagList", READER)
    assert empty == {"tags": [], "totalCount": 0}
    created = call(keyed, "PUT", "/api/v1/tags/PII", "Tag", json={"description": "Personal data"})
    assert created == {"name": "PII", "description": "Personal data"}
    assert_marquez("TagList", created)  # the schema Marquez's description names for this answer
    assert call(keyed, "PUT", "/api/v1/tags/GOLD", "Tag") == {"name": "GOLD"}  # no body: no description
    call(keyed, "PUT", "/api/v1/tags/PII", "Tag", json={"description": "Personal data (GDPR)"})
    call(keyed, "PUT", f"/api/v1/tags/{quote('team/finance', safe='')}", "Tag", json={})
    listed = call(keyed, "GET", "/api/v1/tags", "TagList", READER)
    assert listed == {
        "tags": [{"name": "GOLD"}, {"name": "PII", "description": "Personal data (GDPR)"}, {"name": "team/finance"}],
        "totalCount": 3,
    }
    page = call(keyed, "GET", "/api/v1/tags", "TagList", READER, params={"limit": 1, "offset": 2})
    assert page == {"tags": [{"name": "team/finance"}], "totalCount": 3}


def test_a_dataset_tag_is_added_shown_and_removed(keyed: TestClient, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="airflow_lineage_provider.consumer.security.audit"):
        answer = call(keyed, "POST", tag_path(path(NS, ORDERS), "GOLD"), "Dataset")
    assert answer["tags"] == ["GOLD"] and answer == dataset(keyed)
    assert f"lineage audit: add tag 'GOLD' on dataset '{NS}' / '{ORDERS}' by key 'writer' -> 200" in caplog.messages
    call(keyed, "POST", tag_path(path(NS, ORDERS), "GOLD"), "Dataset")  # twice: still once
    call(keyed, "POST", tag_path(path(NS, ORDERS), "team/sales"), "Dataset")
    listed = call(keyed, "GET", path(NS), "DatasetList", READER)["datasets"]
    assert [found["tags"] for found in listed if found["name"] == ORDERS] == [["GOLD", "team/sales"]]
    assert {"name": "team/sales"} in call(keyed, "GET", "/api/v1/tags", "TagList", READER)["tags"]  # created on use
    removed = call(keyed, "DELETE", tag_path(path(NS, ORDERS), "GOLD"), "Dataset")
    assert removed["tags"] == ["team/sales"] and dataset(keyed)["tags"] == ["team/sales"]
    again = call(keyed, "DELETE", tag_path(path(NS, ORDERS), "GOLD"), "Dataset")  # not there: nothing changes
    assert again == removed
    assert {"name": "GOLD"} in call(keyed, "GET", "/api/v1/tags", "TagList", READER)["tags"]  # the tag stays
    assert call(keyed, "GET", path(KAFKA, TOPIC), "Dataset", READER)["tags"] == []


def test_a_field_tag_is_upper_cased_shown_on_the_field_and_its_versions_and_removed(keyed: TestClient) -> None:
    answer = call(keyed, "POST", tag_path(field_path("currency"), "pii"), "Dataset")
    assert tags_of_fields(answer) == {"id": [], "amount": [], "currency": ["PII"]}  # as Marquez: upper case
    assert answer["tags"] == [] and answer == dataset(keyed)
    call(keyed, "POST", tag_path(field_path("id"), "Key"), "Dataset")
    versions = call(keyed, "GET", path(NS, ORDERS, "versions"), "DatasetVersionList", READER)["versions"]
    assert tags_of_fields(versions[0]) == {"id": ["KEY"], "amount": [], "currency": ["PII"]}
    assert tags_of_fields(versions[-1]) == {"id": ["KEY"], "amount": []}
    removed = call(keyed, "DELETE", tag_path(field_path("currency"), "pii"), "Dataset")
    assert tags_of_fields(removed) == {"id": ["KEY"], "amount": [], "currency": []}
    missing = keyed.post(tag_path(field_path("total"), "PII"), headers=WRITER)
    assert missing.status_code == 404
    assert missing.json() == {"code": 404, "message": f"Field 'total' not found for dataset '{ORDERS}'."}


def test_a_job_tag_is_added_shown_and_removed(keyed: TestClient) -> None:
    answer = call(keyed, "POST", tag_path(job_path(JOB_NS, JOB), "CRITICAL"), "Job")
    assert answer["id"] == {"namespace": JOB_NS, "name": JOB} and answer["tags"] == ["CRITICAL"]
    assert call(keyed, "GET", job_path(JOB_NS, JOB), "Job", READER)["tags"] == ["CRITICAL"]
    removed = call(keyed, "DELETE", tag_path(job_path(JOB_NS, JOB), "CRITICAL"), "Job")
    assert removed["tags"] == [] and call(keyed, "GET", job_path(JOB_NS, JOB), "Job", READER)["tags"] == []
    assert dataset(keyed)["tags"] == []  # a job's tag is on the job only


@pytest.mark.parametrize(
    ("url", "message"),
    [
        (tag_path(path("nowhere", ORDERS), "GOLD"), "Namespace 'nowhere' not found."),
        (tag_path(path(NS, "public.missing"), "GOLD"), "Dataset 'public.missing' not found."),
        (tag_path(path("nowhere", ORDERS, "fields", "id"), "GOLD"), "Namespace 'nowhere' not found."),
        (tag_path(job_path(JOB_NS, "missing"), "GOLD"), "Job 'missing' not found."),
        (tag_path(job_path("nowhere", JOB), "GOLD"), "Namespace 'nowhere' not found."),
        (tag_path(job_path(NS, ORDERS), "GOLD"), f"Job '{ORDERS}' not found."),  # a dataset is no job
    ],
)
def test_tagging_unknown_nodes_answers_marquez_404s(keyed: TestClient, url: str, message: str) -> None:
    for method in ("POST", "DELETE"):
        answer = keyed.request(method, url, headers=WRITER)
        assert answer.status_code == 404 and answer.json() == {"code": 404, "message": message}
    assert call(keyed, "GET", "/api/v1/tags", "TagList", READER)["totalCount"] == 0  # nothing was created


@pytest.mark.parametrize(
    ("tag", "message"),
    [
        ("  ", "a tag name must not be empty"),
        ("X" * 256, "a tag name is at most 255 characters, got 256"),
        ("a\nb", "a tag name must not contain control characters, got 'a\\nb'"),
    ],
)
def test_bad_tag_names_answer_400_naming_the_problem(keyed: TestClient, tag: str, message: str) -> None:
    for method, url in (
        ("PUT", f"/api/v1/tags/{quote(tag, safe='')}"),
        ("POST", tag_path(path(NS, ORDERS), tag)),
        ("DELETE", tag_path(path(NS, ORDERS), tag)),
        ("POST", tag_path(field_path("id"), tag)),
        ("POST", tag_path(job_path(JOB_NS, JOB), tag)),
    ):
        answer = keyed.request(method, url, headers=WRITER)
        assert answer.status_code == 400, (method, url, answer.text)
        assert answer.json() == {"code": 400, "message": message}
    assert call(keyed, "GET", "/api/v1/tags", "TagList", READER)["totalCount"] == 0


def test_tag_writes_need_write_access(keyed: TestClient) -> None:
    writes = (
        ("PUT", "/api/v1/tags/GOLD"),
        ("POST", tag_path(path(NS, ORDERS), "GOLD")),
        ("DELETE", tag_path(path(NS, ORDERS), "GOLD")),
        ("POST", tag_path(field_path("id"), "GOLD")),
        ("DELETE", tag_path(field_path("id"), "GOLD")),
        ("POST", tag_path(job_path(JOB_NS, JOB), "GOLD")),
        ("DELETE", tag_path(job_path(JOB_NS, JOB), "GOLD")),
    )
    for method, url in writes:
        assert keyed.request(method, url).status_code == 401, (method, url)
        assert keyed.request(method, url, headers=READER).status_code == 403, (method, url)
    assert keyed.get("/api/v1/tags").status_code == 401
    assert call(keyed, "GET", "/api/v1/tags", "TagList", READER)["totalCount"] == 0
    assert dataset(keyed)["tags"] == [] and all(not tags for tags in tags_of_fields(dataset(keyed)).values())
    assert call(keyed, "POST", tag_path(path(NS, ORDERS), "GOLD"), "Dataset", ADMIN)["tags"] == ["GOLD"]


def test_a_namespace_limited_key_tags_only_what_it_can_see(keyed: TestClient) -> None:
    for tag in ("GOLD", "KEY"):  # tag definitions are global: a key without namespace limits makes them
        call(keyed, "PUT", f"/api/v1/tags/{tag}", "Tag", ADMIN)
    answer = call(keyed, "POST", tag_path(path(NS, ORDERS), "GOLD"), "Dataset", DB_WRITER)
    assert answer["tags"] == ["GOLD"] and "currentVersion" not in answer  # the writing job is hidden from it
    call(keyed, "POST", tag_path(field_path("id"), "KEY"), "Dataset", DB_WRITER)
    hidden = (
        (tag_path(path(KAFKA, TOPIC), "GOLD"), f"Namespace '{KAFKA}' not found."),
        (tag_path(path("warehouse", "raw_orders"), "GOLD"), "Namespace 'warehouse' not found."),
        (tag_path(job_path(JOB_NS, JOB), "GOLD"), f"Namespace '{JOB_NS}' not found."),
    )
    for url, message in hidden:
        for method in ("POST", "DELETE"):
            refused = keyed.request(method, url, headers=DB_WRITER)
            assert refused.status_code == 404 and refused.json() == {"code": 404, "message": message}
    assert call(keyed, "GET", path(KAFKA, TOPIC), "Dataset", ADMIN)["tags"] == []
    assert call(keyed, "GET", job_path(JOB_NS, JOB), "Job", ADMIN)["tags"] == []
    full = call(keyed, "GET", path(NS, ORDERS), "Dataset", ADMIN)
    assert full["tags"] == ["GOLD"] and tags_of_fields(full)["id"] == ["KEY"]
