"""Renderings of templated names collapsed into their pattern: walk and page cost, and none without patterns.

The graph: ``src`` is read by 10 jobs, each writing a daily partition ``part_<i>_<YYYYMMDD>`` for a year (365 run
events each), a job per pattern reading the year's partitions and writing ``summary_<i>_0``, then a chain of 8
jobs per pattern (``summary_<i>_<k>``), so that a depth-10 downstream walk from ``src`` reaches the ends. With
``patterns``, each partitioning job has also declared ``part_<i>_{{ ds_nodash }}`` (a JobEvent with the templated
name facet): 10 templated datasets x 365 renderings. Without, the same runs and no JobEvent (a store without
declared lineage), or with JobEvents declaring only ``src`` as each partitioning job's input (declared lineage,
no templated name).

Measured, each request interleaved with its alternative, the median of each and of the per-pair ratios:

* ``walk``: the depth-10 downstream walk from ``src`` over HTTP (``GET /api/v1/lineage``, graph cards warm),
  on the graph with patterns collapsed (the default) and expanded (``renderings=expanded``); and on the graphs
  without patterns, served by checkout BEFORE (the commit before collapsing existed) and by this checkout;
* ``page``: the lineage page (headless Chromium, 1400x900, SQLite) showing that walk, from navigation to
  ``ready``, and its own layout-and-drawing time (``data-render-ms``); collapsed vs every pattern expanded
  (``expand=`` each), and without patterns BEFORE vs this checkout.

    git worktree add /tmp/base <commit before collapsing>
    .venv/bin/python bench/templated_walk.py --before /tmp/base [--stores sqlite postgres] [--repeat 21]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlencode

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from consumer_bench import Ours, serve_ours  # noqa: E402
from graph_cards import elapsed_ms, fresh_store, load_batches  # noqa: E402
from openlineage.client.event_v2 import InputDataset, Job, JobEvent, OutputDataset, Run, RunEvent, RunState  # noqa: E402
from openlineage.client.serde import Serde  # noqa: E402
from support.browser import headless_chromium, require_chromium  # noqa: E402
from support.ui_page import LineagePage  # noqa: E402

from airflow_lineage_provider.facets.design_time import TEMPLATED_NAME_KEY, TemplatedNameDatasetFacet  # noqa: E402
from airflow_lineage_provider.name_templates import name_regex  # noqa: E402

NAMESPACE, JOBS, PRODUCER = "bench", "pipelines", "https://example.com/templated-walk-bench"
PATTERNS, DAYS, CHAIN, DEPTH = 10, 365, 8, 10
ROOT = f"dataset:{NAMESPACE}:src"
FIRST_DAY = datetime(2025, 1, 1, tzinfo=timezone.utc)


def _json(event: Any) -> dict[str, Any]:
    return json.loads(Serde.to_json(event))


def _run(job: str, at: datetime, inputs: list[str], outputs: list[str]) -> dict[str, Any]:
    return _json(
        RunEvent(
            eventType=RunState.COMPLETE,
            eventTime=at.isoformat(),
            run=Run(runId=str(uuid.uuid4())),
            job=Job(namespace=JOBS, name=job),
            producer=PRODUCER,
            inputs=[InputDataset(namespace=NAMESPACE, name=name) for name in inputs],
            outputs=[OutputDataset(namespace=NAMESPACE, name=name) for name in outputs],
        )
    )


#: What the partitioning jobs declared: their templated output, only their input, or nothing (no JobEvent).
Declared = Literal["templated", "plain", "none"]


def events(declared: Declared) -> list[dict[str, Any]]:
    """The graph of the module, the partitioning jobs having ``declared`` their lineage."""
    found = []
    for i in range(PATTERNS):
        template = f"part_{i}_{{{{ ds_nodash }}}}"
        if declared != "none":
            facet = TemplatedNameDatasetFacet(nameTemplate=template, nameRegex=name_regex(template))
            output = OutputDataset(namespace=NAMESPACE, name=template, facets={TEMPLATED_NAME_KEY: facet})
            event = JobEvent(
                eventTime=FIRST_DAY.isoformat(),
                job=Job(namespace=JOBS, name=f"partition_{i}"),
                producer=PRODUCER,
                inputs=[InputDataset(namespace=NAMESPACE, name="src")],
                outputs=[output] if declared == "templated" else [],
            )
            found.append(_json(event))
        days = [FIRST_DAY + timedelta(days=day) for day in range(DAYS)]
        partitions = [f"part_{i}_{day:%Y%m%d}" for day in days]
        found += [_run(f"partition_{i}", day, ["src"], [name]) for day, name in zip(days, partitions, strict=True)]
        end = days[-1] + timedelta(hours=1)
        found.append(_run(f"summarize_{i}", end, partitions, [f"summary_{i}_0"]))
        for k in range(1, CHAIN + 1):
            found.append(_run(f"step_{i}_{k}", end, [f"summary_{i}_{k - 1}"], [f"summary_{i}_{k}"]))
    return found


def walk(server: Ours, **params: Any) -> bytes:
    return server.body(
        "/api/v1/lineage", {"nodeId": ROOT, "depth": DEPTH, "direction": "downstream", "maxNodes": 100_000, **params}
    )


def compare(calls: dict[str, Callable[[], Any]], repeat: int) -> dict[str, Any]:
    """Medians of two calls interleaved (alternating order), and the median of the per-pair ratios (2nd / 1st)."""
    names = list(calls)
    for _ in range(3):
        for call in calls.values():
            call()  # warm-up: graph cards, prepared statements, the browser's caches
    times: dict[str, list[float]] = {name: [] for name in names}
    order = list(names)
    for _ in range(repeat):
        order.reverse()
        for name in order:
            times[name].append(elapsed_ms(calls[name]))
    first, second = names
    ratios = [b / a for a, b in zip(times[first], times[second], strict=True)]
    return {name: statistics.median(values) for name, values in times.items()} | {"ratio": statistics.median(ratios)}


@contextmanager
def loaded(kind: str, folder: Path, declared: Declared, tree: Path) -> Iterator[str]:
    """A fresh store holding :func:`events`, loaded through a server of checkout ``tree`` (each checkout reads a
    store of its own: a newer one may migrate a store past what the older one reads)."""
    with fresh_store(kind, folder) as store:
        with serve_ours(store, folder / "loader", tree=tree) as loader:
            load_batches(loader, events(declared))
        yield store


def _row(kind: str, what: str, found: dict[str, Any], first: str, second: str, unit: str = "ms") -> str:
    return f"| {kind} | {what} | {found[first]:.1f} {unit} | {found[second]:.1f} {unit} | {found['ratio']:.2f}x |"


def walks(kind: str, before: Path, after: Path, repeat: int) -> list[str]:
    rows = []
    with (
        tempfile.TemporaryDirectory(prefix="alp-templated-") as tmp,
        loaded(kind, Path(tmp), "templated", after) as store,
    ):
        with serve_ours(store, Path(tmp) / "after", tree=after) as server:
            collapsed, expanded = (server.count(walk(server, **p)) for p in ({}, {"renderings": "expanded"}))
            found = compare(
                {"collapsed": lambda: walk(server), "expanded": lambda: walk(server, renderings="expanded")}, repeat
            )
            what = f"patterns: collapsed ({collapsed} nodes) vs expanded ({expanded})"
            rows.append(_row(kind, what, found, "collapsed", "expanded"))
    stores: list[tuple[Declared, str]] = [("none", "no JobEvent"), ("plain", "JobEvents")]
    for declared, what in stores:
        with (
            tempfile.TemporaryDirectory(prefix="alp-templated-") as tmp,
            loaded(kind, Path(tmp) / "old", declared, before) as old_store,
            loaded(kind, Path(tmp) / "new", declared, after) as new_store,
            serve_ours(old_store, Path(tmp) / "before", tree=before) as old,
            serve_ours(new_store, Path(tmp) / "after", tree=after) as new,
        ):
            nodes = new.count(walk(new))
            assert old.count(walk(old)) == nodes, "both checkouts must give the same answer"
            found = compare({"before": lambda: walk(old), "after": lambda: walk(new)}, repeat)
            measure = f"no patterns, {what} ({nodes} nodes): before vs after"
            rows.append(_row(kind, measure, found, "before", "after"))
    return rows


def _page_calls(page: LineagePage, expand: list[str] = ()) -> tuple[Callable[[], Any], Callable[[], float]]:  # type: ignore[assignment]
    """Opening the page on the walk (``expand``: these patterns expanded), and the page's own layout-and-drawing
    time of the last opening."""
    params = {"nodeId": ROOT, "depth": DEPTH, "direction": "downstream", "maxNodes": 5000, "expand": list(expand)}
    address = f"{page.base_url}/ui?{urlencode(params, doseq=True)}"

    def show() -> None:
        page.driver.get(address)
        page.wait_ready(timeout=120)

    def drawing() -> float:
        return float(page.js("return document.getElementById('graph').dataset.renderMs") or "nan")

    return show, drawing


def pages(before: Path, after: Path, repeat: int) -> list[str]:
    """Page times on SQLite: patterns collapsed vs expanded, and no patterns before vs after."""
    rows = []
    require_chromium()
    expand = [f"dataset:{NAMESPACE}:part_{i}_{{{{ ds_nodash }}}}" for i in range(PATTERNS)]
    with headless_chromium() as driver:
        with (
            tempfile.TemporaryDirectory(prefix="alp-templated-") as tmp,
            loaded("sqlite", Path(tmp), "templated", after) as store,
        ):
            with serve_ours(store, Path(tmp) / "after", tree=after) as server:
                page = LineagePage(driver, server.url)
                shown: dict[str, tuple[Callable[[], Any], Callable[[], float]]] = {
                    "collapsed": _page_calls(page),
                    "expanded": _page_calls(page, expand=expand),
                }
                rows += _page_rows("patterns: collapsed vs expanded", shown, repeat)
        with (
            tempfile.TemporaryDirectory(prefix="alp-templated-") as tmp,
            loaded("sqlite", Path(tmp) / "old", "none", before) as old_store,
            loaded("sqlite", Path(tmp) / "new", "none", after) as new_store,
            serve_ours(old_store, Path(tmp) / "before", tree=before) as old,
            serve_ours(new_store, Path(tmp) / "after", tree=after) as new,
        ):
            shown = {
                "before": _page_calls(LineagePage(driver, old.url)),
                "after": _page_calls(LineagePage(driver, new.url)),
            }
            rows += _page_rows("no patterns: before vs after", shown, repeat)
    return rows


def _page_rows(what: str, shown: dict[str, tuple[Callable[[], Any], Callable[[], float]]], repeat: int) -> list[str]:
    names = list(shown)
    drawn: dict[str, list[float]] = {name: [] for name in names}

    def opened(name: str) -> Callable[[], None]:
        def call() -> None:
            shown[name][0]()
            drawn[name].append(shown[name][1]())

        return call

    found = compare({name: opened(name) for name in names}, repeat)
    medians = {name: statistics.median(values[3:]) for name, values in drawn.items()}  # after the warm-up
    pairs = zip(drawn[names[0]][3:], drawn[names[1]][3:], strict=True)
    drawing = medians | {"ratio": statistics.median(b / a for a, b in pairs)}
    return [
        _row("sqlite", f"page shown, {what}", found, *names),
        _row("sqlite", f"page drawing (data-render-ms), {what}", drawing, *names),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", type=Path, required=True, help="a checkout (git worktree) without collapsing")
    parser.add_argument("--after", type=Path, default=HERE.parent, help="default: this checkout")
    parser.add_argument("--stores", nargs="+", default=["sqlite", "postgres"], choices=["sqlite", "postgres"])
    parser.add_argument("--repeat", type=int, default=21)
    parser.add_argument("--no-page", action="store_true", help="walks only")
    args = parser.parse_args()
    before, after = args.before.resolve(), args.after.resolve()
    started = time.monotonic()
    graph = f"{PATTERNS} patterns x {DAYS} renderings, depth {DEPTH} downstream from {ROOT}"
    print(f"before: {before}; after: {after}; {graph}")
    print("\n| store | measure | first, median | second, median | second / first (median of pairs) |")
    print("|---|---|---:|---:|---:|")
    for kind in args.stores:
        for row in walks(kind, before, after, args.repeat):
            print(row, flush=True)
    if not args.no_page:
        for row in pages(before, after, max(5, args.repeat // 3)):
            print(row, flush=True)
    print(f"\n({time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
