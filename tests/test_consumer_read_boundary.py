"""The consumer's routers read only through the one read boundary (:mod:`airflow_lineage_provider.consumer.store_view`).

A router never opens a read on the store itself (``store.read()``, the walk limiter's ``reading(store, ...)``) and
never computes the visible namespaces (``visible_namespaces``): it is handed them with the connection by the
request's :class:`StoreView`. Checked on the routers' source (AST), with the check shown to catch each form.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import airflow_lineage_provider.consumer.feast as feast_package
import airflow_lineage_provider.consumer.routers as routers_package

ROUTERS = Path(routers_package.__file__).parent
#: Feast's consumer API's routes live in their own subpackage.
FEAST = Path(feast_package.__file__).parent


def bypasses(source: str) -> list[str]:
    """The reads in ``source`` that go around the view: ``<x>.read(...)`` on a name ``store`` (or ``*.store``),
    ``reading(...)`` and any use of ``visible_namespaces``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Name) and node.id == "visible_namespaces":
            found.append(f"line {node.lineno}: visible_namespaces")
        elif isinstance(node, ast.Attribute) and node.attr == "visible_namespaces":
            found.append(f"line {node.lineno}: .visible_namespaces")
        elif isinstance(node, ast.alias) and node.name == "visible_namespaces":
            found.append("imports visible_namespaces")
        elif isinstance(node, ast.Call):
            function = node.func
            if isinstance(function, ast.Name) and function.id == "reading":
                found.append(f"line {node.lineno}: reading(...)")
            if isinstance(function, ast.Attribute) and function.attr == "read":
                receiver = function.value
                name = receiver.id if isinstance(receiver, ast.Name) else getattr(receiver, "attr", "")
                if name == "store":
                    found.append(f"line {node.lineno}: store.read()")
    return found


@pytest.mark.parametrize(
    "router", sorted([*ROUTERS.glob("*.py"), *FEAST.glob("*.py")]), ids=lambda path: f"{path.parent.name}/{path.name}"
)
def test_a_router_reads_only_through_the_view(router: Path) -> None:
    assert bypasses(router.read_text()) == [], f"{router.name} reads around the request's StoreView"


@pytest.mark.parametrize(
    "snippet",
    [
        "with store.read() as conn:\n    pass",
        "with request.app.state.store.read() as conn:\n    pass",
        "with reading(store, walk) as conn:\n    pass",
        "from airflow_lineage_provider.consumer.store.read.visibility import visible_namespaces",
        "visible = visibility.visible_namespaces(conn, scope)",
    ],
)
def test_the_check_catches_each_way_around_the_view(snippet: str) -> None:
    assert bypasses(snippet)


def test_reads_through_the_view_pass() -> None:
    assert (
        bypasses("with view.read() as (conn, visible):\n    pass\nwith view.walking(walk) as (c, v):\n    pass") == []
    )
