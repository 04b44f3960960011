"""Connection-level guards: the Host allow-list, uvicorn timeouts for connections that never send
a request head or stop reading, and the per-process bounds on walks — over real HTTP on 127.0.0.1."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import requests
from sqlalchemy import create_engine
from support.consumer_helpers import dataset, run_event
from support.uvicorn_thread import served
from support.waiting import wait_until

from airflow_lineage_provider.consumer import create_app
from airflow_lineage_provider.consumer.limits.hosts import host_name, serve_hosts
from airflow_lineage_provider.consumer.security.access import Access

pytest_plugins = ("support.consumer_fixtures",)


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


@pytest.mark.parametrize(
    ("header", "name"),
    [
        ("localhost:6580", "localhost"),
        ("[::1]:6580", "::1"),
        ("127.0.0.1", "127.0.0.1"),
        ("Lineage.Internal", "lineage.internal"),
    ],
)
def test_host_names_are_read_without_the_port(header: str, name: str) -> None:
    assert host_name(header) == name


def test_a_request_for_an_unknown_host_name_is_refused(store_url: str) -> None:
    hosts = serve_hosts("127.0.0.1", ["lineage.internal"])
    assert hosts == ("localhost", "127.0.0.1", "::1", "lineage.internal")
    with served(create_app(store_url=store_url, anonymous=Access.ADMIN, allowed_hosts=hosts)) as url:
        port = _port(url)
        for host, code in (
            (f"127.0.0.1:{port}", 200),
            (f"localhost:{port}", 200),
            (f"lineage.internal:{port}", 200),
            (f"attacker.example:{port}", 400),  # a DNS-rebinding page sends its own name
            ("", 400),
        ):
            answer = requests.get(f"{url}/api/v1/namespaces", headers={"Host": host}, timeout=10)
            assert answer.status_code == code, (host, answer.text)
        refused = requests.get(f"{url}/api/v1/namespaces", headers={"Host": "attacker.example"}, timeout=10)
        assert refused.json()["detail"].startswith("this consumer does not answer to the host 'attacker.example'")
        assert "--allowed-host attacker.example" in refused.json()["detail"]
        # Allowed values are remembered, refused ones never: asked again, each answer is the same.
        for host, code in ((f"127.0.0.1:{port}", 200), (f"attacker.example:{port}", 400), ("", 400)):
            answer = requests.get(f"{url}/api/v1/namespaces", headers={"Host": host}, timeout=10)
            assert answer.status_code == code, (host, answer.text)


def test_any_host_is_answered_when_asked_for_and_wildcard_binds_add_this_machines_names() -> None:
    assert "*" in serve_hosts("127.0.0.1", ["*"])
    everywhere = serve_hosts("0.0.0.0")
    assert socket.gethostname().lower() in everywhere and "0.0.0.0" not in everywhere


def test_idle_and_headless_connections_are_bounded_by_uvicorns_own_settings(store_url: str) -> None:
    """A request head is not timed by the consumer (ASGI sees a request only once its head arrived): what bounds
    connections that never send one is uvicorn's ``limit_concurrency`` (``serve --limit-concurrency``: past it,
    503), and a kept-alive connection idle after an answer is closed after ``timeout_keep_alive``."""
    app = create_app(store_url=store_url, anonymous=Access.ADMIN)
    request = b"GET /api/v1/namespaces HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    with served(app, keep_alive_seconds=0.5, limit_concurrency=3) as url:

        def answer_to_a_new_connection() -> tuple[socket.socket, bytes]:
            connection = socket.create_connection(("127.0.0.1", _port(url)), timeout=10)
            connection.sendall(request)
            return connection, connection.recv(65536)

        def refused() -> bool:
            connection, answer = answer_to_a_new_connection()
            connection.close()
            return answer.startswith(b"HTTP/1.1 503")

        def answered() -> socket.socket | None:
            connection, answer = answer_to_a_new_connection()
            if answer.startswith(b"HTTP/1.1 200"):
                return connection
            connection.close()
            return None

        silent = socket.create_connection(("127.0.0.1", _port(url)))
        trickle = socket.create_connection(("127.0.0.1", _port(url)))
        trickle.sendall(b"GET /api/v1/namespaces HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # never ends the head
        # A third connection is refused, not queued, once uvicorn holds the two: they hold no more.
        wait_until(refused, "a third connection was never refused while two others held their places")
        silent.close()
        kept = wait_until(answered, "no place was freed when a connection closed")  # answered as always
        # Idle after its answer: closed by uvicorn's keep-alive timeout (within the socket's own 10 s).
        assert kept.recv(1024) == b""
        kept.close()
        trickle.close()


def _wide_store(app: Any, datasets: int, fields: int) -> None:
    """One job writing ``datasets`` datasets of ``fields`` columns: a walk answer of many MB."""
    event = run_event("COMPLETE", "widen", outputs=[dataset("wide_0", fields=["a"])])
    schema = event["outputs"][0]["facets"]["schema"]
    columns = [{"name": f"column_{i}_with_a_longer_name", "type": "VARCHAR"} for i in range(fields)]
    event["outputs"] = [
        {"namespace": "warehouse", "name": f"wide_{d}", "facets": {"schema": {**schema, "fields": columns}}}
        for d in range(datasets)
    ]
    with TestClientFor(app) as client:
        assert client.post("/api/v1/lineage", json=event).status_code == 201


@contextmanager
def TestClientFor(app: Any) -> Iterator[Any]:
    from fastapi.testclient import TestClient

    with TestClient(app) as client:
        yield client


def test_answers_a_client_does_not_read_are_bounded_and_dropped_when_it_stalls(tmp_path: Path) -> None:
    app = create_app(
        store_url=f"sqlite:///{tmp_path / 'lineage.db'}",
        anonymous=Access.ADMIN,
        walk_answer_bytes=1024 * 1024,
        stall_seconds=1.0,
    )
    _wide_store(app, datasets=40, fields=5000)
    path = "/api/v1/lineage?nodeId=job:pipelines:widen&depth=1"
    with served(app) as url:
        whole = requests.get(url + path, timeout=30)
        assert whole.status_code == 200 and len(whole.content) > 8_000_000
        reader = socket.create_connection(("127.0.0.1", _port(url)))
        reader.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        reader.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())  # and reads nothing
        wait_until(lambda: app.state.walks.held_bytes, "the unread answer was never held")
        busy = requests.get(url + path, timeout=30)  # the unread answer holds the budget
        assert busy.status_code == 503, busy.status_code
        assert busy.headers["retry-after"] == "5" and "still being sent" in busy.json()["detail"]
        wait_until(lambda: app.state.walks.held_bytes == 0, "the stalled answer was never abandoned and freed")
        assert requests.get(url + path, timeout=30).status_code == 200
        reader.close()


@pytest.mark.postgres
def test_walks_past_the_concurrency_bound_wait_and_past_the_queue_get_503(pg_store_url: str) -> None:
    app = create_app(store_url=pg_store_url, anonymous=Access.ADMIN, max_concurrent_walks=1, max_waiting_walks=1)
    with TestClientFor(app) as client:
        assert client.post("/api/v1/lineage", json=run_event("COMPLETE", "walked")).status_code == 201
    locker = create_engine(pg_store_url)
    path = "/api/v1/lineage?nodeId=job:pipelines:walked&depth=1"
    with served(app) as url:
        conn = locker.connect()
        transaction = conn.begin()
        conn.exec_driver_sql("LOCK TABLE lineage_nodes IN ACCESS EXCLUSIVE MODE")  # every walk now blocks
        answers: list[int] = []
        walkers = [
            threading.Thread(target=lambda: answers.append(requests.get(url + path, timeout=60).status_code))
            for _ in range(2)
        ]
        for admitted, walker in enumerate(walkers, start=1):  # one takes the only turn, one waits for it
            walker.start()
            wait_until(lambda n=admitted: app.state.walks.admitted == n, f"walk {admitted} was never admitted")
        refused = requests.get(url + path, timeout=10)
        assert refused.status_code == 503 and refused.headers["retry-after"] == "5"
        assert "1 lineage walks are running and 1 waiting" in refused.json()["detail"]
        transaction.rollback()
        conn.close()
        for walker in walkers:
            walker.join(60)
        assert answers == [200, 200]
        assert requests.get(url + path, timeout=10).status_code == 200
    locker.dispose()


def test_a_body_that_stops_arriving_is_answered_408_and_one_in_parts_is_read_whole(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over real HTTP: a sender that stops mid-body gets 408 once no part came for the idle bound; one whose
    body arrives in several parts (each within the bound) is stored."""
    from airflow_lineage_provider.consumer.ingest import request_body

    monkeypatch.setattr(request_body, "BODY_IDLE_SECONDS", 0.5)
    body = json.dumps(run_event("START", "slow_sender")).encode()
    with served(create_app(store_url=store_url, anonymous=Access.ADMIN)) as url:
        head = "POST /api/v1/lineage HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        with socket.create_connection(("127.0.0.1", _port(url)), timeout=10) as whole:
            whole.sendall(f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body)  # one write
            assert whole.recv(4096).startswith(b"HTTP/1.1 201")
        with socket.create_connection(("127.0.0.1", _port(url)), timeout=10) as stalled:
            stalled.sendall(f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body[:10])
            answer = stalled.recv(4096)
            assert answer.startswith(b"HTTP/1.1 408"), answer
        with socket.create_connection(("127.0.0.1", _port(url)), timeout=10) as parted:
            parted.sendall(f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body[:10])
            time.sleep(0.2)  # a real pause between two parts, within the idle bound
            parted.sendall(body[10:])
            answer = parted.recv(4096)
            assert answer.startswith(b"HTTP/1.1 201"), answer
