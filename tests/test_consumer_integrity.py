"""Referential integrity of the lineage store, kept by the writer rather than by foreign keys.

Every file of ../shared/corpus (real producers' events: parents, dataset and job events) is posted, in
order and then in reverse, with the corpus's dataset facets (column lineage, symlinks, ...) on outputs of
runs; retention prunes the older runs, and every reference between tables must still resolve — on SQLite
and PostgreSQL.
"""

from __future__ import annotations

import json

from fastapi.testclient import TestClient
from support.olschema import SHARED

pytest_plugins = ("support.consumer_fixtures",)

#: ``(table, column, referenced table, referenced column)`` of every reference the store keeps.
REFERENCES = [
    ("lineage_datasets", "node_id", "lineage_nodes", "id"),
    ("lineage_jobs", "node_id", "lineage_nodes", "id"),
    ("lineage_runs", "job_id", "lineage_nodes", "id"),
    ("lineage_run_io", "run_uuid", "lineage_runs", "run_uuid"),
    ("lineage_run_io", "dataset_id", "lineage_nodes", "id"),
    ("lineage_edges", "origin_id", "lineage_nodes", "id"),
    ("lineage_edges", "destination_id", "lineage_nodes", "id"),
    ("lineage_io_groups", "job_id", "lineage_nodes", "id"),
    ("lineage_io_members", "group_id", "lineage_io_groups", "id"),
    ("lineage_io_members", "dataset_id", "lineage_nodes", "id"),
    ("lineage_fields", "dataset_id", "lineage_nodes", "id"),
    ("lineage_column_edges", "source_field_id", "lineage_fields", "id"),
    ("lineage_column_edges", "target_field_id", "lineage_fields", "id"),
    ("lineage_symlinks", "dataset_id", "lineage_nodes", "id"),
    ("lineage_node_producers", "node_id", "lineage_nodes", "id"),
    ("lineage_dataset_members", "node_id", "lineage_nodes", "id"),
    ("lineage_dataset_members", "member_id", "lineage_nodes", "id"),
    ("lineage_dataset_members", "canonical_id", "lineage_nodes", "id"),
]


def _post_corpus(client: TestClient, reverse: bool) -> int:
    from test_consumer_corpus import CASES, CORPUS

    stored = 0
    for _status, relative in reversed(CASES) if reverse else CASES:
        body = (CORPUS / relative).read_bytes()
        response = client.post("/api/v1/lineage", content=body, headers={"content-type": "application/json"})
        stored += response.status_code in (200, 201)
    return stored


def _post_dataset_facets(client: TestClient) -> None:
    """Every valid dataset facet of the corpus (column lineage, symlinks, ...) on an output of a run."""
    from support.consumer_helpers import dataset, run_event
    from test_consumer_corpus import CASES, CORPUS

    facet_files = [path for status, path in CASES if status == "facet:valid" and "DatasetFacet/" in path]
    for index, relative in enumerate(facet_files):
        event = run_event("COMPLETE", f"facets_{index}", time=index, outputs=[dataset(f"out_{index}")])
        event["outputs"][0]["facets"] = json.loads((CORPUS / relative).read_text())
        assert client.post("/api/v1/lineage", json=event).status_code == 201, relative


def _read_a_symlinked_name(client: TestClient) -> None:
    """A job reading a dataset by the name a corpus symlink gives it: the two names become one group."""
    from support.consumer_helpers import dataset, run_event

    with client.app.state.store.read() as conn:
        namespace, name = conn.exec_driver_sql("SELECT namespace, name FROM lineage_symlinks ORDER BY 1, 2").first()
    event = run_event("COMPLETE", "reads_by_symlink", time=1, inputs=[dataset(name, namespace=namespace)])
    assert client.post("/api/v1/lineage", json=event).status_code == 201


def test_every_reference_resolves_after_the_corpus_and_a_prune(client: TestClient) -> None:
    from support.environment import require_shared

    require_shared()
    assert SHARED.is_dir()
    assert _post_corpus(client, reverse=False) >= 15
    _post_corpus(client, reverse=True)
    _post_dataset_facets(client)
    _read_a_symlinked_name(client)
    assert client.post("/api/v1/retention", params={"days": 365}).status_code == 200

    store = client.app.state.store
    with store.read() as conn:
        for table, column, target, key in REFERENCES:
            rows = conn.exec_driver_sql(f"SELECT count(*) FROM {table}").scalar()
            assert rows, f"{table} is empty: the corpus no longer exercises {table}.{column}"
            dangling = conn.exec_driver_sql(
                f"SELECT count(*) FROM {table} t WHERE NOT EXISTS (SELECT 1 FROM {target} r WHERE r.{key} = t.{column})"
            ).scalar()
            assert dangling == 0, f"{dangling} of {rows} rows of {table}.{column} point at no {target}.{key}"
