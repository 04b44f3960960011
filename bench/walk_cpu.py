"""Where a depth-10 walk's time goes, in CPU time: robust on a machine shared with other work, where wall times
wait for a CPU as long as they run.

Loads the consumer benchmark's workload (``consumer_workload.py``, N = 5,000 jobs by default) into a fresh
store per kind, through a server of this checkout, then:

* **phases**: the graph answer of ``GET /api/v1/lineage`` (the depth-10 upstream walk from ``layer9.table_0``,
  2,955 nodes) built in this process as the route builds it, graph cards warm, each phase timed with
  ``time.process_time`` (this process only: on PostgreSQL the server's own time is the walk statement's
  ``Execution Time``, reported apart from ``EXPLAIN (ANALYZE, TIMING OFF)``); min and median of ``--repeat``;
* **servers** (with ``--before``): a server importing checkout BEFORE and one importing AFTER (``PYTHONPATH``)
  on the same store; the CPU time each server process spends per request (``/proc/<pid>/stat``), for the
  warm walk (requests alternating between the two) and for the first depth-10 walk after three depth-3 walks
  of a fresh server (``--starts`` per checkout, alternating). The clock ticks every 10 ms: the warm figure is
  a mean over ``--repeat`` requests, the first-request one a median.

    .venv/bin/python bench/walk_cpu.py                                   # phases, SQLite and PostgreSQL
    .venv/bin/python bench/walk_cpu.py --before /tmp/alp-before --after .   # and the two checkouts' servers
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from consumer_bench import NAMESPACE, ROOT, serve_ours  # noqa: E402
from consumer_workload import workload  # noqa: E402
from graph_cards import fresh_store, load_batches  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
#: The phase that runs the walk statement alone (the next phase runs it again, with the rest).
ALONE = "walk statement alone (run and fetch)"


def _server_cpu_ms(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK * 1000


def phases(url: str, repeat: int) -> dict[str, list[float]]:
    """CPU ms of each phase of the graph answer, built as the lineage route builds it (cards warm)."""
    import msgspec

    from airflow_lineage_provider.consumer.store import LineageStore
    from airflow_lineage_provider.consumer.store.graph import job_parents, nodes, subgraph, walks

    store = LineageStore(url)
    times: dict[str, list[float]] = {}

    def answer() -> None:
        marks = [time.process_time()]

        def mark(name: str) -> None:
            marks.append(time.process_time())
            times.setdefault(name, []).append((marks[-1] - marks[-2]) * 1000)

        with store.read() as conn:
            root = nodes.find_node(conn, "dataset", f"{NAMESPACE}:{ROOT}")
            assert root is not None
            grouped, declarations = walks.walk_probe(conn)
            bounds = walks.WalkBounds(hops=20, max_nodes=100_000, grouped=grouped)
            picked = walks.nearest_nodes(walks.NODE_EDGES["upstream"], [root[0]], bounds, conn.dialect.name)
            mark("find the root, probe, build the statement")
            subgraph._walk_rows(conn, picked, along=False, declarations=declarations)
            mark(ALONE)
            found, edges = subgraph.subgraph(conn, picked, store.graph_cards, "include", declarations)
            mark("subgraph: the walk statement, cards, nodes")
            jobs = [node for node, drawn in found.items() if drawn.type == "JOB"]
            job_parents.containment(conn, jobs, None)
            mark("job containment")
            for origin, destination, flags in edges:
                source, target = found[origin], found[destination]
                edge = subgraph.Edge(
                    source.id, target.id, bool(flags & subgraph.DECLARED), bool(flags & subgraph.OBSERVED)
                )
                source.outEdges.append(edge)
                target.inEdges.append(edge)
            mark("edges onto nodes")
            msgspec.json.encode({"graph": list(found.values())})
            mark("JSON encode")
            del found, edges
        mark("transaction end")
        total = (marks[-1] - marks[0]) * 1000 - times[ALONE][-1]
        times.setdefault("total (without the statement alone)", []).append(total)

    for _ in range(3):
        answer()
    times.clear()
    for _ in range(repeat):
        gc.disable()
        try:
            answer()
        finally:
            gc.enable()
    return times


def statement_ms(url: str, repeat: int) -> list[float]:
    """PostgreSQL's ``Execution Time`` of the walk statement (versions only, as a warm walk runs it)."""
    from sqlalchemy import text

    from airflow_lineage_provider.consumer.store import LineageStore
    from airflow_lineage_provider.consumer.store.graph import nodes, subgraph, walks

    store = LineageStore(url)
    found: list[float] = []
    with store.read() as conn:
        root = nodes.find_node(conn, "dataset", f"{NAMESPACE}:{ROOT}")
        assert root is not None
        bounds = walks.WalkBounds(hops=20, max_nodes=100_000)
        picked = walks.nearest_nodes(walks.NODE_EDGES["upstream"], [root[0]], bounds, conn.dialect.name)
        captured: list[Any] = []
        execute = conn.execute

        def capture(statement: Any, *args: Any, **kwargs: Any) -> Any:
            captured.append(statement)
            return execute(statement, *args, **kwargs)

        conn.execute = capture  # type: ignore[method-assign]
        subgraph._walk_rows(conn, picked, along=False)
        conn.execute = execute  # type: ignore[method-assign]
        sql = str(captured[-1].compile(dialect=conn.dialect, compile_kwargs={"literal_binds": True}))
        for _ in range(repeat + 3):
            plan = conn.execute(text("EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) " + sql)).scalar_one()
            found.append(plan[0]["Execution Time"])
    return found[3:]


def servers(url: str, trees: dict[str, Path], repeat: int, starts: int, folder: Path) -> dict[str, dict[str, float]]:
    """Server CPU ms per request of each checkout: warm depth-10 walks (mean), first depth-10 walk (median)."""
    warm: dict[str, float] = {name: 0.0 for name in trees}
    with (
        serve_ours(url, folder / "warm-before", tree=trees["before"]) as before,
        serve_ours(url, folder / "warm-after", tree=trees["after"]) as after,
    ):
        running = {"before": before, "after": after}
        for server in running.values():
            for _ in range(3):
                server.walk(10)
        for round_ in range(repeat):
            for name in ("before", "after") if round_ % 2 else ("after", "before"):
                server = running[name]
                started = _server_cpu_ms(server.pid)
                server.walk(10)
                warm[name] += _server_cpu_ms(server.pid) - started
    first: dict[str, list[float]] = {name: [] for name in trees}
    for round_ in range(starts):
        for name in ("before", "after") if round_ % 2 else ("after", "before"):
            with serve_ours(url, folder / f"first-{name}", tree=trees[name]) as server:
                for _ in range(3):
                    server.walk(3)
                started = _server_cpu_ms(server.pid)
                server.walk(10)
                first[name].append(_server_cpu_ms(server.pid) - started)
    return {
        name: {"warm_cpu_ms": warm[name] / repeat, "first_cpu_ms": statistics.median(first[name])} for name in trees
    }


def _row(values: list[float]) -> str:
    return f"{min(values):.1f} | {statistics.median(values):.1f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stores", nargs="+", default=["sqlite", "postgres"], choices=["sqlite", "postgres"])
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--starts", type=int, default=6, help="fresh servers per checkout for the first request")
    parser.add_argument("--before", type=Path, help="a checkout (git worktree) whose servers to compare with")
    parser.add_argument("--after", type=Path, default=HERE.parent)
    args = parser.parse_args()
    events = workload(args.jobs)
    for kind in args.stores:
        with tempfile.TemporaryDirectory(prefix="alp-walk-cpu-") as tmp, fresh_store(kind, Path(tmp)) as url:
            with serve_ours(url, Path(tmp) / "loader") as loader:
                load_batches(loader, events)
                loader.settle()
            print(f"\n{kind}, N = {args.jobs:,} jobs: CPU ms of this process, min | median of {args.repeat}")
            print("| phase | min | median |\n|---|---:|---:|")
            for name, values in phases(url, args.repeat).items():
                print(f"| {name} | {_row(values)} |")
            if kind == "postgres":
                print(f"| server: walk statement's Execution Time | {_row(statement_ms(url, args.repeat))} |")
            if args.before is not None:
                trees = {"before": args.before.resolve(), "after": args.after.resolve()}
                found = servers(url, trees, args.repeat, args.starts, Path(tmp))
                print("| server process CPU ms per request | before | after |\n|---|---:|---:|")
                for key, label in (("warm_cpu_ms", "warm depth-10 walk (mean)"), ("first_cpu_ms", "first depth-10")):
                    print(f"| {label} | {found['before'][key]:.1f} | {found['after'][key]:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
