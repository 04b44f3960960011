"""Every Alembic revision is frozen history: it carries its own table definitions and helpers and imports none
of the package's live modules, so a refactor of today's code (tables, ingest, identity, ...) cannot change
what an old upgrade does. Revisions may import the standard library, Alembic and SQLAlchemy only."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

import airflow_lineage_provider

PACKAGE = Path(airflow_lineage_provider.__file__).parent
#: Every migration chain of the package (the lineage store's, the outbox's, any added later).
REVISIONS = sorted(PACKAGE.glob("**/alembic/versions/*.py"))
ALLOWED = {"alembic", "sqlalchemy"}


def imported_modules(source: str, filename: str) -> list[tuple[int, str]]:
    """``(line, module)`` of every import in the Python ``source`` (a relative import as its dots and name, and
    ``importlib.import_module`` / ``__import__`` of a constant name)."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            found.append((node.lineno, "." * node.level + (node.module or "")))
        elif isinstance(node, ast.Call) and isinstance(node.func, (ast.Attribute, ast.Name)):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
            if name in ("import_module", "__import__") and node.args and isinstance(node.args[0], ast.Constant):
                found.append((node.lineno, str(node.args[0].value)))
    return found


def test_both_migration_chains_are_found() -> None:
    """The lineage store's chain and the outbox's: the glob did not go stale when a folder moved."""
    chains = {path.parent for path in REVISIONS}
    assert len(chains) >= 2 and len(REVISIONS) >= 13, REVISIONS


def forbidden_imports(source: str, filename: str) -> list[str]:
    """The imports of ``source`` that are neither the standard library, Alembic nor SQLAlchemy."""
    return [
        f"line {line}: {module}"
        for line, module in imported_modules(source, filename)
        if module.startswith(".") or module.split(".")[0] not in sys.stdlib_module_names | ALLOWED
    ]


@pytest.mark.parametrize("path", REVISIONS, ids=lambda path: str(path.relative_to(PACKAGE)))
def test_a_revision_imports_only_the_standard_library_alembic_and_sqlalchemy(path: Path) -> None:
    live = forbidden_imports(path.read_text(), str(path))
    assert not live, (
        f"{path.relative_to(PACKAGE.parent)} imports {live}: a revision must not change when today's code does; "
        "copy the tables and helpers it needs into the revision as they are at that revision (see 0012)"
    )


def test_the_guard_sees_a_live_import() -> None:
    """Every form of a live import is caught: a package import, a relative one, and one by name."""
    source = (
        "from airflow_lineage_provider.consumer.store import tables\n"
        "from .helpers import x\n"
        "import importlib\n"
        "importlib.import_module('airflow_lineage_provider.consumer.store.write.ingest')\n"
    )
    assert forbidden_imports(source, "probe.py") == [
        "line 1: airflow_lineage_provider.consumer.store",
        "line 2: .helpers",
        "line 4: airflow_lineage_provider.consumer.store.write.ingest",
    ]
