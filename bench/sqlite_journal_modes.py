"""What one durable append costs in SQLite's journal modes: the data behind the outbox's ``sqlite_synchronous``.

Each append is what the outbox transport's is, reduced to SQLite: ``BEGIN IMMEDIATE``, one ~1.2 KB row into a
table with a unique key, ``COMMIT``, on a fresh file in ``--folder`` (the disk the outbox would use). Modes:

* ``PERSIST`` + ``NORMAL`` — the outbox's default: a rollback journal synced, then the database synced (two
  fsyncs); survives a crashed machine.
* ``PERSIST`` + ``OFF`` — the opt-in: no fsync; survives a killed process, a crashed machine can damage the file.
* ``WAL`` + ``FULL`` — one fsync of the write-ahead log per commit; survives a crashed machine.
* ``WAL`` + ``NORMAL`` — no fsync per commit; never damaged, a crashed machine loses the last commits.

The outbox does not use WAL: its shared-memory index is a mapped file, whose failure is a SIGBUS in the task
(docs/outbox.md). Median microseconds per append, rounds alternating between the modes.

    .venv/bin/python bench/sqlite_journal_modes.py --appends 400 --rounds 2
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

MODES = (("PERSIST", "NORMAL"), ("PERSIST", "OFF"), ("WAL", "FULL"), ("WAL", "NORMAL"))
PAYLOAD = "x" * 1200


def append_times(folder: Path, journal: str, synchronous: str, appends: int) -> list[float]:
    """Seconds per append of ``appends`` appends to a fresh database in ``folder``."""
    path = folder / f"outbox-{journal}-{synchronous}.db".lower()
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute(f"PRAGMA journal_mode = {journal}")
        db.execute(f"PRAGMA synchronous = {synchronous}")
        db.execute("CREATE TABLE events (id INTEGER PRIMARY KEY, event_key TEXT UNIQUE, payload TEXT)")
        times = []
        for index in range(appends):
            started = time.perf_counter()
            db.execute("BEGIN IMMEDIATE")
            db.execute("INSERT INTO events (event_key, payload) VALUES (?, ?)", (str(index), PAYLOAD))
            db.execute("COMMIT")
            times.append(time.perf_counter() - started)
        return times
    finally:
        db.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--appends", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--folder", type=Path, help="where the databases go (default: a temporary folder)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="alp-journal-", dir=args.folder) as tmp:
        medians: dict[tuple[str, str], list[float]] = {mode: [] for mode in MODES}
        for _ in range(args.rounds):
            for mode in MODES:
                medians[mode].append(statistics.median(append_times(Path(tmp), *mode, args.appends)) * 1e6)
    print("| journal_mode | synchronous | median per append (each round) |")
    print("|---|---|---:|")
    for (journal, synchronous), values in medians.items():
        print(f"| {journal} | {synchronous} | {' / '.join(f'{v:,.0f} µs' for v in values)} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
