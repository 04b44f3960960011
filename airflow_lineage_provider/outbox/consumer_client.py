"""Sending events to an OpenLineage HTTP consumer, and reading what it answered.

One request carries a batch (``POST <url>/<endpoint>/batch`` with a JSON array); a consumer without a
batch endpoint (404/405) gets one ``POST <url>/<endpoint>`` per event from then on. Each answer is read as
an :class:`~.outcomes.Answer` (accepted, unavailable, failed or rejected: see :mod:`.outcomes`), and
:meth:`ConsumerClient.deliver` turns the answers into one :class:`Outcome` per event, taking apart a batch
the consumer failed as a whole (:mod:`.isolation`). A 207 is read per event from its documented
``results`` list (:func:`_per_event_results`), else its events are re-sent one by one (a consumer that
already stored some sees them twice; none is lost). 401 and 403 mean the consumer refuses this client at
all: :class:`ConsumerRefused` stops shipping and leaves the events pending.
"""

from __future__ import annotations

import gzip
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import requests
from urllib3.exceptions import NewConnectionError

from airflow_lineage_provider.defaults import LINEAGE_ENDPOINT
from airflow_lineage_provider.outbox.isolation import PoisonPolicy, deliver_batch
from airflow_lineage_provider.outbox.outcomes import (
    ACCEPTED,
    DEAD,
    DELIVERED,
    FAILED,
    REJECTED,
    RETRY,
    UNAVAILABLE,
    Answer,
    Outcome,
    answer_of_status,
)
from airflow_lineage_provider.reporting import warn_once

__all__ = ["DEAD", "DELIVERED", "RETRY", "ConsumerClient", "ConsumerConfig", "ConsumerRefused", "Outcome"]


class ConsumerRefused(Exception):
    """The consumer rejects this client as a whole (bad API key, wrong URL): shipping stops."""

    def __init__(self, message: str, status_code: int | None) -> None:
        super().__init__(message)
        self.status_code = status_code


@dataclass
class ConsumerConfig:
    """Where and how to send events."""

    url: str
    """Base URL of the consumer, e.g. ``http://marquez:5000``."""

    endpoint: str = LINEAGE_ENDPOINT
    """Path of the lineage endpoint below ``url``; batches go to ``<endpoint>/batch``."""

    api_key: str | None = None
    """Sent as ``Authorization: Bearer <api_key>`` when set."""

    timeout: float = 10.0
    """Seconds to wait for each response."""

    compress: bool = False
    """Gzip request bodies (``Content-Encoding: gzip``); turned off for the session if the consumer refuses them."""

    verify: bool | str = True
    """Verify TLS certificates (or the path of a CA bundle)."""

    @classmethod
    def from_dict(cls, params: dict[str, Any]) -> ConsumerConfig:
        url = str(params.get("url") or "").strip().rstrip("/")
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"consumer URL {url!r} must start with http:// or https://")
        try:
            timeout = float(params.get("timeout", 10.0))
        except (TypeError, ValueError):
            raise ValueError(f"consumer timeout {params.get('timeout')!r} is not a number of seconds") from None
        verify = params.get("verify", True)
        if isinstance(verify, str) and verify.strip().lower() in ("true", "false", "1", "0", "yes", "no"):
            verify = verify.strip().lower() in ("true", "1", "yes")
        return cls(
            url=url,
            endpoint=str(params.get("endpoint") or LINEAGE_ENDPOINT).strip("/"),
            api_key=params.get("api_key") or None,
            timeout=timeout,
            compress=str(params.get("compress", False)).strip().lower() in ("true", "1", "yes", "on"),
            verify=verify,
        )

    @property
    def single_url(self) -> str:
        return f"{self.url}/{self.endpoint}"

    @property
    def batch_url(self) -> str:
        return f"{self.single_url}/batch"


class ConsumerClient:
    """A session with one consumer; remembers whether it has a batch endpoint and takes gzip.

    :meth:`send_batch` and :meth:`send_one` make one request each and read the answer
    (:class:`~.outcomes.Answer`); :meth:`deliver` settles a batch, isolating its poison events
    (:mod:`.isolation`). Texts that reach the outbox or the log never hold the API key.
    """

    def __init__(self, config: ConsumerConfig, session: requests.Session | None = None) -> None:
        self.config = config
        self.session = session or requests.Session()
        self.session.headers["Content-Type"] = "application/json"
        if config.api_key:
            self.session.headers["Authorization"] = f"Bearer {config.api_key}"
        self.batch_supported: bool | None = None
        self.compress = config.compress
        self.requests_sent = 0

    def close(self) -> None:
        self.session.close()

    def deliver(
        self, payloads: Sequence[str], poison: PoisonPolicy | None = None, earlier_failures: int = 0
    ) -> list[Outcome]:
        """Send events (JSON strings, in order); one :class:`Outcome` per event, in the same order.

        See :func:`~.isolation.deliver_batch` for what happens when the consumer fails the batch.
        """
        return deliver_batch(self, payloads, poison, earlier_failures)

    def send_batch(self, payloads: list[str]) -> Answer | None:
        """``POST <endpoint>/batch`` with ``payloads``; ``None`` when the consumer has no batch endpoint
        (404/405 before any batch succeeded): from then on :meth:`send_one` is the way."""
        try:
            response = self._post(self.config.batch_url, "[" + ",".join(payloads) + "]")
        except requests.RequestException as error:
            return self._answer_of_error(error)
        code = response.status_code
        if code in (404, 405) and self.batch_supported is not True:
            self.batch_supported = False
            return None
        self._refuse_if_unauthorized(response)
        if 200 <= code < 300:
            self.batch_supported = True
            per_event = _per_event_results(response, len(payloads), self.config.batch_url)
            return Answer(ACCEPTED, code, per_event=None if per_event is None else self._without_keys(per_event))
        if code == 404:  # the batch endpoint worked before: the consumer is being redeployed
            return Answer(UNAVAILABLE, code, self._describe(response))
        return answer_of_status(code, self._describe(response))

    def send_one(self, payload: str) -> Answer:
        """``POST <endpoint>`` with one event. Raises :class:`ConsumerRefused` when the endpoint does not exist."""
        try:
            response = self._post(self.config.single_url, payload)
        except requests.RequestException as error:
            return self._answer_of_error(error)
        code = response.status_code
        self._refuse_if_unauthorized(response)
        if code in (404, 405):
            raise ConsumerRefused(
                f"{self.config.single_url} does not exist ({self._describe(response)}); check the URL and endpoint",
                code,
            )
        if 200 <= code < 300:
            return Answer(ACCEPTED, code)
        return answer_of_status(code, self._describe(response))

    def _post(self, url: str, body: str) -> requests.Response:
        data = body.encode("utf-8")
        headers = {}
        if self.compress:
            data, headers = gzip.compress(data, compresslevel=5), {"Content-Encoding": "gzip"}
        self.requests_sent += 1
        response = self.session.post(url, data=data, headers=headers, timeout=self.config.timeout,
                                     verify=self.config.verify)  # fmt: skip
        if self.compress and response.status_code in (400, 415):
            self.requests_sent += 1
            plain = self.session.post(url, data=body.encode("utf-8"), timeout=self.config.timeout,
                                      verify=self.config.verify)  # fmt: skip
            if plain.status_code != response.status_code:
                self.compress = False
                warn_once(f"Lineage: {self.config.url} refuses gzip bodies; sending them uncompressed from now on")
            return plain
        return response

    def _refuse_if_unauthorized(self, response: requests.Response) -> None:
        if response.status_code in (401, 403):
            raise ConsumerRefused(
                f"{self.config.url} refused the events ({self._describe(response)}); check the API key",
                response.status_code,
            )

    def _describe(self, response: requests.Response) -> str:
        return self._without_key(f"HTTP {response.status_code}: {response.text[:2000]}")

    def _answer_of_error(self, error: requests.RequestException) -> Answer:
        detail = self._without_key(f"{type(error).__name__}: {error}")
        if isinstance(error, requests.Timeout) or _never_reached(error):
            return Answer(UNAVAILABLE, None, detail)
        if isinstance(error, (requests.ConnectionError, requests.exceptions.ChunkedEncodingError)):
            return Answer(FAILED, None, detail)  # dropped while the consumer had the request: it may be to blame
        return Answer(UNAVAILABLE, None, detail)

    def _without_key(self, text: str) -> str:
        """``text`` with the API key blanked, in case the consumer echoes the request's headers."""
        key = self.config.api_key
        return text.replace(key, "***") if key else text

    def _without_keys(self, outcomes: list[Outcome | None]) -> list[Outcome | None]:
        if not self.config.api_key:
            return outcomes
        return [o if o is None else replace(o, detail=self._without_key(o.detail)) for o in outcomes]


def _never_reached(error: requests.RequestException) -> bool:
    """Whether the request never reached the consumer (refused, unknown host, TLS or proxy failure)."""
    if isinstance(error, (requests.exceptions.SSLError, requests.exceptions.ProxyError)):
        return True
    cause = error.args[0] if error.args else None
    return isinstance(getattr(cause, "reason", cause), NewConnectionError)


def _outcome_of_item(item: dict[str, Any], code: int, listed_error: str) -> Outcome:
    """One per-event result (``{"index": i, "status": 201, "error": ...}``) of a 207 answer. ``listed_error``
    is the event's error as the body's ``errors`` list gives it, for results that carry only a status."""
    status = item["status"]
    if 200 <= status < 300:
        return Outcome(DELIVERED, status)
    detail = str(item.get("error") or listed_error or f"HTTP {status} (in a {code} response)")
    return Outcome(DEAD if answer_of_status(status, "").kind == REJECTED else RETRY, status, detail)


def _readable(item: Any, count: int) -> bool:
    return (
        isinstance(item, dict)
        and isinstance(item.get("index"), int)
        and 0 <= item["index"] < count
        and isinstance(item.get("status"), int)
        and not isinstance(item["status"], bool)
    )


def _per_event_results(response: requests.Response, count: int, url: str = "") -> list[Outcome | None] | None:
    """Per-event outcomes of a 2xx batch answer; ``None`` when it accepted everything (any 2xx but 207 without a
    ``results`` list: a consumer answering a partial batch with another 2xx, as this package's does with Feast's
    batch codes, is read by its ``results`` too).

    A 207 is read in the shape the OpenLineage-compatible consumers document, this package's included:
    ``{"results": [{"index": i, "status": 201 | 400, "error": ...}, ...], "errors": [{"index": i, "error":
    ...}]}`` (a result without its own error text takes the one ``errors`` lists). An event without a readable
    result gets ``None``: it is re-sent on its own. A 207 in any other shape is logged once, and all its events
    are re-sent on their own (a consumer that stored some sees them twice; none is lost).
    """
    code = response.status_code
    try:
        body = response.json() if response.content else None
    except ValueError:
        body = None
    results = body.get("results") if isinstance(body, dict) else None
    if code != 207 and not isinstance(results, list):
        return None
    outcomes: list[Outcome | None] = [None] * count
    if not isinstance(results, list):
        warn_once(
            f"Lineage shipping: {url or 'the consumer'} answered {code} without a 'results' list of per-event "
            "statuses; the batch's events are sent again one by one"
        )
        return outcomes
    listed = _listed_errors(body)
    unreadable = 0
    for item in results:
        if _readable(item, count):
            outcomes[item["index"]] = _outcome_of_item(item, code, listed.get(item["index"], ""))
        else:
            unreadable += 1
    if unreadable:
        warn_once(
            f"Lineage shipping: {url or 'the consumer'} answered {code} with per-event results this client cannot "
            "read (each needs an integer 'index' and 'status'); those events are sent again one by one"
        )
    return outcomes


def _listed_errors(body: Any) -> dict[int, str]:
    """``{index: error}`` from a body's ``errors`` list (``[{"index": i, "error": "..."}]``)."""
    errors = body.get("errors") if isinstance(body, dict) else None
    if not isinstance(errors, list):
        return {}
    return {
        e["index"]: str(e.get("error") or "")
        for e in errors
        if isinstance(e, dict) and isinstance(e.get("index"), int) and e.get("error")
    }
