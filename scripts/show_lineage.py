"""Print the lineage a demo run produced: one row per event, from an NDJSON file of OpenLineage events.

Usage: ``python scripts/show_lineage.py EVENTS.ndjson [--job-prefix PREFIX]``
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.console import Console
from rich.table import Table


def _datasets(datasets: list[dict]) -> str:
    lines = []
    for d in datasets:
        fields = (d.get("facets", {}).get("schema") or {}).get("fields") or []
        columns = f" [dim]({', '.join(f['name'] for f in fields)})[/dim]" if fields else ""
        lines.append(f"{d['namespace']} :: {d['name']}{columns}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("events", type=Path)
    parser.add_argument("--job-prefix", default="")
    args = parser.parse_args()
    events = [json.loads(line) for line in args.events.read_text().splitlines() if line.strip()]
    table = Table(title=f"{len(events)} OpenLineage events in {args.events}", show_lines=True)
    for column in ("event", "job", "parent run (job)", "inputs", "outputs"):
        table.add_column(column, overflow="fold")
    for event in events:
        if not event["job"]["name"].startswith(args.job_prefix):
            continue
        run = event.get("run")  # a JobEvent (design-time lineage, published before any run) has none
        parent = (run.get("facets") or {}).get("parent") if run else None
        parent_text = f"…{parent['run']['runId'][-8:]} ({parent['job']['name']})" if parent else ""
        lineage = event.get("outputs", [{}])
        column_lineage = any("columnLineage" in d.get("facets", {}) for d in lineage)
        kind = event["eventType"] if run else "DECLARED (JobEvent)"
        table.add_row(
            kind + (" +column lineage" if column_lineage else ""),
            event["job"]["name"],
            parent_text,
            _datasets(event.get("inputs", [])),
            _datasets(event.get("outputs", [])),
        )
    Console(width=200).print(table)


if __name__ == "__main__":
    main()
