"""``airflow-lineage pack-events``: pack the raw events a lineage store holds as text.

A store packs each event it stores once it has a payload dictionary (drawn from its first events); the events
stored before (or under an older release) stay as text until this command packs them. ``--redraw`` draws a new
dictionary from the latest events first and packs every event with it: for a deployment whose events have
changed much since the store drew its own. The consumer may keep serving meanwhile: each batch of events is
packed in a transaction of its own.
"""

from __future__ import annotations

import argparse
from typing import Any

from airflow_lineage_provider.cli.progress import progress_bar
from airflow_lineage_provider.consumer.store import LineageStore


def register(subparsers: Any) -> None:
    """Add the ``pack-events`` command."""
    parser = subparsers.add_parser(
        "pack-events",
        help="pack a lineage store's raw events stored as text with its payload dictionary",
        description="Pack the raw events a lineage store holds as text (stored before it had a payload "
        "dictionary) with its dictionary, a batch per transaction; the consumer may keep serving.",
    )
    parser.add_argument("--store", required=True, metavar="URL", help="lineage store SQLAlchemy URL")
    parser.add_argument(
        "--redraw",
        action="store_true",
        help="draw a new dictionary from the store's latest events first, and pack every event with it",
    )
    parser.set_defaults(handler=run_pack_events)


def run_pack_events(args: argparse.Namespace) -> int:
    store = LineageStore(args.store, ingest_apply="inline")
    try:
        with progress_bar("packing events") as (set_total, advance):
            done = [0]

            def progress(packed: int, total: int) -> None:
                set_total(total)
                advance(packed - done[0])
                done[0] = packed

            result = store.pack_events(redraw=args.redraw, progress=progress)
    finally:
        store.dispose()
    if result.dictionary_id is None:
        print("the store holds no event: nothing to pack")
        return 0
    ratio = f" ({result.packed_bytes / result.text_bytes:.0%} of their text)" if result.text_bytes else ""
    print(
        f"packed {result.events} events with payload dictionary {result.dictionary_id}: "
        f"{result.text_bytes:,} bytes of text into {result.packed_bytes:,}{ratio}"
    )
    return 0
