"""``airflow-lineage serve``: run the lineage consumer standalone with uvicorn.

Example::

    airflow-lineage serve --store sqlite:////var/lib/lineage/lineage.db --keys-file /etc/lineage/keys.json

Credentials (docs/security.md): ``--keys-file`` (JSON, keys with scopes and namespace limits), repeated
``--key NAME:SCOPE:SECRET``, and ``--api-key`` (a write key). With none on a loopback address the consumer
is open to this machine only, and says so; on any other address it refuses to start unless
``--allow-anonymous`` is given.
"""

from __future__ import annotations

import argparse
import gc
import ipaddress
import logging
import os
from typing import Any

from airflow_lineage_provider.cli import CommandError
from airflow_lineage_provider.consumer.limits.hosts import serve_hosts
from airflow_lineage_provider.consumer.security.access import Access, ApiKey, KeyRing, load_keys_file
from airflow_lineage_provider.defaults import GRAPH_CACHE_NODES, INGEST_APPLY, INGEST_APPLY_MODES, MAX_BODY_BYTES
from airflow_lineage_provider.namespace_aliases import NamespaceAliases

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 6580
#: Seconds a client may take to accept a part of an answer (the app's StalledReaders middleware).
STALL_SECONDS = 30.0
#: Seconds an idle kept-alive connection stays open after an answer (uvicorn's ``timeout_keep_alive``).
KEEP_ALIVE_SECONDS = 5.0
#: Connections and requests in progress past which uvicorn answers 503 (``limit_concurrency``).
LIMIT_CONCURRENCY = 512


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
        help="lineage store SQLAlchemy URL (sqlite:///... or postgresql://...: psycopg 3 if installed, else psycopg2)",
    )
    parser.add_argument("--host", default=DEFAULT_HOST, help=f"address to listen on (default {DEFAULT_HOST})")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port to listen on (default {DEFAULT_PORT})")
    parser.add_argument(
        "--keys-file",
        default=os.environ.get("LINEAGE_CONSUMER_KEYS_FILE"),
        metavar="FILE",
        help='JSON file {"keys": [{"name", "scope": "read|write|admin", "secret", "namespaces"?}]} '
        "(default: $LINEAGE_CONSUMER_KEYS_FILE)",
    )
    parser.add_argument(
        "--key",
        action="append",
        default=[],
        metavar="NAME:SCOPE:SECRET",
        help="a key with scope read, write or admin (repeatable; a keys file keeps secrets out of `ps`)",
    )
    parser.add_argument(
        "--api-key",
        default=os.environ.get("LINEAGE_CONSUMER_API_KEY"),
        metavar="KEY",
        help="a key with scope write, named api-key (default: $LINEAGE_CONSUMER_API_KEY)",
    )
    parser.add_argument(
        "--allow-anonymous",
        nargs="?",
        const="admin",
        choices=["read", "write", "admin"],
        metavar="SCOPE",
        help="let requests without a key read (read), also ingest (write) or do everything (admin, the value "
        "when none is given); needed to start with no keys on a non-loopback address",
    )
    parser.add_argument(
        "--max-body-bytes", type=int, default=MAX_BODY_BYTES, help="largest request body (default 16 MiB)"
    )
    parser.add_argument(
        "--max-batch-events", type=int, default=10_000, metavar="N", help="most events per request (default 10000)"
    )
    parser.add_argument(
        "--max-clock-skew-hours",
        type=float,
        default=24.0,
        metavar="HOURS",
        help="refuse events whose eventTime is more than this ahead of the consumer's clock (default 24)",
    )
    parser.add_argument(
        "--max-concurrent-walks",
        type=int,
        default=4,
        metavar="N",
        help="graph walks computed at once; up to 64 more wait, then 503 (default 4)",
    )
    parser.add_argument(
        "--walk-timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="stop a graph walk (cancelling its statement) still unfinished this long after it arrived: 504 "
        "(default 30); a walk whose client disconnects is stopped at once",
    )
    parser.add_argument(
        "--max-answer-bytes",
        type=int,
        default=32 * 1024 * 1024,
        metavar="N",
        help="most bytes of stored events, facets and schemas one listing page may show; a larger page of more "
        "than one item gets 400 naming the limit to ask for (default 32 MiB)",
    )
    parser.add_argument(
        "--ingest-group-wait-ms",
        type=float,
        default=2.0,
        metavar="MS",
        help="under concurrent single-event ingest, wait up to MS milliseconds for the other senders' requests "
        "and commit them together (default 2; 0: never wait; a lone sender never waits)",
    )
    parser.add_argument(
        "--ingest-apply",
        choices=INGEST_APPLY_MODES,
        default=INGEST_APPLY,
        help="inline: apply each ingest's events to the graph in its own transaction; deferred: commit them to an "
        "ingest log, answer, and apply the log in large batches (cheaper per event under concurrent single-event "
        "senders on PostgreSQL; reads wait until what was logged before them is applied); auto (default): "
        "deferred on PostgreSQL, inline on SQLite",
    )
    # Defaults left to ConsumerSettings (None: not given), so that this module imports no store code.
    parser.add_argument(
        "--ingest-log-max-events",
        type=int,
        metavar="N",
        help="deferred apply: while the ingest log holds this many events not yet applied, answer ingests 503 with "
        "Retry-After (default 10000)",
    )
    parser.add_argument(
        "--ingest-log-max-bytes",
        type=int,
        metavar="BYTES",
        help="deferred apply: the same for bytes of raw events in the log (default 8 MiB)",
    )
    parser.add_argument(
        "--ingest-apply-timeout",
        type=float,
        metavar="SECONDS",
        help="deferred apply: longest applying a batch may take; an event slower than this alone is set aside "
        "(default 10)",
    )
    parser.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a host name clients use to reach the consumer (repeatable; '*' allows any). Always allowed: the "
        "--host address, localhost and the loopback addresses (and this machine's names when --host is 0.0.0.0)",
    )
    parser.add_argument(
        "--stall-timeout",
        type=float,
        default=STALL_SECONDS,
        metavar="SECONDS",
        help="abandon an answer, closing its connection, when the client accepts none of it for this long "
        f"(default {STALL_SECONDS:.0f})",
    )
    parser.add_argument(
        "--keep-alive-timeout",
        type=float,
        default=KEEP_ALIVE_SECONDS,
        metavar="SECONDS",
        help=f"close a kept-alive connection idle this long after an answer (uvicorn's timeout_keep_alive; default "
        f"{KEEP_ALIVE_SECONDS:.0f})",
    )
    parser.add_argument(
        "--limit-concurrency",
        type=int,
        default=LIMIT_CONCURRENCY,
        metavar="N",
        help="answer 503 while N connections are open or N requests in progress (uvicorn's limit_concurrency; "
        f"bounds what idle or slow connections can hold; default {LIMIT_CONCURRENCY})",
    )
    parser.add_argument(
        "--header-timeout",
        type=float,
        metavar="SECONDS",
        help="no longer applies (accepted so that existing command lines run): a request head's time is not "
        "bounded by the consumer itself; see docs/security.md, 'Slow and idle connections'",
    )
    parser.add_argument(
        "--upload-timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="answer 408 and close the connection when a request body takes longer than this to arrive (default 60)",
    )
    parser.add_argument("--strict", action="store_true", help="reject events the OpenLineage JSON schema rejects")
    parser.add_argument("--spec-dir", metavar="DIR", help="folder with OpenLineage.json and facets/ (for --strict)")
    parser.add_argument(
        "--batch-answers",
        choices=["summary", "feast"],
        default="summary",
        help="status codes of POST /api/v1/lineage/batch: summary (200, 207 partial, 400 none stored) or feast "
        "(Feast's consumer's: 204 all stored, else 200)",
    )
    parser.add_argument(
        "--retention-days",
        type=float,
        metavar="DAYS",
        help="prune raw events and runs older than this (default: keep everything; 0: off)",
    )
    parser.add_argument(
        "--retention-check-interval-hours",
        type=float,
        default=24.0,
        metavar="HOURS",
        help="with --retention-days, prune every HOURS hours on a timer (default 24; fractions allowed)",
    )
    parser.add_argument(
        "--namespace-alias",
        action="append",
        default=[],
        metavar="ALIAS=CANONICAL",
        help="show and walk namespace ALIAS as CANONICAL, e.g. postgresql://db.internal:5432=postgres://db:5432 "
        "(repeatable; exact strings, applied when reading: stored events are never rewritten)",
    )
    parser.add_argument(
        "--graph-cache-nodes",
        type=int,
        default=GRAPH_CACHE_NODES,
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
    if args.limit_concurrency < 1:
        raise CommandError(f"--limit-concurrency must be at least 1, got {args.limit_concurrency}")
    for option in ("stall_timeout", "keep_alive_timeout", "upload_timeout"):
        if getattr(args, option) <= 0:
            raise CommandError(f"--{option.replace('_', '-')} must be more than 0 seconds, got {getattr(args, option)}")
    try:
        keys = [*(load_keys_file(args.keys_file) if args.keys_file else ()), *map(ApiKey.parse, args.key)]
        anonymous = anonymous_access(args.host, bool(keys or args.api_key), args.allow_anonymous)
        app = create_app(
            store_url=args.store,
            api_key=args.api_key,
            keys=tuple(keys),
            anonymous=anonymous,
            max_body_bytes=args.max_body_bytes,
            strict=args.strict,
            spec_dir=args.spec_dir,
            batch_answers=args.batch_answers,
            retention_days=args.retention_days,
            retention_check_interval_hours=args.retention_check_interval_hours,
            namespace_aliases=namespace_aliases(args.namespace_alias),
            graph_cache_nodes=args.graph_cache_nodes,
            max_batch_events=args.max_batch_events,
            max_clock_skew_hours=args.max_clock_skew_hours,
            upload_seconds=args.upload_timeout,
            stall_seconds=args.stall_timeout,
            max_concurrent_walks=args.max_concurrent_walks,
            walk_timeout_seconds=args.walk_timeout,
            max_answer_bytes=args.max_answer_bytes,
            ingest_group_wait_ms=args.ingest_group_wait_ms,
            ingest_apply=args.ingest_apply,
            **_given(
                ingest_log_max_events=args.ingest_log_max_events,
                ingest_log_max_bytes=args.ingest_log_max_bytes,
                ingest_apply_timeout_seconds=args.ingest_apply_timeout,
            ),
            allowed_hosts=serve_hosts(args.host, args.allowed_host),
        )
        app.state.store.engine  # noqa: B018 - connect and migrate before accepting traffic
    except (ValueError, ArgumentError) as error:
        raise CommandError(str(error)) from None
    except SQLAlchemyError as error:
        reason = str(getattr(error, "orig", None) or error).strip().splitlines()[0]
        raise CommandError(f"cannot open the lineage store {args.store!r}: {reason}") from None
    base = f"http://{args.host}:{args.port}"
    print(f"Lineage consumer on {base}: ingest at {base}/api/v1/lineage, page at {base}/ui, API docs at {base}/docs")
    print(access_summary(app.state.guard.keys, anonymous, args.host))  # the KeyGuard create_app built
    hosts = app.state.settings.allowed_hosts
    print("Host names answered: " + ("any (--allowed-host '*')" if "*" in hosts else ", ".join(hosts)))
    # The package's own lines (audit trail, retention, retries) next to uvicorn's.
    package_log = logging.getLogger("airflow_lineage_provider")
    package_log.setLevel(args.log_level.upper())
    if not package_log.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s:     %(name)s: %(message)s"))
        package_log.addHandler(handler)
    if args.header_timeout is not None:
        print(
            "--header-timeout no longer applies: a connection's request head is not timed by the consumer "
            "(docs/security.md, 'Slow and idle connections'); --limit-concurrency bounds what such connections hold"
        )
    tune_collector()
    uvicorn.run(
        app,
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        **uvicorn_options(args.keep_alive_timeout, args.limit_concurrency),
    )
    return 0


def uvicorn_options(keep_alive_seconds: float, limit_concurrency: int | None) -> dict[str, Any]:
    """uvicorn's own settings ``serve`` runs with (public ``uvicorn.Config`` parameters): how long an idle
    kept-alive connection stays open, and past how many open connections or requests in progress it answers 503."""
    return {"timeout_keep_alive": keep_alive_seconds, "limit_concurrency": limit_concurrency}


#: The collector's youngest-generation threshold in a standalone consumer (Python's default: 700).
GC_THRESHOLD = 20_000


def tune_collector() -> None:
    """Tune Python's cyclic collector for a consumer process of its own (never inside Airflow's): what exists at
    start-up (modules, the app, the store's engine) lives as long as the process, so it is kept out of the full
    scans (``gc.freeze``), which would otherwise walk all of it every ten or so large answers; and the
    youngest generation is collected every :data:`GC_THRESHOLD` allocations instead of 700, since a graph answer
    allocates tens of thousands of objects without cycles. The collector stays on throughout."""
    gc.freeze()
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(GC_THRESHOLD, middle, oldest)


def namespace_aliases(entries: list[str]) -> NamespaceAliases:
    """The ``--namespace-alias`` entries as :class:`NamespaceAliases`; each entry is one ``ALIAS=CANONICAL``
    (a comma belongs to the names, unlike in the configuration option)."""
    pairs = []
    for entry in entries:
        alias, sep, canonical = entry.partition("=")
        if not sep or not alias.strip() or not canonical.strip():
            raise ValueError(
                f"--namespace-alias takes ALIAS=CANONICAL, e.g. postgresql://db.internal:5432=postgres://db:5432, "
                f"got {entry!r}"
            )
        pairs.append((alias.strip(), canonical.strip()))
    return NamespaceAliases(tuple(pairs))


def is_loopback(host: str) -> bool:
    """Whether ``host`` is only reachable from this machine (``localhost``, 127.0.0.0/8, ``::1``)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def anonymous_access(host: str, has_keys: bool, allow_anonymous: str | None) -> Access | None:
    """The access a request without a key gets: what ``--allow-anonymous`` says; with no keys, ``admin`` on
    a loopback address (this machine only) and a refusal to start on any other."""
    if allow_anonymous:
        return Access.parse(allow_anonymous)
    if has_keys:
        return None
    if is_loopback(host):
        return Access.ADMIN
    raise CommandError(
        f"refusing to serve lineage on {host} with no credentials: anyone who reaches it could read, write and "
        "prune it. Add keys (--keys-file FILE, or --key NAME:SCOPE:SECRET with scope read, write or admin, "
        "or --api-key KEY), or pass --allow-anonymous to open it on purpose (docs/security.md)"
    )


def access_summary(keys: KeyRing, anonymous: Access | None, host: str) -> str:
    """One line saying who may do what, printed at start-up (names and scopes only, never a secret)."""
    listed = ", ".join(f"{key.name} ({key.scope.label})" for key in keys.keys)
    parts = [f"keys: {listed}" if listed else "no keys"]
    if anonymous is None:
        parts.append("requests without a key: refused (401)")
    elif not listed and is_loopback(host):
        parts.append(f"anonymous {anonymous.label} access from this machine only; add --key to require one")
    else:
        parts.append(f"anonymous access: {anonymous.label} (--allow-anonymous)")
    return "Access: " + "; ".join(parts)


def _given(**options: Any) -> dict[str, Any]:
    """The options given on the command line (those left out keep ConsumerSettings' defaults)."""
    return {name: value for name, value in options.items() if value is not None}
