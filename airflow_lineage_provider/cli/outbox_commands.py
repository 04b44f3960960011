"""``airflow-lineage status | ship | export | replay | prune``: operate the lineage outbox.

Every command takes ``--outbox URL`` (default ``[lineage_provider] outbox_url``). ``ship`` and
``export`` show a progress bar on a terminal. Exit codes: 0 done, 1 the consumer stayed unreachable or
refused the events (they stay pending), 2 a usage error (bad URL, unreachable database, bad argument).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from airflow_lineage_provider.cli import CommandError
from airflow_lineage_provider.cli.progress import progress_bar
from airflow_lineage_provider.defaults import LINEAGE_ENDPOINT


def _positive_int(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"{value!r} must be at least 1")
    return number


def _days(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of days") from None
    if number < 0:
        raise argparse.ArgumentTypeError(f"{value!r} must not be negative")
    return number


def _outbox_url(args: argparse.Namespace) -> str:
    if args.outbox:
        return str(args.outbox)
    from airflow_lineage_provider import conf

    return conf.outbox_url()


def _writer(args: argparse.Namespace) -> Any:
    """An :class:`OutboxWriter` on ``--outbox``, with the database reachable, or a one-line error."""
    from sqlalchemy.engine import make_url

    from airflow_lineage_provider.outbox.database import OutboxUrlError, parse_outbox_url, redacted
    from airflow_lineage_provider.outbox.writer import OutboxWriter

    url = _outbox_url(args)
    try:
        parsed = parse_outbox_url(url)
    except OutboxUrlError as error:
        raise CommandError(str(error)) from None
    if parsed.get_backend_name() == "sqlite" and not Path(make_url(url).database or "").expanduser().exists():
        raise CommandError(f"no outbox at {url} (the file does not exist; the first event emitted creates it)")
    from airflow_lineage_provider import conf

    try:
        spill_dir = conf.outbox_spill_dir() if not args.outbox else None
    except Exception:
        spill_dir = None
    writer = OutboxWriter(url, spill_dir=spill_dir or None, timeout=5.0)
    try:
        writer.engine()
    except Exception as error:
        reason = str(getattr(error, "orig", None) or error).strip().splitlines()[0]
        raise CommandError(f"cannot reach the outbox {redacted(url)}: {reason}") from None
    return writer


def run_status(args: argparse.Namespace) -> int:
    from airflow_lineage_provider.outbox import store

    writer = _writer(args)
    with writer.engine().begin() as conn:
        status = store.status(conn)
    if args.json:
        print(json.dumps(status))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"Lineage outbox: {status['events']} events")
    for column in ("destination", "pending", "delivered", "dead"):
        table.add_column(column, justify="left" if column == "destination" else "right")
    for name, counts in status["destinations"].items():
        table.add_row(name, str(counts["pending"]), str(counts["delivered"]), str(counts["dead"]))
    console = Console()
    console.print(table)
    if not status["destinations"]:
        console.print("No destination yet: `airflow-lineage ship --url ...` or `export --to ...` creates one.")
    try:
        spilled = writer.spill.count_files()
    except OSError as error:  # not a folder, or not readable by this user: the table above still stands
        console.print(
            f"The spill folder {writer.spill.folder} cannot be read ({error.strerror or error}): events spilled "
            "there are not counted. Make it a folder this user can read (the writers need to write it too)."
        )
        return 1
    if spilled:
        console.print(f"{spilled} spill file(s) in {writer.spill.folder} wait to be moved into the outbox.")
    return 0


def run_ship(args: argparse.Namespace) -> int:
    from airflow_lineage_provider.outbox.consumer_client import ConsumerConfig
    from airflow_lineage_provider.outbox.shipper import DeliveryPolicy, Shipper, default_destination_name, pending_count

    try:
        consumer = ConsumerConfig.from_dict(
            {"url": args.url, "endpoint": args.endpoint, "api_key": args.api_key, "timeout": args.timeout,
             "compress": args.compress}
        )  # fmt: skip
    except ValueError as error:
        raise CommandError(str(error)) from None
    writer = _writer(args)
    name = args.name or default_destination_name(consumer.url, consumer.endpoint)
    policy = DeliveryPolicy(batch_size=args.batch_size, lease_seconds=max(300.0, consumer.timeout * 40))
    shipper = Shipper(writer, name, consumer, policy)
    try:
        total = pending_count(writer.engine(), name)
    except Exception:
        total = 0
    with progress_bar(f"shipping to {consumer.url}", total) as (_total, advance):
        try:
            report = shipper.ship(progress=advance)
        except ValueError as error:  # e.g. the name belongs to a file export
            raise CommandError(str(error)) from None
    print(
        f"{name}: {report.delivered} delivered, {report.dead} dead-lettered, {report.retried} to retry, "
        f"{report.pending} pending ({report.requests} requests)"
    )
    if report.refused:
        print(f"airflow-lineage: the consumer refused the events: {report.refused}", file=sys.stderr)
        return 1
    if report.unreachable and report.pending:
        print(f"airflow-lineage: the consumer is unreachable ({report.last_error}); events stay pending",
              file=sys.stderr)  # fmt: skip
        return 1
    return 0


def run_export(args: argparse.Namespace) -> int:
    from airflow_lineage_provider.outbox.export import Exporter, default_export_name
    from airflow_lineage_provider.outbox.shipper import pending_count

    writer = _writer(args)
    name = args.name or default_export_name(args.to)
    try:
        exporter = Exporter(writer, args.to, name=name, compress=args.compress, conn_id=args.conn_id)
    except Exception as error:
        raise CommandError(f"cannot export to {args.to!r}: {error}") from None
    try:
        total = pending_count(writer.engine(), name)
    except Exception:
        total = 0
    with progress_bar(f"exporting to {exporter.root}", total) as (_total, advance):
        try:
            report = exporter.export(progress=advance)
        except ValueError as error:
            raise CommandError(str(error)) from None
    print(f"{name}: {report.exported} events exported in {report.files} file(s), {report.pending} pending")
    return 0


def run_replay(args: argparse.Namespace) -> int:
    from airflow_lineage_provider.outbox import store

    writer = _writer(args)
    with writer.engine().begin() as conn:
        destination = store.destination_id(conn, args.name)
        if destination is None:
            known = ", ".join(store.status(conn)["destinations"]) or "none yet"
            raise CommandError(f"no destination named {args.name!r} (known: {known})")
        count = store.replay_dead(conn, destination)
    print(f"{args.name}: {count} dead-lettered event(s) pending again")
    return 0


def run_prune(args: argparse.Namespace) -> int:
    from airflow_lineage_provider.outbox.retention import prune

    if args.older_than is None:
        from airflow_lineage_provider import conf

        args.older_than = conf.retention_days()
    writer = _writer(args)
    removed = prune(writer.engine(), args.older_than)
    print(f"pruned {removed} event(s) delivered to every destination more than {args.older_than:g} days ago")
    return 0


def register(subparsers: Any) -> None:
    """Add the outbox commands to the ``airflow-lineage`` parser."""

    def command(name: str, handler: Callable[[argparse.Namespace], int], help_text: str) -> argparse.ArgumentParser:
        parser = subparsers.add_parser(name, help=help_text, description=help_text)
        parser.add_argument(
            "--outbox", metavar="URL", help="SQLAlchemy URL of the outbox (default: [lineage_provider] outbox_url)"
        )
        parser.set_defaults(handler=handler)
        return parser

    status = command("status", run_status, "Count the outbox's events and each destination's progress.")
    status.add_argument("--json", action="store_true", help="print the counts as JSON")

    ship = command("ship", run_ship, "Deliver pending events to an OpenLineage HTTP consumer.")
    ship.add_argument("--url", required=True, help="base URL of the consumer, e.g. http://marquez:5000")
    ship.add_argument(
        "--endpoint", default=LINEAGE_ENDPOINT, help=f"lineage endpoint path (default {LINEAGE_ENDPOINT})"
    )
    ship.add_argument("--api-key", help="sent as Authorization: Bearer <key>")
    ship.add_argument("--name", help="destination name (default: the endpoint URL)")
    ship.add_argument("--batch-size", type=_positive_int, default=500, help="events per request (default 500)")
    ship.add_argument("--timeout", type=float, default=10.0, help="seconds to wait per request (default 10)")
    ship.add_argument("--compress", action="store_true", help="gzip request bodies")

    export = command("export", run_export, "Write pending events to NDJSON files partitioned by date and hour.")
    export.add_argument("--to", required=True, metavar="PATH", help="folder or object-storage URL (s3://...)")
    export.add_argument("--name", help="destination name (default: the path as a URL)")
    export.add_argument("--compress", action="store_true", help="gzip the files (.ndjson.gz)")
    export.add_argument("--conn-id", help="Airflow connection for the object store")

    replay = command("replay", run_replay, "Make a destination's dead-lettered events pending again.")
    replay.add_argument("--name", required=True, help="destination name, as `status` shows it")

    prune = command("prune", run_prune, "Delete old events every destination has.")
    prune.add_argument(
        "--older-than", type=_days, metavar="DAYS", help="age in days (default: [lineage_provider] retention_days)"
    )
