"""Large answers with and without pausing Python's cyclic garbage collector.

Pausing the collector for the whole process while a graph answer or a page of Marquez job objects is built
(``consumer/gc_pause.py`` in older checkouts) would pause it for Airflow's API server too. This benchmark
serves one store from two servers side by side — ``--baseline-tree`` (a checkout that still pauses) and this
checkout (no pause; the answer's msgspec structs are not tracked by the collector) — and asks each, in
turn, for the depth-10 upstream walk of the consumer benchmark's graph (2,955 nodes) and for a page of 100
Marquez jobs, after warm-up requests (the graph is loaded through a third server, so neither measured one
ingested). Medians over ``--repeat`` requests each and the median of the per-pair ratios (this / baseline); the
machine is noisy, so the two are always interleaved, each going first in every other pair.

    git worktree add /tmp/alp-gcbase <commit with gc_pause>
    .venv/bin/python bench/response_gc.py --baseline-tree /tmp/alp-gcbase
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from consumer_bench import BATCH, Ours, serve_ours  # noqa: E402
from consumer_workload import NAMESPACE, workload  # noqa: E402


def _load(consumer: Ours, events: list[dict[str, Any]]) -> None:
    for start in range(0, len(events), BATCH):
        consumer.post("/api/v1/lineage/batch", events[start : start + BATCH]).raise_for_status()


def _interleaved(calls: dict[str, Callable[[], bytes]], repeat: int) -> dict[str, Any]:
    for call in calls.values():
        for _ in range(3):
            call()
    times: dict[str, list[float]] = {name: [] for name in calls}
    order = list(calls.items())
    for _ in range(repeat):
        order.reverse()  # each goes first half of the time
        for name, call in order:
            started = time.perf_counter()
            call()
            times[name].append((time.perf_counter() - started) * 1000)
    baseline, this = times["baseline"], times["this"]
    return {
        "baseline_ms": statistics.median(baseline),
        "this_ms": statistics.median(this),
        "ratio": statistics.median(t / b for t, b in zip(this, baseline, strict=True)),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline-tree", type=Path, required=True)
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=41)
    args = parser.parse_args()
    events = workload(args.jobs)
    with tempfile.TemporaryDirectory(prefix="alp-gc-") as tmp:
        store = f"sqlite:///{Path(tmp) / 'lineage.db'}"
        with serve_ours(store, Path(tmp) / "loader") as loader:  # neither measured server ingests
            _load(loader, events)
        with (
            serve_ours(store, Path(tmp) / "this") as this,
            serve_ours(store, Path(tmp) / "baseline", tree=args.baseline_tree) as baseline,
        ):
            jobs = (f"/api/v1/namespaces/{NAMESPACE}/jobs", {"limit": 100})
            walk = _interleaved({"baseline": lambda: baseline.walk(10), "this": lambda: this.walk(10)}, args.repeat)
            page = _interleaved(
                {"baseline": lambda: baseline.body(*jobs), "this": lambda: this.body(*jobs)}, args.repeat
            )
    print("| answer | baseline (pauses the collector) | this (no pause) | this / baseline, median of pairs |")
    print("|---|---:|---:|---:|")
    for name, result in (("depth-10 upstream walk", walk), ("Marquez jobs, page of 100", page)):
        print(f"| {name} | {result['baseline_ms']:.1f} ms | {result['this_ms']:.1f} ms | {result['ratio']:.2f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
