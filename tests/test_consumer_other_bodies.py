"""Bodies sent to routes other than ingest are small and arrive within the upload deadline, whoever sends them:
FastAPI reads a declared body before the credential check, so the bound has to come first (over real HTTP)."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from support.consumer_helpers import LiveServer, run_event

from airflow_lineage_provider.consumer import create_app
from airflow_lineage_provider.consumer.limits.other_bodies import OTHER_BODY_BYTES
from airflow_lineage_provider.consumer.security.access import Access, ApiKey

pytest_plugins = ("support.consumer_fixtures",)

WRITE = "producers-write-5f1c2a9b"


@pytest.fixture
def server(store_url: str) -> Iterator[tuple[Any, str]]:
    app = create_app(store_url=store_url, keys=(ApiKey("producers", Access.WRITE, WRITE),), upload_seconds=1.0)
    with LiveServer(app) as live:
        yield app, live.url
    app.state.store.dispose()


def _read_answer(raw: socket.socket, seconds: float) -> bytes:
    raw.settimeout(0.05)
    answer, deadline = b"", time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            chunk = raw.recv(65536)
        except TimeoutError:
            if answer:
                break
            continue
        if not chunk:
            break
        answer += chunk
    return answer


def test_a_large_body_to_a_tag_route_is_refused_before_the_credential_check(server: tuple[Any, str]) -> None:
    _app, url = server
    body = json.dumps({"description": "x" * (2 * OTHER_BODY_BYTES)})
    anonymous = requests.put(f"{url}/api/v1/tags/pii", data=body, headers={"Content-Type": "application/json"})
    assert anonymous.status_code == 413, anonymous.text
    assert anonymous.json()["detail"] == f"the body is larger than this route accepts ({OTHER_BODY_BYTES} bytes)"
    assert anonymous.headers["connection"] == "close"

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
        for _ in range(3):
            yield b" " * OTHER_BODY_BYTES

    chunked = requests.put(f"{url}/api/v1/tags/pii", data=chunks(), headers={"X-API-Key": WRITE})
    assert chunked.status_code == 413
    small = requests.put(f"{url}/api/v1/tags/pii", json={"description": "personal data"}, headers={"X-API-Key": WRITE})
    assert small.status_code == 200 and small.json()["description"] == "personal data"
    assert requests.put(f"{url}/api/v1/tags/pii", json={"description": "x"}).status_code == 401  # small: auth


def test_a_trickling_body_to_another_route_is_dropped_at_the_upload_deadline(server: tuple[Any, str]) -> None:
    _app, url = server
    port = int(url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        raw.sendall(
            b"PUT /api/v1/tags/pii HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: 60000\r\n\r\n{"
        )
        answer = b""
        deadline = time.monotonic() + 20
        while not answer and time.monotonic() < deadline:
            try:
                raw.sendall(b" ")  # a byte now and then: never idle for long
            except OSError:
                break
            answer = _read_answer(raw, 0.3)
    assert answer.startswith(b"HTTP/1.1 408"), answer
    assert b"did not arrive within 1 s (upload_seconds)" in answer and b"connection: close" in answer.lower()


def test_ingest_bodies_are_not_held_to_the_small_bound(server: tuple[Any, str]) -> None:
    _app, url = server
    events = [run_event("START", f"big_{index}") for index in range(200)]
    for event in events:
        event["run"]["facets"] = {"padding": {"text": "x" * 2000}}
    body = json.dumps(events)
    assert len(body) > 4 * OTHER_BODY_BYTES
    answer = requests.post(
        f"{url}/api/v1/lineage/batch", data=body, headers={"X-API-Key": WRITE, "Content-Type": "application/json"}
    )
    assert answer.status_code == 200, answer.text[:300]
    assert answer.json()["successful"] == 200


def test_a_tag_description_with_nul_is_refused(server: tuple[Any, str]) -> None:
    _app, url = server
    answer = requests.put(f"{url}/api/v1/tags/pii", json={"description": "a\x00b"}, headers={"X-API-Key": WRITE})
    assert answer.status_code == 400, answer.text
    assert "description" in answer.json()["detail"]
