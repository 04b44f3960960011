"""Two checkouts of this package answering the same store, request by request: is a change no slower?

The consumer benchmark (``consumer_bench.py``) runs one checkout after the other, and on a shared machine the
load moves between the runs by more than most changes do. Here a server importing checkout BEFORE and one
importing AFTER (``PYTHONPATH``) serve one store, loaded once with the consumer benchmark's workload through
a third server of this checkout; each measured request goes to both, in alternating order, and the ratio is
taken per pair. Measured: the depth-10 and depth-3 upstream walks from the last layer (graph cards warm), a
search, a page of Marquez jobs; then batch ingest (batches of 500) of the whole workload into a fresh store
per checkout, alternating, ``--rounds`` times.

    git worktree add /tmp/alp-before <commit>
    .venv/bin/python bench/checkout_ab.py --before /tmp/alp-before [--after .] [--stores sqlite postgres]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from consumer_bench import NAMESPACE, Ours, serve_ours  # noqa: E402
from consumer_workload import workload  # noqa: E402
from graph_cards import elapsed_ms, fresh_store, load_batches  # noqa: E402


def _requests(server: Ours) -> dict[str, Callable[[], Any]]:
    return {
        "walk depth 10": lambda: server.walk(10),
        "walk depth 3": lambda: server.walk(3),
        "search": lambda: server.body("/api/v1/search", {"q": "table_1", "limit": 100}),
        "Marquez jobs page": lambda: server.body(f"/api/v1/namespaces/{NAMESPACE}/jobs", {"limit": 100}),
    }


def reads(kind: str, trees: dict[str, Path], events: list[dict[str, Any]], repeat: int) -> dict[str, Any]:
    """Per request kind: each checkout's median and the median of the per-pair ratios (after / before)."""
    # Loaded, and opened first, by the BEFORE checkout: a store schema AFTER added is then migrated by AFTER's
    # server on opening (BEFORE would refuse a store at a version it does not know).
    with tempfile.TemporaryDirectory(prefix="alp-ab-") as tmp, fresh_store(kind, Path(tmp)) as store:
        with serve_ours(store, Path(tmp) / "loader", tree=trees["before"]) as loader:
            load_batches(loader, events)
            loader.settle()  # every event applied before anything is timed
        with serve_ours(store, Path(tmp) / "before", tree=trees["before"]) as before:
            before.walk(10)  # the store opened by BEFORE before AFTER migrates it
            with serve_ours(store, Path(tmp) / "after", tree=trees["after"]) as after:
                found = _pairs(before, after, repeat)
    return {
        name: {
            "before_ms": statistics.median(times["before"]),
            "after_ms": statistics.median(times["after"]),
            "ratio": statistics.median(a / b for a, b in zip(times["after"], times["before"], strict=True)),
        }
        for name, times in found.items()
    }


def _pairs(before: Ours, after: Ours, repeat: int) -> dict[str, dict[str, list[float]]]:
    """Each request kind's times on both servers, ``repeat`` pairs in alternating order after a warm-up."""
    servers = {"before": _requests(before), "after": _requests(after)}
    assert before.count(before.walk(10)) == after.count(after.walk(10)), "both must give the same answer"
    found: dict[str, dict[str, list[float]]] = {name: {"before": [], "after": []} for name in servers["after"]}
    for name in found:
        for server in servers.values():
            for _ in range(3):
                server[name]()  # warm-up: caches filled, statements prepared
        order = ["before", "after"]
        for _ in range(repeat):
            order.reverse()
            for side in order:
                found[name][side].append(elapsed_ms(servers[side][name]))
    return found


def ingest(kind: str, trees: dict[str, Path], events: list[dict[str, Any]], rounds: int) -> dict[str, list[float]]:
    """Events per second of batch ingest into a fresh store, per checkout, alternating."""
    found: dict[str, list[float]] = {name: [] for name in trees}
    order = list(trees.items())
    for round_ in range(rounds):
        order.reverse()
        for name, tree in order:
            with tempfile.TemporaryDirectory(prefix="alp-ab-ingest-") as tmp, fresh_store(kind, Path(tmp)) as store:
                with serve_ours(store, Path(tmp) / f"{name}-{round_}", tree=tree) as server:

                    def load(s: Ours = server) -> None:
                        load_batches(s, events)

                    found[name].append(len(events) / (elapsed_ms(load) / 1000))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", type=Path, required=True, help="a checkout (git worktree) to compare with")
    parser.add_argument("--after", type=Path, default=HERE.parent, help="default: this checkout")
    parser.add_argument("--stores", nargs="+", default=["sqlite", "postgres"], choices=["sqlite", "postgres"])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    events = workload(args.jobs)
    print(f"before: {trees['before']}  after: {trees['after']}  N = {args.jobs:,} jobs, {len(events):,} events")
    print("\n| store | request | before, median | after, median | after / before (median of pairs) |")
    print("|---|---|---:|---:|---:|")
    for kind in args.stores:
        for name, found in reads(kind, trees, events, args.repeat).items():
            row = f"{found['before_ms']:.1f} ms | {found['after_ms']:.1f} ms | {found['ratio']:.2f}x"
            print(f"| {kind} | {name} | {row} |", flush=True)
    print("\n| store | batch ingest, events/s: before | after | after / before (medians) |")
    print("|---|---:|---:|---:|")
    for kind in args.stores:
        rates = ingest(kind, trees, events, args.rounds)
        before, after = statistics.median(rates["before"]), statistics.median(rates["after"])
        print(f"| {kind} | {before:,.0f} | {after:,.0f} | {after / before:.2f}x |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
