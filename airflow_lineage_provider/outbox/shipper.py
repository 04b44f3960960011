"""Shipping the outbox to an OpenLineage HTTP consumer: claim in order, send, settle, repeat.

A :class:`Shipper` first moves this machine's spilled events into the outbox, sequences new events and
takes them into its destination's deliveries, then loops: claim a batch (a lease, so a shipper killed
mid-batch only delays its events: they are claimed again when the lease runs out), send it through a
:class:`~.consumer_client.ConsumerClient` (which takes apart a batch the consumer fails as a whole, to
isolate its poison events: :mod:`.isolation`), and settle every event: delivered, retry after an
exponential backoff, or dead-lettered with the consumer's answer (logged, one line per event). Several
shippers may run at once on PostgreSQL; each event is claimed by one of them.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

from sqlalchemy import Engine

from airflow_lineage_provider.defaults import LINEAGE_ENDPOINT
from airflow_lineage_provider.outbox import store
from airflow_lineage_provider.outbox.consumer_client import (
    DEAD,
    DELIVERED,
    RETRY,
    ConsumerClient,
    ConsumerConfig,
    ConsumerRefused,
    Outcome,
)
from airflow_lineage_provider.outbox.isolation import PoisonPolicy
from airflow_lineage_provider.outbox.writer import OutboxWriter

log = logging.getLogger(__name__)


@dataclass
class DeliveryPolicy:
    """How a shipper claims and retries."""

    batch_size: int = 500
    """Events per claim (and per batch request)."""

    lease_seconds: float = 300.0
    """How long a claim is exclusive; a shipper that dies mid-batch delays its events this long. Keep it
    well above the time one batch can take (timeout times requests)."""

    backoff_base: float = 1.0
    """Seconds before the first retry of an event that failed transiently; doubled per attempt."""

    backoff_max: float = 300.0
    """Upper bound of the backoff, in seconds."""

    poison_attempts: int = 3
    """Times in all an event the consumer fails alone (5xx, dropped connection) is sent alone, ``backoff``
    apart, before it is dead-lettered as poison. Only when the consumer took other events of the same batch
    meanwhile: a consumer failing every request is down, and then nothing is dead-lettered."""

    down_after: int = 3
    """While a failed batch is taken apart: single events failing in a row, with nothing accepted in
    between, after which the consumer is taken to be down and the rest of the batch waits for a retry
    (this grows with each earlier failure of the batch, up to ten times)."""

    def backoff(self, attempts: int) -> float:
        """Seconds to wait after ``attempts`` failed attempts, with ±20 % jitter."""
        delay = min(self.backoff_max, self.backoff_base * 2 ** max(0, attempts - 1))
        return delay * random.uniform(0.8, 1.2)

    def poison(self) -> PoisonPolicy:
        """How a batch the consumer failed as a whole is taken apart (see :mod:`.isolation`)."""
        return PoisonPolicy(attempts=self.poison_attempts, down_after=self.down_after, pause=self.backoff)


@dataclass
class ShipReport:
    """What one :meth:`Shipper.ship` call did."""

    delivered: int = 0
    dead: int = 0
    retried: int = 0
    requests: int = 0
    pending: int = 0
    spilled_moved: int = 0
    last_error: str = ""
    refused: str = ""
    """Set when the consumer refused the client as a whole (401/403, missing endpoint)."""
    unreachable: bool = False
    """The last attempt failed transiently (the consumer is down or overloaded) and events stay pending."""
    dead_letters: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        """Whether the consumer stayed unreachable or refused us (what should fail a scheduled run)."""
        return bool(self.refused) or (self.unreachable and self.pending > 0)


def prepare_destination(engine: Engine, name: str, kind: str, target: str) -> int:
    """Create ``name`` if new, sequence new events and take them into its deliveries; return its id."""
    with engine.begin() as conn:
        destination = store.ensure_destination(conn, name, kind, target)
    while True:
        with engine.begin() as conn:
            if not store.sequence_events(conn):
                break
    with engine.begin() as conn:
        store.materialize(conn, destination)
    return destination


def pending_count(engine: Engine, name: str) -> int:
    """Events destination ``name`` has still to get (a new destination gets every retained event)."""
    with engine.begin() as conn:
        counts = store.status(conn)
    if name not in counts["destinations"]:
        return int(counts["events"])
    return int(counts["destinations"][name]["pending"])


class Shipper:
    """Delivers one outbox to one HTTP consumer, as destination ``name``."""

    def __init__(
        self,
        writer: OutboxWriter,
        name: str,
        consumer: ConsumerConfig,
        policy: DeliveryPolicy | None = None,
    ) -> None:
        self.writer = writer
        self.name = name
        self.consumer = consumer
        self.policy = policy or DeliveryPolicy()

    def ship(
        self,
        budget: float | None = None,
        wait_for_backoff: bool = False,
        progress: Callable[[int], None] | None = None,
    ) -> ShipReport:
        """Deliver until nothing is claimable (or ``budget`` seconds passed).

        With ``wait_for_backoff``, events waiting for a retry within the budget are waited for, so a
        consumer that comes back during the run still gets them. ``progress(n)`` is told of every
        ``n`` events settled.
        """
        started = time.monotonic()
        report = ShipReport()
        engine = self.writer.engine()
        try:
            report.spilled_moved = self.writer.drain_spill()
        except Exception as error:  # an unreadable spill file must not stop shipping what the outbox has
            report.last_error = f"spill folder: {error}"
        destination = prepare_destination(engine, self.name, "http", self.consumer.url)
        client = ConsumerClient(self.consumer)
        try:
            while budget is None or time.monotonic() - started < budget:
                with engine.begin() as conn:
                    claim = store.claim_batch(conn, destination, self.policy.batch_size, self.policy.lease_seconds)
                if not claim.events:
                    if not wait_for_backoff or not self._wait_for_due(engine, destination, started, budget):
                        break
                    prepare_destination(engine, self.name, "http", self.consumer.url)
                    continue
                try:
                    outcomes = client.deliver(
                        [event.payload for event in claim.events],
                        self.policy.poison(),
                        earlier_failures=max(event.attempts for event in claim.events),
                    )
                except ConsumerRefused as refused:
                    with engine.begin() as conn:
                        store.release(conn, claim.token, [e.delivery_id for e in claim.events])
                    report.refused = str(refused)
                    break
                self._settle(engine, claim, outcomes, report)
                if progress is not None:
                    progress(len(claim.events))
        finally:
            report.requests = client.requests_sent
            client.close()
        report.pending = pending_count(engine, self.name)
        return report

    def _settle(self, engine: Engine, claim: store.Claim, outcomes: list[Outcome], report: ShipReport) -> None:
        delivered = [e.delivery_id for e, o in zip(claim.events, outcomes, strict=True) if o.kind == DELIVERED]
        retry = [(e, o) for e, o in zip(claim.events, outcomes, strict=True) if o.kind == RETRY]
        dead = [(e, o) for e, o in zip(claim.events, outcomes, strict=True) if o.kind == DEAD]
        with engine.begin() as conn:
            report.delivered += store.mark_delivered(conn, claim.token, delivered)
            for event, outcome in dead:
                if store.mark_dead(conn, claim.token, event.delivery_id, outcome.status_code, outcome.detail):
                    report.dead += 1
                    report.dead_letters.append(f"{event.event_type} {event.run_id}: {outcome.detail}")
                    self._log_dead_letter(event, outcome)
            if retry:
                first = retry[0][1]
                report.retried += store.mark_retry(
                    conn,
                    claim.token,
                    [e.delivery_id for e, _ in retry],
                    self.policy.backoff,
                    first.detail,
                    first.status_code,
                )
                report.last_error = first.detail
        report.unreachable = bool(retry)

    def _log_dead_letter(self, event: store.ClaimedEvent, outcome: Outcome) -> None:
        log.warning(
            "Lineage outbox: dead-lettered the %s event of run %s for %s: %s (fix the cause, then "
            "`airflow-lineage replay --name %s`)",
            event.event_type or "event",
            event.run_id or "(none)",
            without_password(self.consumer.url),
            outcome.detail,
            without_password(self.name),
        )

    def _wait_for_due(self, engine: Engine, destination: int, started: float, budget: float | None) -> bool:
        """Sleep until the next pending delivery is due, if that is within the budget."""
        with engine.begin() as conn:
            due = store.next_due(conn, destination)
        if due is None:
            return False
        # At least a moment: a due COMPLETE may be waiting for its run's START, which is not due yet.
        wait = max(0.5, (due - store.utcnow()).total_seconds() + 0.05)
        left = None if budget is None else budget - (time.monotonic() - started)
        if left is not None and wait >= left:
            return False
        time.sleep(wait)
        return True


def without_password(url: str) -> str:
    """``url`` without the password of its user part (``http://user:***@host``), for log lines."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def default_destination_name(url: str, endpoint: str = LINEAGE_ENDPOINT) -> str:
    """A destination name from the consumer's URL: the full lineage endpoint URL."""
    return f"{url.rstrip('/')}/{endpoint.strip('/')}"
