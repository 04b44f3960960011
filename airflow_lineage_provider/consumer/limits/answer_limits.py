"""Bounds on listing answers: the stored bytes one page may show, and the answer bytes held in memory at once.

A page of a listing shows stored values that can be megabytes each: raw event payloads, facets, schemas; and
lists that can be as long: a job's inputs and outputs, a graph node's edges. Before a page's values are loaded,
the store reads their sizes (and sums the names of those lists) — ``octet_length`` on PostgreSQL, which takes a
value's size from its header without decompressing it; ``length`` on SQLite, whose stored JSON is ASCII — and
hands them, item by item in page order, to the request's :class:`AnswerBound` (:meth:`AnswerBound.admit`):

* a page of more than one item whose values add up to more than ``max_answer_bytes`` is answered 400, naming
  the limit and the ``limit`` to ask for (how many items from the start of the page fit, at least one). A page
  of one item is always answered, however large, so that every item can be read. The page is refused rather
  than cut: clients that page by ``offset += limit`` (Marquez's web UI and clients) would skip the items a
  shorter page left out, without a word;
* the sizes count against the process-wide budget of answers in flight (``walk_answer_bytes``, shared with the
  graph walks, :mod:`.walk_limits`) from then until the answer has been sent; a page that would go past it is
  answered 503 with ``Retry-After``. Once encoded, the answer's own size is counted instead.

The refusal carries both error shapes: Marquez's ``{"code", "message"}`` (what its web UI shows) and the
consumer's ``{"detail"}``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import msgspec
from fastapi import Request
from fastapi.concurrency import run_in_threadpool
from starlette.responses import JSONResponse, Response

from airflow_lineage_provider.consumer.limits.walk_limits import HeldAnswer, WalkLimiter


class AnswerTooLarge(Exception):
    """A page's stored values would pass ``max_answer_bytes``."""

    def __init__(self, size: int, limit: int, fits: int) -> None:
        super().__init__(
            f"this page would show {size:,} bytes of stored values (raw events, facets, schemas, the names of "
            "linked datasets), more than one "
            f"answer may hold (max_answer_bytes = {limit:,}): ask for limit={fits} or less (the first {fits} "
            "items of this page fit) and page on with offset"
        )
        self.size, self.limit, self.fits = size, limit, fits


def fitting(sizes: Sequence[int], limit: int) -> int:
    """How many of ``sizes``, from the first, add up to ``limit`` or less (at least one)."""
    total = 0
    for count, size in enumerate(sizes):
        total += size
        if total > limit:
            return max(count, 1)
    return len(sizes)


class AnswerBound:
    """One listing request's bound (see the module): the store reports a page's sizes to :meth:`admit` before it
    loads the values, and :meth:`answer` runs the read and answers it within the budget."""

    def __init__(self, max_bytes: int, budget: WalkLimiter | None) -> None:
        self.max_bytes = max_bytes
        self.budget = budget
        self._held = 0

    def admit(self, sizes: Sequence[int]) -> None:
        """Let a page whose items' stored values have these sizes be loaded, holding them against the budget.

        Raises:
            AnswerTooLarge: more than one item, together past ``max_bytes``.
            WalksBusy: the answers in flight would pass the budget.
        """
        total = sum(sizes)
        if len(sizes) > 1 and total > self.max_bytes:
            raise AnswerTooLarge(total, self.max_bytes, fitting(sizes, self.max_bytes))
        if self.budget is not None and total:
            self.budget.hold(total)
            self._held += total

    async def answer(self, read: Callable[[], Any]) -> Response:
        """Run ``read`` off the event loop, encode what it returns and answer it: held against the budget until
        sent, or the 400 of a page too large."""
        try:
            body = await run_in_threadpool(lambda: msgspec.json.encode(read()))
        except AnswerTooLarge as error:
            self._give_back()
            message = str(error)
            return JSONResponse({"code": 400, "message": message, "detail": message}, status_code=400)
        except BaseException:
            self._give_back()
            raise
        if self.budget is None:
            return Response(body, media_type="application/json")
        self.budget.exchange(self._held, len(body))
        self._held = 0
        return HeldAnswer(body, release=functools.partial(self.budget.release, len(body)))

    def _give_back(self) -> None:
        if self.budget is not None and self._held:
            self.budget.release(self._held)
        self._held = 0


def answer_bound(request: Request) -> AnswerBound:
    """The bound of a listing request to the app (``max_answer_bytes``, the walks' budget)."""
    state = request.app.state
    return AnswerBound(state.settings.max_answer_bytes, getattr(state, "walks", None))
