"""``airflow-lineage serve``: run the lineage consumer standalone with uvicorn.

Example::

    airflow-lineage serve --store sqlite:////var/lib/lineage/lineage.db --port 6580 --api-key s3cret
"""

from __future__ import annotations

import argparse
import os

from airflow_lineage_provider.cli import CommandError

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 6580


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``serve`` command."""
    parser = subparsers.add_parser(
        "serve",
        help="run the lineage consumer (OpenLineage ingest and graph API) over HTTP",
        description="Serve the lineage consumer: POST /api/v1/lineage[/batch], GET /api/v1/lineage?nodeId=..., "
        "OpenAPI at /docs.",
    )
    parser.add_argument(
        "--store",
        required=True,
        metavar="URL",
        help="lineage store SQLAlchemy URL (sqlite:///... or postgresql+psycopg2://...)",
    )
    parser.add_argument("--host", default=DEFAULT_HOST, help=f"address to listen on (default {DEFAULT_HOST})")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port to listen on (default {DEFAULT_PORT})")
    parser.add_argument(
        "--api-key",
        default=os.environ.get("LINEAGE_CONSUMER_API_KEY"),
        metavar="KEY",
        help="require this key on writes (default: $LINEAGE_CONSUMER_API_KEY; none: writes are open)",
    )
    parser.add_argument(
        "--max-body-bytes", type=int, default=16 * 1024 * 1024, help="largest request body (default 16 MiB)"
    )
    parser.add_argument("--strict", action="store_true", help="reject events the OpenLineage JSON schema rejects")
    parser.add_argument("--spec-dir", metavar="DIR", help="folder with OpenLineage.json and facets/ (for --strict)")
    parser.add_argument(
        "--retention-days", type=float, metavar="DAYS", help="prune raw events and runs older than this"
    )
    parser.add_argument(
        "--graph-cache-nodes",
        type=int,
        default=20_000,
        metavar="N",
        help="nodes whose graph data is kept in memory, keyed by node version (default 20000; 0: none)",
    )
    parser.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"])
    parser.set_defaults(handler=serve)


def serve(args: argparse.Namespace) -> int:
    """Build the app, open the store once (so a bad URL fails now, in one line) and run uvicorn."""
    import uvicorn
    from sqlalchemy.exc import ArgumentError, SQLAlchemyError

    from airflow_lineage_provider.consumer import create_app

    if not 0 < args.port < 65536:
        raise CommandError(f"--port must be between 1 and 65535, got {args.port}")
    try:
        app = create_app(
            store_url=args.store,
            api_key=args.api_key,
            max_body_bytes=args.max_body_bytes,
            strict=args.strict,
            spec_dir=args.spec_dir,
            retention_days=args.retention_days,
            graph_cache_nodes=args.graph_cache_nodes,
        )
        app.state.store.engine  # noqa: B018 - connect and migrate before accepting traffic
    except (ValueError, ArgumentError) as error:
        raise CommandError(str(error)) from None
    except SQLAlchemyError as error:
        reason = str(getattr(error, "orig", None) or error).strip().splitlines()[0]
        raise CommandError(f"cannot open the lineage store {args.store!r}: {reason}") from None
    base = f"http://{args.host}:{args.port}"
    print(f"Lineage consumer on {base}: ingest at {base}/api/v1/lineage, page at {base}/ui, API docs at {base}/docs")
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level)
    return 0
