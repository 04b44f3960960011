"""What a consumer answered: to one request (an :class:`Answer`) and about each event (an :class:`Outcome`).

An answer is one of four kinds, which decide what the shipper does next:

* ``accepted`` (2xx): the events are delivered, or settled one by one when the body has per-event results;
* ``unavailable`` (the consumer could not be reached, timed out, or answered 408, 425, 429 or 503): the
  consumer is down or asks to be left alone for a while; nothing in the request is to blame, so the
  events wait for a retry with backoff;
* ``failed`` (any other 5xx, or the connection dropped while the request was being answered): something
  in the request may have broken the consumer, so a batch is taken apart to find the event that did;
* ``rejected`` (any other 4xx except 401/403, which stop shipping): the consumer refuses the request;
  a batch is taken apart, and a single event answered so is dead-lettered.
"""

from __future__ import annotations

from dataclasses import dataclass

DELIVERED = "delivered"
RETRY = "retry"
DEAD = "dead"

ACCEPTED = "accepted"
UNAVAILABLE = "unavailable"
FAILED = "failed"
REJECTED = "rejected"

#: Statuses by which a consumer says it is down or overloaded rather than hurt by what it was sent.
UNAVAILABLE_STATUSES = frozenset({408, 425, 429, 503})


@dataclass(frozen=True)
class Outcome:
    """What happened to one event: ``kind`` is delivered, retry or dead, with the consumer's answer."""

    kind: str
    status_code: int | None = None
    detail: str = ""


@dataclass(frozen=True)
class Answer:
    """How the consumer answered one request (of one or several events)."""

    kind: str
    """``accepted``, ``unavailable``, ``failed`` or ``rejected`` (see the module docstring)."""

    status_code: int | None = None
    """The HTTP status, ``None`` when there was no response."""

    detail: str = ""
    """The consumer's answer (status and body) or the connection error, for the outbox and the log."""

    per_event: list[Outcome | None] | None = None
    """For an accepted batch with per-event results, one outcome per event (``None``: the answer did not
    say, so the event is sent again on its own); ``None`` when the consumer took every event."""

    def retry(self) -> Outcome:
        """This answer as the outcome of an event that waits for a retry."""
        return Outcome(RETRY, self.status_code, self.detail)

    def dead(self, note: str = "") -> Outcome:
        """This answer as the outcome of an event that is dead-lettered (with ``note`` added)."""
        return Outcome(DEAD, self.status_code, f"{self.detail} {note}".strip())


def answer_of_status(status_code: int, detail: str) -> Answer:
    """The kind of a non-2xx answer other than 401/403 (which stop shipping before this is asked)."""
    if status_code in UNAVAILABLE_STATUSES:
        return Answer(UNAVAILABLE, status_code, detail)
    if status_code >= 500:
        return Answer(FAILED, status_code, detail)
    return Answer(REJECTED, status_code, detail)
