"""Sending events to an OpenLineage HTTP consumer, and reading what it answered per event.

One request carries a batch (``POST <url>/<endpoint>/batch`` with a JSON array); a consumer without a
batch endpoint (404/405) gets one ``POST <url>/<endpoint>`` per event from then on. Every event ends with
an :class:`Outcome`: delivered, retry (connection errors, timeouts, 408, 429, 5xx) or dead (any other
4xx; a batch rejected as a whole is split in halves until the offending events are found). A 207, or a
200 whose body says ``partial``, is read per event when the body has per-event results, else its
events are re-sent one by one (a consumer that already stored some sees them twice; none is lost).
401 and 403 mean the consumer refuses this client at all: :class:`ConsumerRefused` stops shipping and
leaves the events pending.
"""

from __future__ import annotations

import gzip
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import requests

from airflow_lineage_provider.reporting import warn_once

DELIVERED = "delivered"
RETRY = "retry"
DEAD = "dead"
_ACCEPTED_WORDS = {"accepted", "ok", "success", "created", "stored", "duplicate", "delivered"}
_RETRY_WORDS = {"retry", "transient", "unavailable", "timeout"}


@dataclass(frozen=True)
class Outcome:
    """What happened to one event: ``kind`` is delivered, retry or dead, with the consumer's answer."""

    kind: str
    status_code: int | None = None
    detail: str = ""


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

    endpoint: str = "api/v1/lineage"
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
            endpoint=str(params.get("endpoint") or "api/v1/lineage").strip("/"),
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


def _is_transient(status_code: int) -> bool:
    return status_code in (408, 425, 429) or status_code >= 500


def _text(response: requests.Response) -> str:
    return f"HTTP {response.status_code}: {response.text[:2000]}"


class ConsumerClient:
    """A session with one consumer; remembers whether it has a batch endpoint and takes gzip."""

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
                f"{self.config.url} refused the events ({_text(response)}); check the API key", response.status_code
            )

    def deliver(self, payloads: Sequence[str]) -> list[Outcome]:
        """Send events (JSON strings, in order); one :class:`Outcome` per event, in the same order."""
        if not payloads:
            return []
        if self.batch_supported is not False:
            return self._deliver_batch(list(payloads))
        return self._deliver_singly(list(payloads))

    def _deliver_batch(self, payloads: list[str]) -> list[Outcome]:
        try:
            response = self._post(self.config.batch_url, "[" + ",".join(payloads) + "]")
        except requests.RequestException as error:
            return [Outcome(RETRY, None, f"{type(error).__name__}: {error}")] * len(payloads)
        code = response.status_code
        if code in (404, 405) and self.batch_supported is not True:
            self.batch_supported = False  # no batch endpoint: one POST per event from now on
            return self._deliver_singly(payloads)
        self._refuse_if_unauthorized(response)
        if 200 <= code < 300:
            self.batch_supported = True
            per_event = _per_event_results(response, len(payloads))
            if per_event is None:
                return [Outcome(DELIVERED, code)] * len(payloads)
            resend = [i for i, outcome in enumerate(per_event) if outcome is None]
            for i, outcome in zip(resend, self._deliver_singly([payloads[i] for i in resend]), strict=True):
                per_event[i] = outcome
            return [outcome or Outcome(RETRY, code, "no answer") for outcome in per_event]
        if _is_transient(code):
            return [Outcome(RETRY, code, _text(response))] * len(payloads)
        if code == 404:  # the batch endpoint worked before: the consumer is being redeployed
            return [Outcome(RETRY, code, _text(response))] * len(payloads)
        if len(payloads) == 1:
            return [Outcome(DEAD, code, _text(response))]
        middle = len(payloads) // 2  # rejected as a whole: find the offending events
        first = self._deliver_batch(payloads[:middle])
        retry = next((outcome for outcome in first if outcome.kind == RETRY), None)
        if retry is not None:
            return first + [retry] * (len(payloads) - middle)  # failing now: keep the rest pending
        return first + self._deliver_batch(payloads[middle:])

    def _deliver_singly(self, payloads: list[str]) -> list[Outcome]:
        outcomes: list[Outcome] = []
        for index, payload in enumerate(payloads):
            try:
                response = self._post(self.config.single_url, payload)
            except requests.RequestException as error:
                retry = Outcome(RETRY, None, f"{type(error).__name__}: {error}")
                return outcomes + [retry] * (len(payloads) - index)
            code = response.status_code
            self._refuse_if_unauthorized(response)
            if code in (404, 405):
                raise ConsumerRefused(
                    f"{self.config.single_url} does not exist ({_text(response)}); check the URL and endpoint", code
                )
            if 200 <= code < 300:
                outcomes.append(Outcome(DELIVERED, code))
            elif _is_transient(code):
                retry = Outcome(RETRY, code, _text(response))
                return outcomes + [retry] * (len(payloads) - index)
            else:
                outcomes.append(Outcome(DEAD, code, _text(response)))
        return outcomes


def _outcome_of_item(item: Any, code: int) -> Outcome | None:
    """One per-event result of a 207-style body, or ``None`` when it cannot be read."""
    if not isinstance(item, dict):
        return None
    raw = item.get("status", item.get("statusCode", item.get("code")))
    detail = str(item.get("error") or item.get("detail") or item.get("message") or "")
    if isinstance(raw, int) or (isinstance(raw, str) and raw.isdigit()):
        status = int(raw)
        if 200 <= status < 300:
            return Outcome(DELIVERED, status)
        kind = RETRY if _is_transient(status) else DEAD
        return Outcome(kind, status, detail or f"HTTP {status} (in a {code} response)")
    if isinstance(raw, str):
        word = raw.strip().lower()
        if word in _ACCEPTED_WORDS:
            return Outcome(DELIVERED, code)
        if word in _RETRY_WORDS:
            return Outcome(RETRY, code, detail or word)
        return Outcome(DEAD, code, detail or word)
    return None


def _per_event_results(response: requests.Response, count: int) -> list[Outcome | None] | None:
    """Per-event outcomes of a 2xx batch answer; ``None`` when it accepted everything.

    Reads ``{"results": [{"index": i, "status": 201 | "accepted" | "rejected", "error": ...}, ...]}`` (also
    under ``events``/``items``, or a bare list). A partial answer without per-event results gives a list
    of ``None``: each of those events is then re-sent on its own.
    """
    code = response.status_code
    try:
        body = response.json() if response.content else None
    except ValueError:
        body = None
    partial = code == 207 or (
        isinstance(body, dict)
        and ("partial" in str(body.get("status", "")).lower() or int((body.get("summary") or {}).get("failed") or 0))
    )
    items = body if isinstance(body, list) else None
    if isinstance(body, dict):
        items = next((body[k] for k in ("results", "events", "items") if isinstance(body.get(k), list)), None)
    if not partial and not (items and any(isinstance(i, dict) and "status" in i for i in items)):
        return None
    outcomes: list[Outcome | None] = [None] * count
    for position, item in enumerate(items or []):
        index = item.get("index", position) if isinstance(item, dict) else position
        if isinstance(index, int) and 0 <= index < count:
            outcomes[index] = _outcome_of_item(item, code)
    return outcomes
