"""No module of the package reaches into a dependency's private internals (docs/producer-api.md, "Public APIs only").

A provider package is installed into Airflow installations of many ages and upgraded under them: anything it
takes from a dependency that the dependency does not promise to keep (an underscore name, a module it marks
internal) can break it at any minor release. This test reads every module of the package (its AST, nothing is
guessed from names alone) and fails on:

* an import of an underscore-prefixed name from another distribution (``from x import _y``), or of any module
  with an underscore-prefixed part (``airflow.sdk._shared...``), or of a module the dependency marks
  internal (:data:`NON_PUBLIC_MODULES`, e.g. ``openlineage.client.generated``: its ``event_v2``/``facet_v2``
  are the public face);
* an attribute ``_x`` read, written or called on a name bound to a dependency's module or object
  (``adapter_module._redacter``), or through ``getattr``/``hasattr``/``setattr`` with a literal ``"_x"`` on
  anything but the package's own ``self``/``cls``;
* ``super()._x`` in, and a ``def _x`` overriding an ``_x`` of, a class that subclasses a dependency's class
  (Airflow's ``_do_render_template_fields`` and the like), save the hooks a dependency documents as the ones to
  implement (:data:`DOCUMENTED_HOOKS`);
* ``object.__new__`` anywhere, and ``object.__setattr__`` on anything but ``self`` (building or filling a
  dependency's instance around its ``__init__`` and validators; a frozen dataclass setting its own field in
  ``__post_init__`` is ``object.__setattr__(self, ...)``);
* subclassing a class imported from a non-public module.

"Another distribution" is discovered, not listed: any top-level module that is neither the package nor the
standard library; a name the package re-exports (``airflow_compat``'s moved names) is resolved to where it comes
from, and a class's private methods are looked up through the package's own base classes. Exceptions are
:data:`ALLOWED` (each must name the contract test that keeps it honest; empty: there are none).
"""

from __future__ import annotations

import ast
import importlib
import sys
import types
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = "airflow_lineage_provider"
ROOT = Path(__file__).resolve().parent.parent / PACKAGE

#: Modules a dependency documents (or lays out) as internal although no part of their path starts with ``_``.
NON_PUBLIC_MODULES = (
    "openlineage.client.generated",  # generated classes; the public face is event_v2 / facet_v2
    "uvicorn.protocols",  # uvicorn's protocol implementations; its settings (uvicorn.Config) are the API
    "uvicorn.lifespan",
    "uvicorn.loops",
    "fastapi.dependencies",  # FastAPI's dependency resolution (solve_dependencies & co.)
    "starlette._utils",
)

#: Underscore-named methods a dependency documents as the ones its subclasses implement: overriding them is the
#: dependency's own extension point, not a reach (calling them through ``super()`` still is).
DOCUMENTED_HOOKS: dict[str, str] = {
    # openlineage-python: a custom facet names its JSON schema by overriding ``_get_schema`` (its facet_v2
    # classes and the "custom facets" section of the Python client docs do exactly this).
    "_get_schema": "openlineage-python custom facets",
    # providers-openlineage: ``BaseExtractor._execute_extraction`` is abstract; a custom extractor implements it
    # ("Custom Extractors" in the provider's guide).
    "_execute_extraction": "providers-openlineage custom extractors",
}

#: Contract-tested exceptions: ``(module relative to the package, the name reached)`` -> why and which test
#: checks it at the floors and the newest versions. Empty: no private reach earned its keep (>= 2x on a figure
#: a user feels); see docs/producer-api.md ("Public APIs only").
ALLOWED: dict[tuple[str, str], str] = {}

_STDLIB = frozenset(sys.stdlib_module_names) | {"__future__"}


@dataclass(frozen=True)
class Reach:
    """One private reach: where, and what."""

    module: str
    line: int
    name: str
    why: str

    def __str__(self) -> str:
        return f"{self.module}:{self.line}: {self.why} ({self.name})"


def _private(part: str) -> bool:
    return part.startswith("_") and not (part.startswith("__") and part.endswith("__"))


def _foreign(module: str | None) -> bool:
    """Whether ``module`` (an absolute dotted name) belongs to another distribution."""
    if not module:
        return False
    top = module.split(".")[0]
    return top != PACKAGE and top not in _STDLIB


def _non_public(module: str) -> bool:
    return any(_private(part) for part in module.split(".")) or any(
        module == prefix or module.startswith(prefix + ".") for prefix in NON_PUBLIC_MODULES
    )


def _dotted(module: str) -> str:
    """``design/serialized_dags.py`` -> ``airflow_lineage_provider.design.serialized_dags``."""
    parts = module.removesuffix(".py").split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join([PACKAGE, *parts])


def _origin(obj: object) -> str | None:
    """The module that defines ``obj`` (a module's own name; a class's or function's ``__module__``; an
    instance's class's)."""
    if isinstance(obj, types.ModuleType):
        return obj.__name__
    origin = getattr(obj, "__module__", None)
    return origin if isinstance(origin, str) else None


def _lookup(module: str, name: str) -> object | None:
    try:
        return getattr(importlib.import_module(module), name)
    except Exception:  # not importable here (an optional dependency): nothing to resolve
        return None


class _Scanner(ast.NodeVisitor):
    """Finds the reaches of one module's source (see the module docstring)."""

    def __init__(self, module: str) -> None:
        self.module = module
        #: The module's dotted name when it is one of the package's (relative imports, its own classes).
        self.dotted = _dotted(module) if module.endswith(".py") else None
        self.found: list[Reach] = []
        #: Local name -> the dependency's dotted path it is bound to (``Stats`` -> ``airflow...adapter.Stats``),
        #: also when the package re-exports it (``from airflow_lineage_provider.airflow_compat import DagBag``).
        self.foreign: dict[str, str] = {}
        #: Local name -> ``(module, name)`` of a name imported from the package itself (a base class, say).
        self.own: dict[str, tuple[str, str]] = {}
        #: Per enclosing class, its bases resolved to classes where they can be (else their dotted paths).
        self.class_stack: list[list[object]] = []
        #: ``object.__setattr__`` nodes called on ``self`` (a frozen class of the package setting its own field).
        self.own_setattr: set[int] = set()

    def _report(self, node: ast.AST, name: str, why: str) -> None:
        self.found.append(Reach(self.module, getattr(node, "lineno", 0), name, why))

    # -- imports ------------------------------------------------------------------------------------------

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if not _foreign(alias.name):
                continue
            if _non_public(alias.name):
                self._report(node, alias.name, "imports a dependency's non-public module")
            bound = alias.asname or alias.name.split(".")[0]
            self.foreign[bound] = alias.name if alias.asname else alias.name.split(".")[0]

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            if self.dotted is None:
                return
            package = self.dotted.split(".")
            if not self.module.endswith("__init__.py"):
                package = package[:-1]
            base = ".".join(package[: len(package) - node.level + 1])
            self._own_names(node, f"{base}.{node.module}" if node.module else base)
            return
        if not _foreign(node.module):
            if node.module and node.module.split(".")[0] == PACKAGE:
                self._own_names(node, node.module)
            return
        module = node.module or ""
        if _non_public(module):
            self._report(node, module, "imports from a dependency's non-public module")
        for alias in node.names:
            if _private(alias.name):
                self._report(node, f"{module}.{alias.name}", "imports a dependency's private name")
            self.foreign[alias.asname or alias.name] = f"{module}.{alias.name}"

    def _own_names(self, node: ast.ImportFrom, module: str) -> None:
        """Bind names imported from the package: as foreign when the package only re-exports a dependency's."""
        for alias in node.names:
            bound = alias.asname or alias.name
            self.own[bound] = (module, alias.name)
            obj = _lookup(module, alias.name)
            origin = _origin(obj) if obj is not None else None
            if origin is not None and _foreign(origin):
                self.foreign[bound] = f"{origin}.{getattr(obj, '__qualname__', alias.name)}"

    # -- attribute access ---------------------------------------------------------------------------------

    def _root(self, node: ast.expr) -> str | None:
        while isinstance(node, ast.Attribute | ast.Call | ast.Subscript):
            node = node.func if isinstance(node, ast.Call) else node.value
        return node.id if isinstance(node, ast.Name) else None

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if _private(node.attr):
            root = self._root(node.value)
            if root in self.foreign:
                self._report(node, f"{self.foreign[root]}...{node.attr}", "reaches a dependency's private attribute")
            elif self._is_super(node.value) and self.class_stack:
                definer = _defined_by(self.class_stack[-1], node.attr)
                if definer is not None:
                    self._report(node, f"{definer}.{node.attr}", "calls a dependency class's private method")
        if (
            node.attr in ("__new__", "__setattr__")
            and isinstance(node.value, ast.Name)
            and node.value.id == "object"
            and id(node) not in self.own_setattr
        ):
            self._report(node, f"object.{node.attr}", "builds or sets an instance around its class's own code")
        self.generic_visit(node)

    @staticmethod
    def _is_super(node: ast.expr) -> bool:
        return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if (
            isinstance(func, ast.Name)
            and func.id in ("getattr", "hasattr", "setattr", "delattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and _private(node.args[1].value)
        ):
            target = node.args[0]
            own = isinstance(target, ast.Name) and target.id in ("self", "cls")
            if not own:
                self._report(node, f'{func.id}(..., "{node.args[1].value}")', "reaches a private attribute by name")
        if (
            isinstance(func, ast.Attribute)
            and func.attr == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
            and _foreign(node.args[0].value)
            and _non_public(node.args[0].value)
        ):
            self._report(node, node.args[0].value, "imports a dependency's non-public module by name")
        if (
            isinstance(func, ast.Attribute)
            and func.attr == "__setattr__"
            and isinstance(func.value, ast.Name)
            and func.value.id == "object"
            and node.args
            and isinstance(node.args[0], ast.Name)
            and node.args[0].id == "self"
        ):
            self.own_setattr.add(id(func))
        self.generic_visit(node)

    # -- classes ------------------------------------------------------------------------------------------

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        bases: list[object] = []
        for base in node.bases:
            root = self._root(base)
            if root is None:
                continue
            if root in self.foreign:
                path = self.foreign[root]
                if _non_public(path.rsplit(".", 1)[0]):
                    self._report(base, path, "subclasses a class of a dependency's non-public module")
                module, _, attribute = path.rpartition(".")
                resolved = _lookup(module, attribute)
                bases.append(resolved if isinstance(resolved, type) else path)
            elif root in self.own:
                resolved = _lookup(*self.own[root])
                if isinstance(resolved, type):
                    bases.append(resolved)
            elif self.dotted is not None:  # a class defined earlier in this module
                resolved = _lookup(self.dotted, root)
                if isinstance(resolved, type):
                    bases.append(resolved)
        self.class_stack.append(bases)
        for item in node.body:
            if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and _private(item.name) and bases:
                if item.name in DOCUMENTED_HOOKS:
                    continue
                overridden = _defined_by(bases, item.name)
                if overridden:
                    self._report(item, f"{overridden}.{item.name}", "overrides a dependency class's private method")
        self.generic_visit(node)
        self.class_stack.pop()


def _defined_by(bases: list[object], name: str) -> str | None:
    """The first dependency class in the MROs of ``bases`` that defines ``name`` (the package's own classes are
    looked through); a base that could not be imported (a dotted path) counts as defining every name."""
    for base in bases:
        if not isinstance(base, type):
            return str(base)
        for klass in base.__mro__:
            if _foreign(klass.__module__) and name in vars(klass):
                return f"{klass.__module__}.{klass.__qualname__}"
    return None


def reaches_in(source: str, module: str = "<snippet>") -> list[Reach]:
    """Every private reach in ``source`` (a module's text)."""
    scanner = _Scanner(module)
    scanner.visit(ast.parse(source))
    return scanner.found


def package_modules() -> Iterator[tuple[str, Path]]:
    """``(path relative to the package, file)`` of every module of the package."""
    for path in sorted(ROOT.rglob("*.py")):
        yield path.relative_to(ROOT).as_posix(), path


def _unexcused(reaches: list[Reach]) -> list[Reach]:
    return [r for r in reaches if (r.module, r.name) not in ALLOWED]


def test_no_module_of_the_package_reaches_into_a_dependencys_internals() -> None:
    found = [reach for module, path in package_modules() for reach in reaches_in(path.read_text(), module)]
    unexcused = _unexcused(found)
    assert not unexcused, "private reaches into dependencies:\n" + "\n".join(map(str, unexcused))


def test_every_allowed_exception_is_still_reached() -> None:
    """An exception no longer taken leaves :data:`ALLOWED`: the list holds only what the code still reaches."""
    found = {(r.module, r.name) for module, path in package_modules() for r in reaches_in(path.read_text(), module)}
    assert not set(ALLOWED) - found, f"ALLOWED names reaches the code no longer makes: {sorted(set(ALLOWED) - found)}"


# -- the scanner itself can fail ----------------------------------------------------------------------------

SNIPPETS = {
    "private name": ("from airflow.providers.openlineage.plugins.listener import _openlineage_listener", 1),
    "private module": ("from airflow.sdk._shared.secrets_masker import redact", 1),
    "non-public module": ("from openlineage.client.generated import base\nx = base.PRODUCER", 1),
    "attribute of a module": ("import airflow.stats as s\nb = s._get_backend()", 1),
    "attribute of an object": (
        "from airflow.providers.openlineage.api import emit\nr = emit._redacter.redact(1)",
        1,
    ),
    "getattr by name": ("def f(adapter):\n    return getattr(adapter, '_redacter', None)", 1),
    "object.__new__": ("from openlineage.client.event_v2 import Run\nr = object.__new__(Run)", 1),
    "object.__setattr__ on another object": ("def f(run):\n    object.__setattr__(run, 'runId', 'x')", 1),
    "super private": (
        "from airflow.sdk import BaseOperator\n"
        "class Op(BaseOperator):\n"
        "    def _do_render_template_fields(self, *a):\n"
        "        super()._do_render_template_fields(*a)\n",
        2,
    ),
    "re-exported by the package": (
        "from airflow_lineage_provider.airflow_compat import DagSerialization\n"
        "DagSerialization._load_operator_extra_links = False",
        1,
    ),
    "private override through the package's own base": (
        "from airflow_lineage_provider.operators.mixin import LineageMixin\n"
        "class Op(LineageMixin):\n"
        "    def _do_render_template_fields(self, *a): ...\n",
        1,
    ),
    "non-public base": (
        "from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol\nclass P(HttpToolsProtocol): ...",
        2,
    ),
}


@pytest.mark.parametrize("case", sorted(SNIPPETS))
def test_the_scanner_finds_a_private_reach(case: str) -> None:
    source, expected = SNIPPETS[case]
    found = reaches_in(source)
    assert len(found) == expected, f"{case}: {found}"


def test_the_scanner_leaves_public_code_and_own_privates_alone() -> None:
    source = (
        "from airflow.sdk import BaseOperator\n"
        "from openlineage.client.serde import Serde\n"
        "from airflow_lineage_provider.reporting import warn_once\n"
        "import os\n"
        "class Op(BaseOperator):\n"
        "    def _lineage(self):\n"
        "        return getattr(self, '_cache', None) or Serde.to_json(self.render_template_fields({}))\n"
        "def f():\n"
        "    return os._exit, warn_once\n"
        "from openlineage.client.facet_v2 import RunFacet\n"
        "class Mine(RunFacet):\n"
        "    @staticmethod\n"
        "    def _get_schema():\n"
        "        return 'https://example.com/Mine.json'\n"
        "class Frozen:\n"
        "    def __post_init__(self):\n"
        "        object.__setattr__(self, 'x', 1)\n"
    )
    assert reaches_in(source) == []
