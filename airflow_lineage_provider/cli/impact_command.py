"""``airflow-lineage impact DAG_FILE_OR_ID --consumer URL``: what a DAG's declared outputs feed downstream.

For the review of a DAG change: the declared outputs of each task (as design-time publication computes them,
:mod:`airflow_lineage_provider.design.impact`) and, per output, the downstream jobs and datasets the
consumer's lineage graph knows, ``--depth`` jobs away. A tree on stdout with a summary line, or ``--json``.
Exit codes: 0 done, 2 a usage error (unknown DAG or file, unreachable consumer, refused key).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from airflow_lineage_provider.cli import CommandError


def _depth(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number") from None
    if not 1 <= number <= 100:
        raise argparse.ArgumentTypeError(f"{value!r} must be between 1 and 100")
    return number


def _is_file(target: str) -> bool:
    return target.endswith(".py") or "/" in target or Path(target).is_file()


def _print_tree(report: Any) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.tree import Tree

    console = Console()
    if not console.is_terminal:
        console = Console(width=max(console.width, 200))
    root = Tree(f"downstream of the declared outputs, from {escape(report.consumer)} (depth {report.depth})")
    for item in report.outputs:
        out = item.output
        label = f"{escape(out.dag_id)}.{escape(out.task_id or '')} → {escape(out.namespace)} {escape(out.name)}"
        if item.status == "new":
            root.add(f"{label}  [yellow]new: nothing downstream yet[/]")
            continue
        if item.status == "pattern":
            label += f"  [cyan]pattern {escape(item.match_regex or '')}: {len(item.matched)} rendering(s) known[/]"
        branch = root.add(f"{label}  ({len(item.jobs)} job(s), {len(item.datasets)} dataset(s))")
        if item.status == "pattern" and not item.matched:
            branch.add("[yellow]no rendering of the pattern is known yet: nothing downstream yet[/]")
        for node in item.jobs + sorted(item.datasets, key=lambda n: (n.hops, n.namespace, n.name)):
            kind = "job" if node.type == "JOB" else "dataset"
            declared = " [dim](declared only)[/]" if node.declared_only else ""
            branch.add(f"{kind} {escape(node.namespace)} {escape(node.name)}  [dim]hop {node.hops}[/]{declared}")
    if not report.outputs:
        root.add("no task of the DAG declares an output")
    console.print(root)


def run_impact(args: argparse.Namespace) -> int:
    from airflow_lineage_provider.design.airflow_lookups import as_airflow_cli

    # Connections — the consumer's, the metadata database's, the connectors' — as `airflow connections get`
    # finds them, the metadata database's included (as publish-dags does).
    with as_airflow_cli():
        return _run_impact(args)


def _run_impact(args: argparse.Namespace) -> int:
    from sqlalchemy.exc import SQLAlchemyError

    from airflow_lineage_provider.design.impact import (
        GraphClient,
        ImpactError,
        api_key_from,
        consumer_of_connection,
        dags_of_file,
        dags_of_id,
        impact,
        outputs_of_dags,
    )
    from airflow_lineage_provider.design.serialized_dags import MetadataDatabaseError
    from airflow_lineage_provider.outbox.database import redacted

    try:
        url = args.consumer
        if not url and args.conn_id:
            url = consumer_of_connection(args.conn_id)[0]
        if not url:
            raise CommandError("give the consumer with --consumer URL (or --conn-id CONN)")
        client = GraphClient(url, api_key_from(args.key_file, args.conn_id), timeout=args.timeout)
        target = args.target
        dags = dags_of_file(Path(target)) if _is_file(target) else dags_of_id(target, args.metadata_db)
        outputs = outputs_of_dags(dags, args.task)
        known_tasks = {task.task_id for dag, _ in dags for task in dag.tasks}
        missing = [task_id for task_id in args.task or () if task_id not in known_tasks]
        if missing:
            raise CommandError(f"no task {', '.join(map(repr, missing))} in {args.target!r}")
        try:
            report = impact(outputs, client, args.depth, [dag.dag_id for dag, _ in dags])
        finally:
            client.close()
    except (ImpactError, MetadataDatabaseError) as error:
        raise CommandError(str(error)) from None
    except SQLAlchemyError as error:
        reason = str(getattr(error, "orig", None) or error).strip().splitlines()[0]
        where = redacted(args.metadata_db or "the configured metadata database")
        raise CommandError(f"metadata database error ({where}): {reason}") from None
    if args.json:
        print(json.dumps(report.as_json(), indent=2))
        return 0
    _print_tree(report)
    print(report.summary())
    return 0


def register(subparsers: Any) -> None:
    """Add ``impact`` to the ``airflow-lineage`` parser."""
    help_text = "Show what a DAG's declared outputs feed downstream, from a lineage consumer's graph."
    parser = subparsers.add_parser("impact", help=help_text, description=help_text)
    parser.add_argument("target", metavar="DAG_FILE_OR_ID", help="a DAG file (.py, not yet deployed) or a DAG id")
    parser.add_argument("--consumer", metavar="URL", help="base URL of the consumer, e.g. http://lineage:6580")
    parser.add_argument("--depth", type=_depth, default=3, help="how many jobs downstream to go (default 3)")
    parser.add_argument("--task", action="append", metavar="TASK_ID", help="only this task (repeat for several)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--key-file", type=Path, metavar="FILE", help="file holding the consumer's API key (read scope)"
    )
    parser.add_argument(
        "--conn-id",
        metavar="CONN",
        help="an openlineage Airflow connection: its password is the API key (and its host the consumer when "
        "--consumer is not given). Without --key-file, $AIRFLOW_LINEAGE_API_KEY comes first",
    )
    parser.add_argument(
        "--metadata-db",
        metavar="URL",
        help="SQLAlchemy URL of Airflow's metadata database, for a DAG id (default: [database] sql_alchemy_conn)",
    )
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds to wait per request (default 30)")
    parser.set_defaults(handler=run_impact)
