"""The package's import graph: no cycles, layers that cannot loop, and the consumer's store reached only through
its public surface.

The graph is grimp's (the library behind import-linter), built from the source: every import counts, those
inside functions too (an import moved into a function to dodge a cycle is still the cycle); imports under
``if TYPE_CHECKING:`` do not, they never run.
"""

from __future__ import annotations

import grimp
import pytest

PACKAGE = "airflow_lineage_provider"
CONSUMER = f"{PACKAGE}.consumer"
STORE = f"{CONSUMER}.store"
#: What code outside the consumer may import of the store's side: the store object and the public read API.
PUBLIC_STORE_SURFACE = frozenset({STORE, f"{CONSUMER}.reads"})


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph(PACKAGE, exclude_type_checking_imports=True, cache_dir=None)


def strongly_connected(graph: grimp.ImportGraph) -> list[list[str]]:
    """Tarjan's strongly connected components with more than one module (iterative: no recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            module, imported = work[-1]
            step = next(imported, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(graph.find_modules_directly_imported_by(step)))))
                elif step in on_stack:
                    low[module] = min(low[module], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[module])
            if low[module] == index[module]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == module:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_package_has_no_import_cycle(graph: grimp.ImportGraph) -> None:
    cycles = strongly_connected(graph)
    shown = []
    for component in cycles:
        chain = graph.find_shortest_chain(importer=component[0], imported=component[1]) or ()
        back = graph.find_shortest_chain(importer=component[1], imported=component[0]) or ()
        shown.append(f"{' -> '.join(chain)} and back: {' -> '.join(back)}")
    assert not cycles, "import cycles:\n" + "\n".join(shown)


def test_nothing_outside_the_consumer_imports_store_internals(graph: grimp.ImportGraph) -> None:
    reaching_in = sorted(
        (importer, imported)
        for importer in graph.modules
        if not (importer == CONSUMER or importer.startswith(f"{CONSUMER}."))
        for imported in graph.find_modules_directly_imported_by(importer)
        if (imported == STORE or imported.startswith(f"{STORE}.")) and imported not in PUBLIC_STORE_SURFACE
    )
    allowed = sorted(PUBLIC_STORE_SURFACE)
    assert not reaching_in, f"modules importing the store's internals (use {allowed}): {reaching_in}"


#: What the store never imports: the HTTP side that reads it (routers) and Marquez's answers built from it.
ABOVE_THE_STORE = (f"{CONSUMER}.marquez", f"{CONSUMER}.routers")


def reaching_above_the_store(graph: grimp.ImportGraph) -> list[tuple[str, str]]:
    """``(importer, imported)`` for each import of a store module naming a module of :data:`ABOVE_THE_STORE`."""
    return sorted(
        (importer, imported)
        for importer in graph.modules
        if importer == STORE or importer.startswith(f"{STORE}.")
        for imported in graph.find_modules_directly_imported_by(importer)
        if any(imported == above or imported.startswith(f"{above}.") for above in ABOVE_THE_STORE)
    )


def test_the_store_imports_neither_marquez_nor_the_routers(graph: grimp.ImportGraph) -> None:
    reaching_up = reaching_above_the_store(graph)
    assert not reaching_up, f"store modules importing {list(ABOVE_THE_STORE)}: {reaching_up}"


def test_the_store_rule_can_fail() -> None:
    """A store module importing a Marquez module inside a function (grimp counts it) is reported."""
    made = grimp.ImportGraph()
    for module in (STORE, f"{STORE}.graph.nodes", f"{CONSUMER}.marquez.values", f"{CONSUMER}.routers.jobs"):
        made.add_module(module)
    made.add_import(importer=f"{STORE}.graph.nodes", imported=f"{CONSUMER}.marquez.values")
    made.add_import(importer=f"{CONSUMER}.routers.jobs", imported=STORE)
    assert reaching_above_the_store(made) == [(f"{STORE}.graph.nodes", f"{CONSUMER}.marquez.values")]


#: The package's layers, lowest first: a module may import its own layer and those below, never one above, so no
#: cycle can run between layers. Leaf: settings, shared constants and facet definitions. Producer: what runs in a
#: task (an operator's declared lineage included). Delivery: what carries events out of Airflow (outbox, export
#: DAG, design-time publication). The consumer imports only leaves: it runs without Airflow's task code. Entry
#: points (CLI, plugins, the operator that reads the store) sit on top.
LAYERS: dict[str, tuple[str, ...]] = {
    "leaf": (
        "airflow_compat", "conf", "defaults", "facets.", "get_provider_info", "name_templates", "namespace_aliases",
        "parent_run", "reporting", "schema_migrations", "schemas", "sqlite_engine", "sqlite_writers", "version",
    ),
    "producer": ("decorators", "design.declaration", "extractors", "facets", "operators", "producer", "task_context"),
    "delivery": ("design", "hooks", "outbox"),
    "consumer": ("consumer",),
    "entry": ("", "__main__", "cli", "operators.collect_lineage", "plugins"),
}  # fmt: skip
#: Which layers each layer may import.
MAY_IMPORT = {
    "leaf": {"leaf"},
    "producer": {"leaf", "producer"},
    "delivery": {"leaf", "producer", "delivery"},
    "consumer": {"leaf", "consumer"},
    "entry": set(LAYERS),
}


def layer_of(module: str) -> str:
    """The layer of a module of the package: its longest matching prefix in :data:`LAYERS` (``facets.`` is the
    facet definitions; ``facets`` alone, the public module re-exporting them with the task-time helpers)."""
    rest = module.removeprefix(PACKAGE).removeprefix(".")
    best, found = -1, None
    for layer, prefixes in LAYERS.items():
        for prefix in prefixes:
            matches = rest == prefix.rstrip(".") if not prefix.endswith(".") else rest.startswith(prefix)
            matches = matches or (prefix and not prefix.endswith(".") and rest.startswith(prefix + "."))
            if matches and len(prefix) > best:
                best, found = len(prefix), layer
    assert found is not None, f"{module} is in no layer: add it to LAYERS"
    return found


def test_layers_import_only_their_own_and_those_below(graph: grimp.ImportGraph) -> None:
    crossing = sorted(
        f"{importer} ({layer_of(importer)}) -> {imported} ({layer_of(imported)})"
        for importer in graph.modules
        for imported in graph.find_modules_directly_imported_by(importer)
        if layer_of(imported) not in MAY_IMPORT[layer_of(importer)]
    )
    assert not crossing, "imports against the layers:\n" + "\n".join(crossing)


def test_every_module_has_a_layer_and_the_layer_check_can_fail() -> None:
    assert layer_of(f"{PACKAGE}.facets.egeria") == "leaf" and layer_of(f"{PACKAGE}.facets") == "producer"
    assert layer_of(f"{PACKAGE}.operators.mixin") == "producer"
    assert layer_of(f"{PACKAGE}.operators.collect_lineage") == "entry"
    assert layer_of(f"{PACKAGE}.consumer.store.ingest") == "consumer" and layer_of(PACKAGE) == "entry"
    assert "consumer" not in MAY_IMPORT["leaf"] and "delivery" not in MAY_IMPORT["consumer"]


def test_the_cycle_finder_finds_a_cycle() -> None:
    """The check above can fail: a two-module cycle and a three-module one are found, a chain is not."""
    made = grimp.ImportGraph()
    for module in ("p", "p.a", "p.b", "p.c", "p.d", "p.e", "p.f"):
        made.add_module(module)
    made.add_import(importer="p.a", imported="p.b")
    made.add_import(importer="p.b", imported="p.a")
    made.add_import(importer="p.c", imported="p.d")
    made.add_import(importer="p.d", imported="p.e")
    made.add_import(importer="p.e", imported="p.c")
    made.add_import(importer="p.e", imported="p.f")
    assert strongly_connected(made) == [["p.a", "p.b"], ["p.c", "p.d", "p.e"]]
