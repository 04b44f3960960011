"""Graph cards on and off: the headline depth-10 walk, warm and cold.

Graph cards (``consumer/store/graph/cards.py``) keep what a graph answer shows of each node in the server's
memory, keyed by the node's version, so that a repeated walk reads versions only and builds nothing that did
not change. They stay only if they pay: the warm depth-10 walk at least 20% faster, the cold first request no
slower. This benchmark serves one store (the consumer benchmark's graph, N = 5,000 jobs by default: the
depth-10 upstream walk from ``layer9.table_0`` reaches 2,955 nodes, docs/benchmarks.md's headline walk)
from servers started with the cards on (the default) and off (``--graph-cache-nodes 0``); the graph is
loaded through a third server, so neither measured server ingested.

* **warm**: both servers side by side, asked in turn for the depth-10 walk (each first in every other pair)
  after warm-up requests; medians, and the median of the per-pair ratios (on / off).
* **cold**: ``--starts`` fresh servers per case, alternating on/off: the first request after start-up is the
  depth-10 walk (``cold``), or comes after three depth-3 walks of the same root (``after depth-3``: the
  cards then hold a few nodes, and the cards-on server read versions first and the rest after).

Every request is timed to the last byte of the response, without parsing it.

``--ingest BEFORE AFTER`` measures instead what the node versions cost the ingest: batch ingest (batches of
500, the consumer benchmark's figure) of the workload into a fresh store, by a server importing checkout
BEFORE and one importing AFTER, alternating, ``--rounds`` each; then the same events posted again under new
keys (each with one more run facet: nothing new for any dataset, every job's run rewritten), which a store that
rewrites only changed nodes does with fewer writes.

    .venv/bin/python bench/graph_cards.py                       # SQLite and PostgreSQL, ~4 minutes
    .venv/bin/python bench/graph_cards.py --stores sqlite --jobs 1000
    .venv/bin/python bench/graph_cards.py --tree /tmp/alp-cards-base   # the servers import another checkout
    .venv/bin/python bench/graph_cards.py --ingest /tmp/alp-cards-base /tmp/alp-cards-after --rounds 5
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from consumer_bench import BATCH, Ours, postgres_schema, serve_ours  # noqa: E402
from consumer_workload import workload  # noqa: E402

#: ``airflow-lineage serve`` options of each case.
CASES: dict[str, tuple[str, ...]] = {"cards on": (), "cards off": ("--graph-cache-nodes", "0")}


def load_batches(consumer: Ours, events: list[dict[str, Any]]) -> None:
    for start in range(0, len(events), BATCH):
        consumer.post("/api/v1/lineage/batch", events[start : start + BATCH]).raise_for_status()


def elapsed_ms(call: Callable[[], Any]) -> float:
    started = time.perf_counter()
    call()
    return (time.perf_counter() - started) * 1000


def warm(store: str, folder: Path, repeat: int, tree: Path | None) -> dict[str, Any]:
    """Medians of the depth-10 walk from a cards-on and a cards-off server, interleaved, and the median ratio."""
    with (
        serve_ours(store, folder / "on", *CASES["cards on"], tree=tree) as on,
        serve_ours(store, folder / "off", *CASES["cards off"], tree=tree) as off,
    ):
        nodes = on.count(on.walk(10))
        assert off.count(off.walk(10)) == nodes, "both servers must give the same answer"
        for _ in range(3):
            on.walk(10), off.walk(10)
        times: dict[str, list[float]] = {"cards on": [], "cards off": []}
        order = [("cards on", on), ("cards off", off)]
        for _ in range(repeat):
            order.reverse()
            for name, server in order:

                def walk(s: Ours = server) -> bytes:
                    return s.walk(10)

                times[name].append(elapsed_ms(walk))
    ratios = [a / b for a, b in zip(times["cards on"], times["cards off"], strict=True)]
    return {
        "nodes": nodes,
        "on_ms": statistics.median(times["cards on"]),
        "off_ms": statistics.median(times["cards off"]),
        "ratio": statistics.median(ratios),
    }


def cold(store: str, folder: Path, starts: int, tree: Path | None) -> dict[str, dict[str, list[float]]]:
    """First-request times of fresh servers per case: the depth-10 walk first, and after three depth-3 walks."""
    found: dict[str, dict[str, list[float]]] = {case: {"cold": [], "after depth-3": []} for case in CASES}
    order = list(CASES)
    for start in range(starts):
        order.reverse()
        for case in order:
            with serve_ours(store, folder / f"cold-{start}-{case[-3:]}", *CASES[case], tree=tree) as server:

                def walk(s: Ours = server) -> bytes:
                    return s.walk(10)

                found[case]["cold"].append(elapsed_ms(walk))
            with serve_ours(store, folder / f"after-{start}-{case[-3:]}", *CASES[case], tree=tree) as server:
                for _ in range(3):
                    server.walk(3)

                def walk_after(s: Ours = server) -> bytes:
                    return s.walk(10)

                found[case]["after depth-3"].append(elapsed_ms(walk_after))
    return found


def _restated(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``events`` under new keys, saying nothing new of any dataset: each with one more run facet."""
    facet = {"_producer": "https://example.com/bench", "_schemaURL": "https://example.com/bench.json", "n": 1}
    return [
        {**event, "run": {**event["run"], "facets": {**event["run"].get("facets", {}), "bench": facet}}}
        for event in events
    ]


def ingest(kind: str, trees: dict[str, Path], events: list[dict[str, Any]], rounds: int) -> dict[str, Any]:
    """Events per second of batch ingest into a fresh store, then of the same events restated, per tree."""
    restated = _restated(events)
    found: dict[str, dict[str, list[float]]] = {name: {"first": [], "restated": []} for name in trees}
    order = list(trees.items())
    for round_ in range(rounds):
        order.reverse()
        for name, tree in order:
            with tempfile.TemporaryDirectory(prefix="alp-ingest-") as tmp, fresh_store(kind, Path(tmp)) as store:
                with serve_ours(store, Path(tmp) / f"{name}-{round_}", tree=tree) as server:
                    for label, batch in (("first", events), ("restated", restated)):

                        def load(s: Ours = server, b: list[dict[str, Any]] = batch) -> None:
                            load_batches(s, b)

                        seconds = elapsed_ms(load) / 1000
                        found[name][label].append(len(batch) / seconds)
    return found


@contextmanager
def fresh_store(kind: str, folder: Path) -> Iterator[str]:
    if kind == "sqlite":
        yield f"sqlite:///{folder / 'lineage.db'}"
    else:
        with postgres_schema() as url:
            yield url


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stores", nargs="+", default=["sqlite", "postgres"], choices=["sqlite", "postgres"])
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=41, help="warm walks per server")
    parser.add_argument("--starts", type=int, default=7, help="fresh servers per case and cold scenario")
    parser.add_argument("--tree", type=Path, help="serve this checkout of the package instead of this one")
    parser.add_argument("--ingest", type=Path, nargs=2, metavar=("BEFORE", "AFTER"), help="measure ingest instead")
    parser.add_argument("--rounds", type=int, default=5, help="ingest rounds per checkout")
    args = parser.parse_args()
    events = workload(args.jobs)
    if args.ingest:
        trees = {"before": args.ingest[0], "after": args.ingest[1]}
        print("| store | ingest | before | after | after / before |")
        print("|---|---|---:|---:|---:|")
        for kind in args.stores:
            found = ingest(kind, trees, events, args.rounds)
            print(kind, {name: {k: [round(v) for v in vs] for k, vs in runs.items()} for name, runs in found.items()})
            for label in ("first", "restated"):
                before, after = (statistics.median(found[name][label]) for name in trees)
                what = "batches of 500, fresh store" if label == "first" else "the same events restated"
                print(
                    f"| {kind} | {what}, median of {args.rounds} | {before:,.0f} events/s | {after:,.0f} events/s "
                    f"| {after / before:.2f}x |",
                    flush=True,
                )
        return 0
    rows = []
    for kind in args.stores:
        with tempfile.TemporaryDirectory(prefix="alp-cards-") as tmp, fresh_store(kind, Path(tmp)) as store:
            folder = Path(tmp)
            with serve_ours(store, folder / "loader", tree=args.tree) as loader:
                load_batches(loader, events)
            if kind == "postgres":
                from consumer_bench import analyze

                analyze(store)
            measured = warm(store, folder, args.repeat, args.tree)
            first = cold(store, folder, args.starts, args.tree)
        rows.append((kind, measured, first))
        print(kind, measured, first, flush=True)
    print()
    print("| store | depth-10 walk | cards on | cards off | on / off |")
    print("|---|---|---:|---:|---:|")
    for kind, measured, first in rows:
        nodes = measured["nodes"]
        print(
            f"| {kind} | warm, median of {args.repeat} ({nodes} nodes) | {measured['on_ms']:.1f} ms "
            f"| {measured['off_ms']:.1f} ms | {measured['ratio']:.2f}x (median of pairs) |"
        )
        for scenario in ("cold", "after depth-3"):
            ons, offs = first["cards on"][scenario], first["cards off"][scenario]
            on, off = statistics.median(ons), statistics.median(offs)
            paired = statistics.median(a / b for a, b in zip(ons, offs, strict=True))  # started one after the other
            print(
                f"| {kind} | first request, {scenario}, median of {args.starts} starts | {on:.1f} ms | {off:.1f} ms "
                f"| {on / off:.2f}x (medians), {paired:.2f}x (median of pairs) |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
