"""What one hostile request costs everyone else: a gzip body of very many members, and slow uploads.

Two ``airflow-lineage serve`` processes on SQLite stores, one importing checkout BEFORE and one this checkout,
are sent the same requests:

* **gzip members**: one event followed by N empty gzip members (N = 100k, 200k, 400k: 2, 4 and 8 MB). Measured:
  how long the request takes to be answered, and the longest a small read (``GET /api/v1/namespaces``, one every
  20 ms from another thread) waited meanwhile: what every other client of the server felt.
* **slow uploads** (``--slow-uploads``): 20 connections each send 15 MB of a 16 MB body, then one byte every
  9 s. Measured: the server's resident memory while they trickle, and how long the server holds them.

    git worktree add /tmp/alp-before <commit>
    .venv/bin/python bench/hostile_requests.py --before /tmp/alp-before [--slow-uploads]
"""

from __future__ import annotations

import argparse
import gzip
import json
import select
import socket
import sys
import tempfile
import threading
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

import requests
from rich.console import Console
from rich.table import Table

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from consumer_bench import serve_ours  # noqa: E402

MEMBERS = (100_000, 200_000, 400_000)


def _event() -> bytes:
    event = {
        "eventType": "START",
        "eventTime": datetime.now(timezone.utc).isoformat(),
        "run": {"runId": str(uuid.uuid4())},
        "job": {"namespace": "bench", "name": "gzip_members"},
        "producer": "https://example.com/bench",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
    }
    return json.dumps(event).encode()


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class Probe:
    """Small reads every 20 ms from a thread of its own; the longest wait seen."""

    def __init__(self, url: str) -> None:
        self.url, self.longest, self._stop = url, 0.0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        session = requests.Session()
        while not self._stop.is_set():
            started = time.perf_counter()
            session.get(f"{self.url}/api/v1/namespaces", timeout=600)
            self.longest = max(self.longest, time.perf_counter() - started)
            time.sleep(0.02)

    def __enter__(self) -> Probe:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(600)


def gzip_members(url: str, members: int) -> tuple[int, float, float]:
    """(status, seconds to answer, longest probe wait in seconds) for one event and ``members`` empty members."""
    body = gzip.compress(_event()) + gzip.compress(b"") * members
    with Probe(url) as probe:
        time.sleep(0.1)
        started = time.perf_counter()
        answer = requests.post(f"{url}/api/v1/lineage", data=body, headers={"Content-Encoding": "gzip"}, timeout=600)
        took = time.perf_counter() - started
        time.sleep(0.1)
    return answer.status_code, took, probe.longest


def slow_uploads(
    url: str, pid: int, console: Console, connections: int = 20, hold: float = 90.0
) -> tuple[float, float]:
    """(peak server RSS in MB while ``connections`` trickle, seconds until the server dropped them all or
    ``hold``)."""
    port = int(url.rsplit(":", 1)[1])
    head = (
        "POST /api/v1/lineage HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {16 * 1024 * 1024}\r\n\r\n"
    ).encode()
    sockets = []
    started = time.monotonic()
    for _ in range(connections):
        conn = socket.create_connection(("127.0.0.1", port), timeout=30)
        conn.sendall(head + b" " * (15 * 1024 * 1024))
        sockets.append(conn)
    peak, open_ = _rss_mb(pid), list(sockets)
    ticks = 0
    while open_ and time.monotonic() - started < hold:
        time.sleep(1)
        ticks += 1
        peak = max(peak, _rss_mb(pid))
        answered, _, _ = select.select(open_, [], [], 0)  # an answer (408) or a close: dropped
        open_ = [conn for conn in open_ if conn not in answered]
        for conn in list(open_ if ticks % 9 == 0 else ()):
            try:
                conn.sendall(b" ")
            except OSError:
                open_.remove(conn)
    held = time.monotonic() - started
    console.print(f"  {connections - len(open_)} of {connections} uploads dropped after {held:.0f} s")
    for conn in sockets:
        conn.close()
    return peak, held


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", type=Path, required=True, help="a checkout of the commit to compare with")
    parser.add_argument("--after", type=Path, default=HERE.parent)
    parser.add_argument("--slow-uploads", action="store_true", help="also the 20 trickling uploads (~3 minutes)")
    args = parser.parse_args()
    console = Console()
    table = Table(title="One hostile request: what it costs and what everyone else waits")
    for column in ("measure", "before", "after"):
        table.add_column(column)
    results: dict[str, dict[str, str]] = {}
    with tempfile.TemporaryDirectory(prefix="alp-hostile-") as tmp:
        for label, tree in (("before", args.before), ("after", args.after)):
            folder = Path(tmp) / label
            with serve_ours(f"sqlite:///{folder / 'lineage.db'}", folder, tree=tree.resolve()) as server:
                for members in MEMBERS:
                    console.print(f"{label}: one event + {members:,} empty gzip members")
                    status, took, longest = gzip_members(server.url, members)
                    key = f"{members // 1000}k gzip members: answer; longest other read"
                    results.setdefault(key, {})[label] = f"{status} in {took:.2f} s; {longest * 1000:.0f} ms"
                if args.slow_uploads:
                    console.print(f"{label}: 20 uploads of 15 of 16 MB, then a byte every 9 s")
                    peak, held = slow_uploads(server.url, server.pid, console)
                    key = "20 trickling uploads: peak RSS; held for"
                    results.setdefault(key, {})[label] = f"{peak:.0f} MB; {held:.0f} s"
    for measure, values in results.items():
        table.add_row(measure, values.get("before", "-"), values.get("after", "-"))
    console.print(table)


if __name__ == "__main__":
    main()
