"""Where a PostgreSQL lineage store's bytes go: the year-scale events loaded through a real ``airflow-lineage serve``,
then the size of every table (heap, TOAST, indexes) and every index, and bytes per stored event.

The events are ``year_scale.py``'s (seeded Airflow-shaped events of ~3.5 KB, in time order), posted in batches of
500 through the batch API into a schema of their own on ``LINEAGE_TEST_PG_URL``'s server, and the load waits until
everything is applied. Sizes are taken twice: right after the ingest log drained (what a store holds after a bulk
load, before autovacuum) and after ``VACUUM ANALYZE``. With ``--before TREE`` the same events are loaded, in
alternating order for ``--rounds`` rounds, by a server importing another checkout (``git worktree add``) and by this
one, each into a fresh schema: sizes and batch-ingest rates side by side in one run. Not run by CI.

    .venv/bin/python bench/storage_size.py --events 100000
    git worktree add /tmp/alp-before HEAD~3
    .venv/bin/python bench/storage_size.py --events 100000 --before /tmp/alp-before --rounds 2
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from consumer_bench import postgres_schema, serve_ours  # noqa: E402
from year_scale import Stream, load  # noqa: E402

#: Per table of the store's schema: whole size, heap, TOAST (with its index) and indexes, in bytes.
_TABLES = """
SELECT c.relname, pg_total_relation_size(c.oid), pg_relation_size(c.oid),
       COALESCE(pg_total_relation_size(NULLIF(c.reltoastrelid, 0)), 0), pg_indexes_size(c.oid), c.reltuples
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind = 'r' AND n.nspname = current_schema()
ORDER BY 2 DESC
"""
#: Per index of the store's schema: its table and size in bytes.
_INDEXES = """
SELECT i.relname, t.relname, pg_relation_size(i.oid)
FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid
JOIN pg_namespace n ON n.oid = t.relnamespace
WHERE n.nspname = current_schema()
ORDER BY 3 DESC
"""
#: The raw events' payloads: their JSON text, what the store holds of it (compressed or not) and how compressed.
_PAYLOADS = """
SELECT count(*), COALESCE(sum(octet_length(payload)), 0), COALESCE(sum(pg_column_size(payload)), 0),
       count(*) FILTER (WHERE pg_column_compression(payload) IS NOT NULL)
FROM lineage_events
"""
#: The same on a store that packs its events (schema 18): the text's size kept with it, what holds it (the text
#: or the packed bytes), how many were packed, and the bytes of the namespaces each row lists.
_PACKED_PAYLOADS = """
SELECT count(*), COALESCE(sum(COALESCE(size, octet_length(payload))), 0),
       COALESCE(sum(pg_column_size(payload) + COALESCE(pg_column_size(packed), 0)), 0),
       count(*) FILTER (WHERE pg_column_compression(payload) IS NOT NULL), count(packed),
       COALESCE(sum(pg_column_size(namespaces)), 0)
FROM lineage_events
"""
_HAS_PACKED = """
SELECT count(*) FROM information_schema.columns
WHERE table_schema = current_schema() AND table_name = 'lineage_events' AND column_name = 'packed'
"""
_COMPRESSION = "SELECT COALESCE(string_agg(DISTINCT pg_column_compression(payload), ','), '') FROM lineage_events"


def vacuum_analyze(store: str) -> None:
    """``VACUUM ANALYZE`` each table of the store's schema (not the whole database, which others may be using)."""
    import sqlalchemy as sa

    engine = sa.create_engine(store, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            names = conn.exec_driver_sql("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
            for (name,) in names.all():
                conn.exec_driver_sql(f'VACUUM ANALYZE "{name}"')
    finally:
        engine.dispose()


def lz4_payload_bytes(store: str) -> int | None:
    """Bytes the store's payloads would take compressed with ``lz4`` instead of the server's default: each copied
    (as a new value, so it is compressed again) into a temporary column with ``COMPRESSION lz4``; None where the
    server was built without lz4."""
    import sqlalchemy as sa

    engine = sa.create_engine(store)
    try:
        with engine.begin() as conn:
            try:
                conn.exec_driver_sql("CREATE TEMPORARY TABLE lz4_payloads (payload text COMPRESSION lz4)")
            except sa.exc.DBAPIError:
                return None
            conn.exec_driver_sql("INSERT INTO lz4_payloads SELECT payload || '' FROM lineage_events")
            return int(conn.exec_driver_sql("SELECT sum(pg_column_size(payload)) FROM lz4_payloads").scalar() or 0)
    finally:
        engine.dispose()


def sizes(store: str) -> dict[str, Any]:
    """Tables, indexes and payloads of the store at ``store`` (its schema is the connection's current one)."""
    import sqlalchemy as sa

    engine = sa.create_engine(store)
    try:
        with engine.connect() as conn:
            tables = {
                name: {"total": total, "heap": heap, "toast": toast, "indexes": indexes, "rows": int(rows)}
                for name, total, heap, toast, indexes, rows in conn.exec_driver_sql(_TABLES)
            }
            indexes = {name: {"table": table, "bytes": size} for name, table, size in conn.exec_driver_sql(_INDEXES)}
            if conn.exec_driver_sql(_HAS_PACKED).scalar():
                events, text, held, compressed, packed, listed = conn.exec_driver_sql(_PACKED_PAYLOADS).one()
            else:
                (events, text, held, compressed), packed, listed = conn.exec_driver_sql(_PAYLOADS).one(), 0, 0
            methods = conn.exec_driver_sql(_COMPRESSION).scalar()
    finally:
        engine.dispose()
    total = sum(table["total"] for table in tables.values())
    return {
        "schema_bytes": total,
        "stored_events": events,
        "bytes_per_event": total / events if events else None,
        "payload_json_bytes": int(text),
        "payload_stored_bytes": int(held),
        "payloads_compressed": compressed,
        "payload_compression": methods,
        "payloads_packed": int(packed),
        "namespaces_listed_bytes": int(listed),
        "tables": tables,
        "indexes": indexes,
    }


class _Quiet:
    """A stand-in for ``rich``'s progress (``load`` reports to one)."""

    def add_task(self, *_: Any, **__: Any) -> int:
        return 0

    def update(self, *_: Any, **__: Any) -> None:
        pass


def measure(events: int, seed: int, tree: Path | None, keep: bool = False, vacuum_every: int = 0) -> dict[str, Any]:
    """Load ``events`` events into a fresh schema through a server of ``tree`` (None: this checkout); with
    ``vacuum_every``, ``VACUUM ANALYZE`` the store's tables after each such many events (as autovacuum would,
    which is off on the test server), its time not counted in the ingest rates."""
    with postgres_schema("alp_storage", keep) as store, tempfile.TemporaryDirectory(prefix="alp-storage-") as folder:
        stream = Stream(events, seed)
        steps = list(range(vacuum_every, events, vacuum_every)) if vacuum_every else []
        loads = []
        try:
            with serve_ours(store, Path(folder), tree=tree) as consumer:
                for until in [*steps, events]:
                    loads.append(load(consumer, stream, until, _Quiet()))
                    if until != events:
                        vacuum_analyze(store)
                drained = sizes(store)
        finally:
            stream.close()
        started = time.perf_counter()
        vacuum_analyze(store)
        vacuumed = time.perf_counter() - started
        seconds = {
            kind: sum(one["events"] / one[f"{kind}_events_per_s"] for one in loads) for kind in ("answered", "applied")
        }
        batch = {
            "events": stream.taken,
            "answered_events_per_s": stream.taken / seconds["answered"],
            "applied_events_per_s": stream.taken / seconds["applied"],
            "batches_refused_503": sum(one["batches_refused_503"] for one in loads),
        }
        return {
            "batch": batch,
            "vacuum_every": vacuum_every,
            "generated_bytes_per_event": stream.bytes / max(stream.taken, 1),
            "after_drain": drained,
            "vacuum_analyze_seconds": vacuumed,
            "after_vacuum": sizes(store),
            "payload_lz4_bytes": None if drained["payloads_packed"] else lz4_payload_bytes(store),
        }


def _facets(event: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """Every facet of ``event`` (run, job, and each dataset's), as (name, value)."""
    yield from (event["run"].get("facets") or {}).items()
    yield from (event["job"].get("facets") or {}).items()
    for ref in [*(event.get("inputs") or ()), *(event.get("outputs") or ())]:
        for member in ("facets", "inputFacets", "outputFacets"):
            yield from (ref.get(member) or {}).items()


def payload_estimates(events: int, seed: int, sample: int) -> dict[str, float]:
    """Bytes per event of the stored payloads (the store's canonical JSON) of the first ``sample`` events of the
    deployment sized for ``events``, compressed three ways outside the store: each alone (zlib, about what
    PostgreSQL's pglz gets), against a shared dictionary (the last 32 KB of the first 200 events' text: what repeats
    from event to event), and their facets' distinct values counted once (facets stored once, keyed by a hash)."""
    import hashlib
    import itertools
    import zlib

    from year_scale import Deployment

    from airflow_lineage_provider.consumer.validation import canonical_json

    taken = [event for _, event in itertools.islice(Deployment(events, seed).stream(), sample)]
    texts = [canonical_json(event).encode() for event in taken]
    dictionary = b"".join(texts[:200])[-32768:]

    def against_dictionary(text: bytes) -> int:
        packer = zlib.compressobj(6, zdict=dictionary)
        return len(packer.compress(text) + packer.flush())

    seen: set[bytes] = set()
    facets = distinct = 0
    for event in taken:
        for name, value in _facets(event):
            text = json.dumps({name: value}, sort_keys=True, separators=(",", ":")).encode()
            facets += len(text)
            if (digest := hashlib.sha1(text).digest()) not in seen:
                seen.add(digest)
                distinct += len(text)
    return {
        "events": len(texts),
        "json": statistics.mean(map(len, texts)),
        "zlib_each": statistics.mean(len(zlib.compress(text, 6)) for text in texts),
        "zlib_shared_dictionary": statistics.mean(map(against_dictionary, texts[200:])),
        "facets": facets / len(texts),
        "facets_distinct": distinct / len(texts),
    }


def _mb(size: float) -> str:
    return f"{size / 2**20:,.1f}"


def report(name: str, found: dict[str, Any]) -> None:
    """The tables (after ``VACUUM ANALYZE``, and the ingest log's right after draining) as Markdown."""
    sized, drained = found["after_vacuum"], found["after_drain"]
    events = max(sized["stored_events"], 1)
    lz4 = "lz4 not tried: packed"
    if found["payload_lz4_bytes"] is not None:
        lz4 = f"lz4 would store {found['payload_lz4_bytes'] / max(sized['payload_json_bytes'], 1):.2f}x"
    print(f"\n### {name}: {sized['stored_events']:,} events, {_mb(sized['schema_bytes'])} MB, "
          f"{sized['bytes_per_event']:,.0f} bytes per event (after draining: {drained['bytes_per_event']:,.0f}); "
          f"generated JSON {found['generated_bytes_per_event']:,.0f} bytes per event; payloads stored "
          f"{sized['payload_stored_bytes'] / max(sized['payload_json_bytes'], 1):.2f}x their JSON "
          f"({sized['payload_compression'] or 'uncompressed'}; {sized.get('payloads_packed', 0):,} packed with a "
          f"dictionary, their namespaces listed in {sized.get('namespaces_listed_bytes', 0) / events:,.0f} bytes "
          f"per event; {lz4}); batch ingest "
          f"{found['batch']['applied_events_per_s']:,.0f} ev/s applied")  # fmt: skip
    print("\n| table | total MB | heap | TOAST | indexes | bytes per event | rows |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for table, size in sized["tables"].items():
        parts = " | ".join(_mb(size[part]) for part in ("total", "heap", "toast", "indexes"))
        print(f"| {table} | {parts} | {size['total'] / events:,.0f} | {size['rows']:,} |")
    print("\n| index | table | MB |")
    print("|---|---|---:|")
    for index, size in sized["indexes"].items():
        print(f"| {index} | {size['table']} | {_mb(size['bytes'])} |")
    log = "lineage_pending_events"
    if log in drained["tables"]:
        print(f"\ningest log after draining: {_mb(drained['tables'][log]['total'])} MB, "
              f"after VACUUM: {_mb(sized['tables'][log]['total'])} MB")  # fmt: skip


def main() -> int:
    import os

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=41)
    parser.add_argument("--before", type=Path, help="a checkout to load the same events with, alternating")
    parser.add_argument("--rounds", type=int, default=1, help="loads per checkout (with --before)")
    parser.add_argument("--vacuum-every", type=int, default=0, help="VACUUM ANALYZE after each N events loaded")
    parser.add_argument("--keep", action="store_true", help="keep the schemas (their names are printed)")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "storage_size.json")
    parser.add_argument("--estimate-payloads", type=int, metavar="SAMPLE", help="only estimate payloads, no load")
    args = parser.parse_args()
    if args.estimate_payloads:
        estimates = payload_estimates(args.events, args.seed, args.estimate_payloads)
        print(" | ".join(f"{name} {value:,.0f}" for name, value in estimates.items()), "(bytes per event)")
        return 0
    trees: dict[str, Path | None] = {"this checkout": None}
    if args.before:
        trees = {"before": args.before.resolve(), "after": None}
    print(f"load average before: {os.getloadavg()}")
    found: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
    order = list(trees.items())
    for _ in range(args.rounds if args.before else 1):
        for name, tree in order:
            found[name].append(measure(args.events, args.seed, tree, args.keep, args.vacuum_every))
            report(name, found[name][-1])
            print(f"load average: {os.getloadavg()}", flush=True)
        order.reverse()
    if args.before:
        rates = {name: [r["batch"]["applied_events_per_s"] for r in runs] for name, runs in found.items()}
        sizes_ = {name: [r["after_vacuum"]["bytes_per_event"] for r in runs] for name, runs in found.items()}
        print("\n| checkout | batch ingest applied ev/s (each load) | bytes per event |")
        print("|---|---|---:|")
        for name in found:
            each = ", ".join(f"{rate:,.0f}" for rate in rates[name])
            print(f"| {name} | {each} | {statistics.median(sizes_[name]):,.0f} |")
        ratio = statistics.median(rates["after"]) / statistics.median(rates["before"])
        print(f"\nafter / before, median applied ingest rate: {ratio:.3f}x")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({name: runs for name, runs in found.items()}, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
