"""What the hostile-input limits cost: batch ingest and the depth-10 walk, before and after.

Runs ``airflow-lineage serve`` from two trees at once — the commit before the limits (a temporary
``git worktree`` of ``--baseline``) and this checkout — each on a fresh SQLite or PostgreSQL store, and
sends them the same requests interleaved: every batch goes to one server and then the other (which first
alternates), and so does every walk. A slow phase of the machine (this 2-core VM's timings drift by a
factor of two over minutes) then falls on both trees alike, instead of on whichever ran during it.
Workload: the consumer benchmark's (``consumer_workload.py``): N jobs in 10 layers, START + COMPLETE each,
posted in batches of 500; then the depth-10 upstream walk from a last-layer dataset (15 timed after a
first). Reported: medians over rounds and the median of the per-round ratios after/before.

    .venv/bin/python bench/limits_overhead.py                    # 5 rounds, N = 5,000 jobs, ~6 minutes
    .venv/bin/python bench/limits_overhead.py --rounds 2 --jobs 1000 --stores sqlite
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import requests
from rich.console import Console
from rich.progress import Progress

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO / "tests"))

from consumer_bench import postgres_schema, serve_ours  # noqa: E402
from consumer_workload import NAMESPACE, workload  # noqa: E402

#: The checkout compared with by default: the tree without the event limits.
BASELINE = "b34d01a"
BATCH = 500
ROOT = "layer9.table_0"


@contextmanager
def _served(kind: str, tree: Path, folder: Path) -> Iterator[str]:
    """``serve`` from ``tree`` on a fresh store (an SQLite file, or a private PostgreSQL schema); its URL."""
    if kind == "sqlite":
        store = f"sqlite:///{folder / f'{uuid.uuid4().hex}.db'}"
        with serve_ours(store, folder, tree=tree) as consumer:
            yield consumer.url
        return
    with postgres_schema() as store, serve_ours(store, folder, tree=tree) as consumer:
        yield consumer.url


def _interleaved(urls: dict[str, str], events: list[dict[str, Any]], repeat: int) -> dict[str, dict[str, float]]:
    """Post every batch, then time every walk, on each server in turn; per server its figures."""
    sessions = {name: requests.Session() for name in urls}
    names = list(urls)
    bodies = [json.dumps(events[i : i + BATCH]).encode() for i in range(0, len(events), BATCH)]
    headers = {"Content-Type": "application/json"}
    spent = dict.fromkeys(names, 0.0)
    for number, body in enumerate(bodies):
        for name in names if number % 2 == 0 else names[::-1]:
            started = time.perf_counter()
            answer = sessions[name].post(f"{urls[name]}/api/v1/lineage/batch", data=body, headers=headers, timeout=600)
            spent[name] += time.perf_counter() - started
            if answer.status_code != 200:
                raise RuntimeError(f"{name}: batch refused: {answer.status_code} {answer.text[:300]}")
    params: dict[str, str | int] = {
        "nodeId": f"dataset:{NAMESPACE}:{ROOT}",
        "depth": 10,
        "direction": "upstream",
        "maxNodes": 100000,
    }
    walks: dict[str, list[float]] = {name: [] for name in names}
    nodes = {}
    for number in range(repeat + 1):
        for name in names if number % 2 == 0 else names[::-1]:
            started = time.perf_counter()
            answer = sessions[name].get(f"{urls[name]}/api/v1/lineage", params=params, timeout=600)
            elapsed = time.perf_counter() - started
            answer.raise_for_status()
            if number:  # the first walk of each warms its server
                walks[name].append(elapsed)
            nodes[name] = len(answer.json()["graph"])
    return {
        name: {
            "ingest_events_per_s": len(events) / spent[name],
            "walk_ms": statistics.median(walks[name]) * 1000,
            "walk_nodes": nodes[name],
        }
        for name in names
    }


@contextmanager
def _baseline_tree(revision: str) -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="alp-baseline-")) / "tree"
    subprocess.run(
        ["git", "-C", str(REPO), "worktree", "add", "--detach", str(folder), revision], check=True, capture_output=True
    )
    try:
        yield folder
    finally:
        subprocess.run(
            ["git", "-C", str(REPO), "worktree", "remove", "--force", str(folder)], check=False, capture_output=True
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", default=BASELINE, help=f"commit before the limits (default {BASELINE})")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=15, help="walks timed per round, after a first")
    parser.add_argument("--stores", nargs="+", default=["sqlite", "postgres"], choices=["sqlite", "postgres"])
    parser.add_argument("--out", type=Path, default=HERE / "results" / "limits_overhead.json")
    args = parser.parse_args()
    events = workload(args.jobs)
    console = Console()
    results: dict[str, dict[str, list[dict[str, float]]]] = {}
    with _baseline_tree(args.baseline) as before, tempfile.TemporaryDirectory() as scratch:
        trees = {"before": before, "after": REPO}
        total = args.rounds * len(args.stores) * 2
        with Progress(console=console) as progress:
            task = progress.add_task("rounds", total=total)
            for round_number in range(args.rounds):
                order = ["before", "after"] if round_number % 2 == 0 else ["after", "before"]
                for kind in args.stores:
                    with (
                        _served(kind, trees[order[0]], Path(scratch)) as first,
                        _served(kind, trees[order[1]], Path(scratch)) as second,
                    ):
                        found = _interleaved({order[0]: first, order[1]: second}, events, args.repeat)
                    for name in order:
                        results.setdefault(kind, {}).setdefault(name, []).append(found[name])
                    progress.advance(task, 2)
    summary: dict[str, Any] = {"baseline": args.baseline, "jobs": args.jobs, "rounds": args.rounds, "stores": {}}
    for kind, by_tree in results.items():
        row: dict[str, Any] = {}
        for metric in ("ingest_events_per_s", "walk_ms"):
            before_value = statistics.median(r[metric] for r in by_tree["before"])
            after_value = statistics.median(r[metric] for r in by_tree["after"])
            # Within a round both trees answered the same requests interleaved: the median of the
            # rounds' ratios is the least exposed to the machine's drift.
            paired = [a[metric] / b[metric] for b, a in zip(by_tree["before"], by_tree["after"], strict=True)]
            row[metric] = {
                "before": before_value,
                "after": after_value,
                "after_over_before": after_value / before_value,
                "paired_median": statistics.median(paired),
                "paired": paired,
            }
        row["walk_nodes"] = {name: by_tree[name][0]["walk_nodes"] for name in by_tree}
        summary["stores"][kind] = row
        ingest, walk = row["ingest_events_per_s"], row["walk_ms"]
        console.print(
            f"{kind}: batch ingest {ingest['before']:,.0f} -> {ingest['after']:,.0f} events/s "
            f"({ingest['after_over_before']:.3f}x, paired {ingest['paired_median']:.3f}x); depth-10 walk "
            f"{walk['before']:.1f} -> {walk['after']:.1f} ms ({walk['after_over_before']:.3f}x, paired "
            f"{walk['paired_median']:.3f}x), nodes {row['walk_nodes']}"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"summary": summary, "rounds": results}, indent=2))
    console.print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
