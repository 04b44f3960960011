"""Print the consumer's graph around one node, and the lineage page's URL for it (used by the demo).

Usage: ``python scripts/demo_graph.py CONSUMER_URL NODE_ID [--depth N]``
"""

from __future__ import annotations

import argparse
import json
import urllib.parse
import urllib.request

from rich.console import Console
from rich.table import Table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("consumer")
    parser.add_argument("node_id")
    parser.add_argument("--depth", type=int, default=5)
    args = parser.parse_args()
    query = urllib.parse.urlencode({"nodeId": args.node_id, "depth": args.depth, "direction": "both"})
    with urllib.request.urlopen(f"{args.consumer}/api/v1/lineage?{query}", timeout=30) as response:
        graph = json.load(response)["graph"]
    table = Table(title=f"GET /api/v1/lineage?{query}  ->  {len(graph)} nodes", show_lines=False)
    for column in ("node", "type", "upstream (inEdges)", "downstream (outEdges)"):
        table.add_column(column, overflow="fold")

    def short(node_id: str) -> str:
        return node_id.rsplit(":", 1)[-1] if node_id.startswith("dataset:") else node_id.split(":", 2)[-1]

    for node in sorted(graph, key=lambda n: (n["type"], n["id"])):
        table.add_row(
            short(node["id"]),
            node["type"],
            ", ".join(short(e["origin"]) for e in node["inEdges"]),
            ", ".join(short(e["destination"]) for e in node["outEdges"]),
        )
    Console(width=160).print(table)
    print(f"Lineage page for this graph: {args.consumer}/ui?{urllib.parse.urlencode({'nodeId': args.node_id})}")


if __name__ == "__main__":
    main()
