"""Configuration of one consumer app, validated when the app is built."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

from airflow_lineage_provider.consumer.security.access import Access, ApiKey, KeyRing
from airflow_lineage_provider.consumer.store.write.deferred_apply import (
    APPLY_TIMEOUT_SECONDS,
    MAX_PENDING_BYTES,
    MAX_PENDING_EVENTS,
)
from airflow_lineage_provider.defaults import GRAPH_CACHE_NODES, INGEST_APPLY, INGEST_APPLY_MODES, MAX_BODY_BYTES
from airflow_lineage_provider.namespace_aliases import NamespaceAliases, aliases_from

#: The ways ``POST /api/v1/lineage/batch`` may answer (:attr:`ConsumerSettings.batch_answers`).
BATCH_ANSWERS = ("summary", "feast")


@dataclass(frozen=True)
class ConsumerSettings:
    """Settings of :func:`airflow_lineage_provider.consumer.create_app`."""

    store_url: str
    """SQLAlchemy URL of the lineage store: ``sqlite:////path/lineage.db`` (default kind, WAL mode) or
    ``postgresql+psycopg2://user:password@host:5432/db``. Tables are created or migrated on first use."""

    api_key: str | None = None
    """A key with scope ``write`` (named ``api-key`` in the audit log): ingest and reads, sent as
    ``X-API-Key: <key>`` or ``Authorization: Bearer <key>``. Kept from before scoped keys; prefer ``keys``."""

    keys: tuple[ApiKey, ...] = ()
    """Named keys with scopes ``read``, ``write`` or ``admin``, optionally limited to namespace patterns
    (:mod:`airflow_lineage_provider.consumer.security.access`)."""

    anonymous: Access | None = None
    """The access a request without a credential gets: None (the default) for none, or ``Access.READ``,
    ``WRITE`` or ``ADMIN`` where an operator opts in to anonymous access."""

    max_body_bytes: int = MAX_BODY_BYTES
    """Largest request body accepted (after gzip decompression), in bytes; larger ones get 413. 16 MiB."""

    max_batch_events: int = 10_000
    """Most events one request may carry; a larger batch gets 413 before its events are decoded."""

    max_clock_skew_hours: float = 24.0
    """How far past the consumer's clock an ``eventTime`` may be; later ones get 400 (a far-future event
    would stay the latest forever and escape retention). 24 hours."""

    max_concurrent_walks: int = 4
    """Graph and column-lineage walks computed at once per process; more wait their turn."""

    max_waiting_walks: int = 64
    """Walks that may wait for a turn; past this a walk is answered 503 with ``Retry-After``."""

    ingest_group_wait_ms: float = 2.0
    """Under concurrent single-event ingest, how long the writer may wait for the other active senders'
    requests before it commits a group, in milliseconds (:mod:`.grouped_ingest`): a group then holds all of them
    and shares one transaction's cost. A lone sender never waits. 0 turns the wait off; at most 1000."""

    ingest_apply: str = INGEST_APPLY
    """How ingested events reach the graph: ``inline`` applies them in the ingest's own transaction; ``deferred``
    commits them to an ingest log, answers, and applies the log in bounded batches in a thread of the
    serving process, reads waiting until what was logged before them is applied (:mod:`.store.write.deferred_apply`);
    ``auto`` (the default) is deferred on PostgreSQL and inline on SQLite. A 201 means committed either way.
    ``deferred`` makes concurrent single-event ingest on PostgreSQL cheaper per event (``docs/benchmarks.md``)."""

    walk_answer_bytes: int = 256 * 1024 * 1024
    """Bytes of walk and listing answers held in memory until their clients have read them; a walk or listing
    that would go past it is answered 503 with ``Retry-After``. 256 MiB (a ``maxNodes=100000`` answer is about
    20 MB)."""

    allowed_hosts: tuple[str, ...] = ()
    """Host names (``Host`` header, without the port) requests may be addressed to; others get 400, so a
    web page that rebinds its DNS name to this address cannot read the API. ``*`` in the list, or an empty
    list (the default for apps built in code, e.g. inside Airflow), accepts any. ``airflow-lineage serve``
    fills it with the address it listens on, ``localhost`` and ``--allowed-host`` names."""

    strict: bool = False
    """Reject (400) any event the OpenLineage JSON schema rejects, on top of the lenient checks.
    Needs ``spec_dir``."""

    batch_answers: str = "summary"
    """Status codes of ``POST /api/v1/lineage/batch`` (the body is the same summary either way): ``summary``
    answers 200 when every event was stored, 207 when some were not, 400 when none was; ``feast`` answers as
    Feast's consumer does: 204 without a body when every event was stored, else 200. With ``feast``, a sender
    that reads only the status code (OpenLineage's HTTP transport) takes a partial batch for a delivered one."""

    spec_dir: str | None = None
    """Folder holding the OpenLineage spec's ``OpenLineage.json`` and ``facets/*.json`` (the ``spec/``
    folder of the OpenLineage repository at the version you target). Read only in strict mode."""

    retention_days: float | None = None
    """Prune raw events and runs whose last event is older than this many days, every
    ``retention_check_interval_hours`` (a timer started with the app, see :mod:`.service`). None (the
    default) or 0 keeps everything (0 is taken as None: retention off). The graph itself (jobs, datasets,
    edges, schemas, each job's latest run) is never pruned."""

    retention_check_interval_hours: float = 24.0
    """How often retention runs when ``retention_days`` is set, in hours (a fraction is fine: 0.25 is every
    15 minutes). The interval counts from the store's last scheduled prune, whichever process ran it."""

    retention_interval_hours: float | None = None
    """Deprecated name of ``retention_check_interval_hours`` (given, it sets it, with a DeprecationWarning)."""

    namespace_aliases: NamespaceAliases = field(default_factory=NamespaceAliases)
    """Other spellings of namespaces, ``alias → canonical`` (:mod:`.namespace_aliases`), applied when the
    store reads; text (``"a=b, c=d"``) or ``(alias, canonical)`` pairs are accepted too. Empty by default."""

    default_max_nodes: int = 1000
    """``maxNodes`` of a graph query that does not give one."""

    graph_cache_nodes: int = GRAPH_CACHE_NODES
    """Nodes whose graph data (names, latest schema, latest run, as encoded JSON) is kept in memory for
    graph answers, keyed by a version every event naming the node bumps, so nothing stale is ever
    served; about 1 KB each. It also bounds the Marquez Job objects job listings keep the same way (about
    1.3 KB each). 0 reads every node's data from the store on every query."""

    upload_seconds: float = 60.0
    """Longest a request body may take to arrive, in seconds, counted from when its handler starts reading it
    (after the head); a slower upload is answered 408 and its connection closed, so a client trickling a large
    body cannot hold its memory. 60 s: 16 MiB at about 2 Mbit/s."""

    stall_seconds: float = 30.0
    """Longest the server may take to accept one part of an answer, in seconds: past it the client is taken to
    have stopped reading, the answer is abandoned and its connection closed (:mod:`.stalled_readers`), so an
    unread answer cannot hold its part of the answer budget for ever."""

    walk_timeout_seconds: float = 30.0
    """Longest a graph or column-lineage walk may take from when it is admitted, waiting for a turn included;
    past it the walk is stopped (its statement cancelled in the database) and answered 504 (503 with
    ``Retry-After`` when it never got a turn). A walk whose client disconnects is stopped at once."""

    max_answer_bytes: int = 32 * 1024 * 1024
    """Most bytes of stored values (raw event payloads, facets, schemas) one page of a listing may show; a page
    of more than one item past it is answered 400 naming the ``limit`` that fits (:mod:`.answer_limits`).
    32 MiB."""

    ingest_log_max_events: int = MAX_PENDING_EVENTS
    """With deferred apply, most events the ingest log may hold waiting to be applied: while it holds this many,
    ingests are answered 503 with ``Retry-After`` (nothing of them stored) until the applier catches up. 10,000."""

    ingest_log_max_bytes: int = MAX_PENDING_BYTES
    """With deferred apply, most bytes of raw events the ingest log may hold waiting to be applied (as
    ``ingest_log_max_events``). 8 MiB."""

    ingest_apply_timeout_seconds: float = APPLY_TIMEOUT_SECONDS
    """With deferred apply, longest applying one batch of the log may take; an event that takes longer alone is set
    aside (listed and requeued by ``/api/v1/ingest-log/unapplied``) so that the log behind it moves on. 10 s: under
    the 30 s a read waits for the log."""

    def all_keys(self) -> KeyRing:
        """``keys`` plus ``api_key`` as the write key ``api-key``; ValueError on a bad or repeated key."""
        legacy = (ApiKey("api-key", Access.WRITE, self.api_key),) if self.api_key else ()
        return KeyRing((*legacy, *self.keys))

    def __post_init__(self) -> None:
        if not self.store_url:
            raise ValueError("store_url is required: e.g. sqlite:////var/lib/lineage/lineage.db")
        if self.graph_cache_nodes < 0:
            raise ValueError(f"graph_cache_nodes must be 0 (no cache) or more, got {self.graph_cache_nodes}")
        if self.max_body_bytes < 1024:
            raise ValueError(f"max_body_bytes must be at least 1024, got {self.max_body_bytes}")
        for name in ("max_batch_events", "max_concurrent_walks", "walk_answer_bytes"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if not self.upload_seconds > 0:
            raise ValueError(f"upload_seconds must be more than 0, got {self.upload_seconds}")
        if not self.stall_seconds > 0:
            raise ValueError(f"stall_seconds must be more than 0, got {self.stall_seconds}")
        if not self.walk_timeout_seconds > 0:
            raise ValueError(f"walk_timeout_seconds must be more than 0, got {self.walk_timeout_seconds}")
        if self.max_answer_bytes < 1024:
            raise ValueError(f"max_answer_bytes must be at least 1024, got {self.max_answer_bytes}")
        if self.max_waiting_walks < 0:
            raise ValueError(f"max_waiting_walks must be 0 or more, got {self.max_waiting_walks}")
        if not 0 <= self.ingest_group_wait_ms <= 1000:
            raise ValueError(
                "ingest_group_wait_ms must be between 0 (no wait) and 1000 milliseconds, "
                f"got {self.ingest_group_wait_ms}"
            )
        if self.ingest_apply not in INGEST_APPLY_MODES:
            raise ValueError(f"ingest_apply must be one of {', '.join(INGEST_APPLY_MODES)}, got {self.ingest_apply!r}")
        for name in ("ingest_log_max_events", "ingest_log_max_bytes"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if not self.ingest_apply_timeout_seconds > 0:
            raise ValueError(
                f"ingest_apply_timeout_seconds must be more than 0, got {self.ingest_apply_timeout_seconds}"
            )
        if self.batch_answers not in BATCH_ANSWERS:
            raise ValueError(f"batch_answers must be one of {', '.join(BATCH_ANSWERS)}, got {self.batch_answers!r}")
        if self.max_clock_skew_hours < 0:
            raise ValueError(f"max_clock_skew_hours must be 0 or more, got {self.max_clock_skew_hours}")
        if self.strict and not self.spec_dir:
            raise ValueError(
                "strict mode validates events against the OpenLineage JSON schema: pass spec_dir, the folder "
                "with OpenLineage.json and facets/ (the spec/ folder of the OpenLineage repository)"
            )
        if self.retention_days is not None and not self.retention_days >= 0:
            raise ValueError(f"retention_days must be 0 or more (0 or None: off), got {self.retention_days}")
        if self.retention_days == 0:
            object.__setattr__(self, "retention_days", None)  # 0 means off, as everywhere it is set
        self._check_retention_interval()
        object.__setattr__(self, "namespace_aliases", aliases_from(self.namespace_aliases))

    def _check_retention_interval(self) -> None:
        """Take the deprecated ``retention_interval_hours`` over, then check the interval."""
        if self.retention_interval_hours is not None:
            warnings.warn(
                "retention_interval_hours is deprecated: use retention_check_interval_hours",
                DeprecationWarning,
                stacklevel=4,
            )
            if self.retention_check_interval_hours not in (24.0, self.retention_interval_hours):
                raise ValueError(
                    "retention_interval_hours (deprecated) and retention_check_interval_hours disagree "
                    f"({self.retention_interval_hours} and {self.retention_check_interval_hours}): give only "
                    "retention_check_interval_hours"
                )
            object.__setattr__(self, "retention_check_interval_hours", float(self.retention_interval_hours))
            object.__setattr__(self, "retention_interval_hours", None)
        if not self.retention_check_interval_hours > 0:
            raise ValueError(
                f"retention_check_interval_hours must be more than 0, got {self.retention_check_interval_hours}"
            )
