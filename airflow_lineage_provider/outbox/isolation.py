"""Delivering a batch, and taking it apart when the consumer fails it as a whole, to isolate its poison events.

A consumer may fail a whole batch (a 5xx, a dropped connection, a 4xx) because of one event in it, say a
NUL character its store cannot keep. Sent again as it is, the batch would fail forever and hold back every
event behind it. :func:`deliver_batch` therefore:

1. sends the batch; when it fails or is rejected as a whole, splits it in halves and sends those, in
   order, splitting again every half that fails, down to single events (a consumer without a batch
   endpoint gets single events from the start);
2. dead-letters a single event the consumer rejects (4xx);
3. keeps a single event that fails (5xx, dropped connection) as a *suspect*: once every other event of the
   batch was tried, each suspect is sent alone again, up to :attr:`PoisonPolicy.attempts` times in all,
   :attr:`PoisonPolicy.pause` apart. One that fails every time is dead-lettered, but only if the consumer
   accepted (or rejected) other requests for this batch: proof that it is up and the event is the problem;
4. stops, leaving every event not yet settled pending for a retry with backoff, as soon as the consumer is
   unavailable (unreachable, timing out, 408/425/429/503), or :attr:`PoisonPolicy.down_after` single
   events in a row failed with nothing accepted in between. A consumer that fails every request is down,
   not poisoned: nothing is dead-lettered, and finding that out costs a few requests (about
   ``log2(batch size) + down_after``).

Events are sent in outbox order. Only a suspect that succeeds when sent again reaches the consumer after
the events behind it in its batch; a batch never holds a run's START together with that run's end (see
:func:`~airflow_lineage_provider.outbox.store.claim_batch`), so a START still never follows its run's end.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from airflow_lineage_provider.outbox.outcomes import ACCEPTED, DELIVERED, FAILED, REJECTED, UNAVAILABLE, Answer, Outcome

#: However often a batch failed before, isolation gives up after at most this many times ``down_after``.
_MAX_DOWN_AFTER_FACTOR = 10


def _doubling(attempt: int) -> float:
    return float(2 ** (attempt - 1))


@dataclass(frozen=True)
class PoisonPolicy:
    """How a batch that failed as a whole is taken apart."""

    attempts: int = 3
    """Times in all an event that fails alone (5xx, dropped connection) is sent alone before it is
    dead-lettered, if the consumer took other events of its batch meanwhile."""

    down_after: int = 3
    """Single events failing in a row, with nothing accepted in between, after which the consumer is
    taken to be down: the rest of the batch waits for a retry. It grows by itself with every earlier
    failure of the batch (up to 10 times), so a run of poison events at the head of the outbox is passed
    eventually."""

    pause: Callable[[int], float] = _doubling
    """Seconds to wait before the n-th repeated lone attempt (n = 1, 2, ...); default 1 s, 2 s, ..."""


class Sender(Protocol):
    """What :func:`deliver_batch` needs of a consumer client (see :class:`~.consumer_client.ConsumerClient`)."""

    batch_supported: bool | None

    def send_batch(self, payloads: list[str]) -> Answer | None:
        """One request with ``payloads``; ``None`` when the consumer has no batch endpoint."""

    def send_one(self, payload: str) -> Answer:
        """One request with one event, to the single-event endpoint."""


def deliver_batch(
    sender: Sender, payloads: Sequence[str], policy: PoisonPolicy | None = None, earlier_failures: int = 0
) -> list[Outcome]:
    """Send events (JSON strings, in outbox order); one :class:`Outcome` per event, in the same order.

    ``earlier_failures`` is how often these events failed before (the most of any): the more, the
    further isolation looks before it takes the consumer to be down.
    """
    if not payloads:
        return []
    return _BatchDelivery(sender, list(payloads), policy or PoisonPolicy(), earlier_failures).run()


class _BatchDelivery:
    """One batch on its way: the outcome of each event so far, the suspects, and whether the consumer is up."""

    def __init__(self, sender: Sender, payloads: list[str], policy: PoisonPolicy, earlier_failures: int) -> None:
        self.sender = sender
        self.payloads = payloads
        self.policy = policy
        self.outcomes: list[Outcome | None] = [None] * len(payloads)
        self.suspects: dict[int, Answer] = {}
        self.unexplained: list[int] = []
        self.consumer_answered = False
        self.failures_in_a_row = 0
        self.allowed_in_a_row = policy.down_after * min(_MAX_DOWN_AFTER_FACTOR, 1 + max(0, earlier_failures))
        self.stopped: Answer | None = None

    def run(self) -> list[Outcome]:
        if self.sender.batch_supported is not False:
            self._send_range(0, len(self.payloads))
        if self.sender.batch_supported is False:  # no batch endpoint: known before, or learned just now
            self._send_each([i for i, o in enumerate(self.outcomes) if o is None and i not in self.suspects])
        self._send_each(self._take_unexplained())
        if self.stopped is None and self.consumer_answered and self.suspects:
            self._send_suspects_again()
            self._send_each(self._take_unexplained())
        return [self._final(index) for index in range(len(self.payloads))]

    def _send_range(self, low: int, high: int) -> None:
        if self.stopped is not None:
            return
        answer = self.sender.send_batch(self.payloads[low:high])
        if answer is not None:  # None: no batch endpoint; run() sends the events one by one
            self._take(low, high, answer)

    def _send_each(self, indices: list[int]) -> None:
        for index in indices:
            if self.stopped is not None:
                return
            self._take(index, index + 1, self.sender.send_one(self.payloads[index]))

    def _take(self, low: int, high: int, answer: Answer) -> None:
        """Settle events ``low:high`` by ``answer``, taking the range apart when it failed as a whole."""
        if answer.kind == ACCEPTED:
            self._accepted(low, high, answer)
        elif answer.kind == UNAVAILABLE:
            self.stopped = answer
        elif high - low == 1:
            self._single_failed(low, answer)
        else:
            if answer.kind == REJECTED:
                self._consumer_is_up()
            middle = (low + high) // 2
            self._send_range(low, middle)
            self._send_range(middle, high)

    def _accepted(self, low: int, high: int, answer: Answer) -> None:
        self._consumer_is_up()
        for offset in range(high - low):
            outcome = Outcome(DELIVERED, answer.status_code) if answer.per_event is None else answer.per_event[offset]
            if outcome is None:
                self.unexplained.append(low + offset)
            else:
                self.outcomes[low + offset] = outcome

    def _single_failed(self, index: int, answer: Answer) -> None:
        if answer.kind == REJECTED:
            self._consumer_is_up()
            self.outcomes[index] = answer.dead()
            return
        self.suspects[index] = answer
        self.failures_in_a_row += 1
        if self.failures_in_a_row >= self.allowed_in_a_row:
            self.stopped = answer

    def _consumer_is_up(self) -> None:
        self.consumer_answered = True
        self.failures_in_a_row = 0

    def _take_unexplained(self) -> list[int]:
        taken, self.unexplained = self.unexplained, []
        return taken

    def _send_suspects_again(self) -> None:
        """Send each suspect alone, round after round; dead-letter those that fail every time."""
        for repeat in range(1, self.policy.attempts):
            if not self.suspects:
                return
            time.sleep(self.policy.pause(repeat))
            for index in sorted(self.suspects):
                answer = self._send_alone(index)
                if answer.kind == UNAVAILABLE:
                    self.stopped = answer  # the consumer went away: no verdict on anyone
                    return
                if answer.kind == FAILED:
                    self.suspects[index] = answer
                    continue
                del self.suspects[index]
                if answer.kind == ACCEPTED:
                    self._accepted(index, index + 1, answer)
                else:
                    self.outcomes[index] = answer.dead()
        note = f"(failed alone {self.policy.attempts} times while the consumer took other events of its batch)"
        for index, answer in self.suspects.items():
            self.outcomes[index] = answer.dead(note)
        self.suspects.clear()

    def _send_alone(self, index: int) -> Answer:
        payload = self.payloads[index]
        if self.sender.batch_supported is not False:
            answer = self.sender.send_batch([payload])
            if answer is not None:
                return answer
        return self.sender.send_one(payload)

    def _final(self, index: int) -> Outcome:
        outcome = self.outcomes[index]
        if outcome is not None:
            return outcome
        if index in self.suspects:
            return self.suspects[index].retry()
        if self.stopped is not None:
            return self.stopped.retry()
        return Answer(FAILED, None, "not sent").retry()
