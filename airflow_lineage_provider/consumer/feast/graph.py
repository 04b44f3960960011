"""Feast's graph answers from the store's flat rows (:mod:`..store.read.flat_rows`): the whole graph a page at a
time, and the nodes and edges reached from one node."""

from __future__ import annotations

import json
from collections import deque
from typing import Any

from sqlalchemy import Connection

from airflow_lineage_provider.consumer.store.read import flat_rows
from airflow_lineage_provider.consumer.store.read.visibility import Visible

Row = dict[str, Any]
NodeKey = tuple[str, str, str]


def parsed(text: str | None) -> Any:
    return json.loads(text) if text else None


def dataset_node(row: Row) -> Row:
    """A dataset row as a node of Feast's graph listing."""
    return {
        "type": "dataset",
        "namespace": row["dataset_namespace"],
        "name": row["dataset_name"],
        "producer": row["producer"],
        "feast_object_type": row["feast_object_type"],
        "feast_object_name": row["feast_object_name"],
        "feast_project": row["feast_project"],
        "schema": parsed(row["schema_json"]),
        "description": row["description"],
        "source_type": row["source_type"],
        "owner": row["owner_name"],
        "owner_type": row["owner_type"],
        "lifecycle_state": row["lifecycle_state"],
        "current_version": row["current_version"],
        "facets": parsed(row["facets_json"]),
    }


def job_node(row: Row) -> Row:
    """A job row as a node of Feast's graph listing."""
    return {
        "type": "job",
        "namespace": row["job_namespace"],
        "name": row["job_name"],
        "producer": row["producer"],
        "job_type": row["job_type"],
        "description": row["description"],
        "facets": parsed(row["facets_json"]),
    }


def graph_page(conn: Connection, visible: Visible, namespace: str | None, limit: int, offset: int) -> Row:
    """Feast's ``GET /lineage/openlineage/graph``: datasets then jobs (``limit`` 0: all of them), every edge that
    touches the namespace asked (all edges without one), the symlink edges again, and the symlinks."""
    datasets = flat_rows.dataset_rows(conn, visible, namespace)
    jobs = flat_rows.job_rows(conn, visible, namespace)
    total = len(datasets) + len(jobs)
    if limit > 0:
        shown = [dataset_node(row) for row in datasets] + [job_node(row) for row in jobs]
        nodes = shown[offset : offset + limit]
    else:
        nodes = [dataset_node(row) for row in datasets] + [job_node(row) for row in jobs]
    edges = flat_rows.lineage_edges(conn, visible)
    if namespace is not None:
        edges = [e for e in edges if namespace in (e["source_namespace"], e["target_namespace"])]
    symlinks = flat_rows.symlink_rows(conn, visible)
    for link in symlinks:
        edges.append(
            {
                "source_type": "dataset",
                "source_namespace": link["dataset_namespace"],
                "source_name": link["dataset_name"],
                "target_type": "dataset",
                "target_namespace": link["linked_namespace"],
                "target_name": link["linked_name"],
                "edge_type": "symlink",
                "updated_at": link["updated_at"],
            }
        )
    return {"nodes": nodes, "edges": edges, "symlinks": symlinks, "total_nodes": total}


def _ends(edge: Row) -> tuple[NodeKey, NodeKey]:
    return (
        (edge["source_type"], edge["source_namespace"], edge["source_name"]),
        (edge["target_type"], edge["target_namespace"], edge["target_name"]),
    )


def subgraph(conn: Connection, visible: Visible, root: NodeKey, depth: int, direction: str) -> Row:
    """Feast's ``GET /lineage/openlineage/graph/{type}/{namespace}/{name}``: breadth first from ``root`` along
    every kind of edge, downstream then upstream (``direction`` both), expanding nodes up to ``depth`` steps
    away (so edges reach one step further, as Feast's walk does). The root is a node even when nothing links it."""
    downstream: dict[NodeKey, list[Row]] = {}
    upstream: dict[NodeKey, list[Row]] = {}
    for edge in flat_rows.lineage_edges(conn, visible):
        source, target = _ends(edge)
        listed = {key: edge[key] for key in edge if key != "updated_at"}
        downstream.setdefault(source, []).append(listed)
        upstream.setdefault(target, []).append(listed)
    nodes: dict[NodeKey, Row] = {}
    edges: list[Row] = []
    seen_edges: set[tuple[NodeKey, NodeKey]] = set()
    for way, adjacent in (("downstream", downstream), ("upstream", upstream)):
        if direction not in ("both", way):
            continue
        visited: set[NodeKey] = set()
        queue: deque[tuple[NodeKey, int]] = deque([(root, 0)])
        while queue:
            node, steps = queue.popleft()
            if node in visited or steps > depth:
                continue
            visited.add(node)
            for edge in adjacent.get(node, []):
                source, target = _ends(edge)
                if (source, target) not in seen_edges:
                    seen_edges.add((source, target))
                    edges.append(edge)
                for key in (source, target):
                    nodes.setdefault(key, {"type": key[0], "namespace": key[1], "name": key[2]})
                following = target if way == "downstream" else source
                if following not in visited:
                    queue.append((following, steps + 1))
    nodes.setdefault(root, {"type": root[0], "namespace": root[1], "name": root[2]})
    return {"nodes": list(nodes.values()), "edges": edges}
