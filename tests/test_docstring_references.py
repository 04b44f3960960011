"""Docstring cross-references (``:mod:``, ``:func:``, ``:class:``, ...) name modules that exist: a module moved or
renamed leaves no reference to where it was.

A reference with a leading dot is read as Sphinx reads it, as a suffix of a full name (``.cards`` names
``...store.graph.cards``); a full one (``airflow_lineage_provider.x``) must match exactly. For an object
reference (``:func:`.walks.walk_edges```) the module part must exist.
"""

from __future__ import annotations

import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "airflow_lineage_provider"
REFERENCE = re.compile(r":(mod|func|class|meth|data|attr):`~?([^`<]+?)`")


def _modules() -> set[str]:
    found = set()
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        found.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return found


def _resolves(kind: str, reference: str, modules: set[str]) -> bool:
    full = not reference.startswith(".")
    parts = reference.lstrip(".").split(".")
    candidates = [parts] if kind == "mod" else [parts[:-1], parts[:-2]]
    for candidate in candidates:
        if not candidate:
            return True  # a bare object name: looked up by Sphinx in the module at hand
        name = ".".join(candidate)
        if name in modules or (not full and any(module.endswith(f".{name}") for module in modules)):
            return True
    return False


def unresolved(modules: set[str], paths: list[Path]) -> list[str]:
    broken = []
    for path in paths:
        for match in REFERENCE.finditer(path.read_text()):
            kind, reference = match.group(1), match.group(2).strip()
            if not (reference.startswith(".") or reference.startswith("airflow_lineage_provider")):
                continue  # another package's name, or a bare one
            if not _resolves(kind, reference, modules):
                broken.append(f"{path.name}: {match.group(0)}")
    return broken


def test_every_docstring_reference_names_a_module_that_exists() -> None:
    assert unresolved(_modules(), sorted(PACKAGE.rglob("*.py"))) == []


def test_a_reference_to_a_module_that_moved_is_found(tmp_path: Path) -> None:
    stale = tmp_path / "stale.py"
    stale.write_text('"""See :mod:`.graph_cards` and :mod:`airflow_lineage_provider.nowhere`."""\n')
    fine = tmp_path / "fine.py"
    fine.write_text('"""See :mod:`.cards`, :func:`.walks.walk_edges` and :class:`LineageStore`."""\n')
    modules = _modules()
    assert len(unresolved(modules, [stale])) == 2
    assert unresolved(modules, [fine]) == []
