"""StalledReaders (the app's send deadline, stalled_readers.py) over a real uvicorn on 127.0.0.1: every kind of
answer passes through it intact; an answer whose client reads nothing is abandoned once a part waits past
``stall_seconds`` (the handler's ``finally`` runs, the connection is closed), one read slowly but steadily is not."""

from __future__ import annotations

import http.client
import logging
import socket
import time
from collections.abc import AsyncIterator

import pytest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send
from support.uvicorn_thread import served
from support.waiting import wait_until

from airflow_lineage_provider.consumer.limits.stalled_readers import StalledReaders

PART = 256 * 1024
PARTS = 64  # 16 MiB: far more than the socket buffers on both ends hold
TOTAL = PART * PARTS
#: Per big answer: whether its handler's ``finally`` ran, and how many parts it handed over.
ENDED: list[int] = []


async def small(request: Request) -> Response:
    return JSONResponse({"status": "stored"}, status_code=201)


async def empty(request: Request) -> Response:
    return Response(status_code=204)


async def echo(request: Request) -> Response:
    return Response(await request.body(), media_type="application/octet-stream")


class PartedAnswer(Response):
    """:data:`PARTS` parts of :data:`PART` bytes, sent one by one as the consumer's walk answers are."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        sent = 0
        try:
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"%d" % TOTAL)]})
            for index in range(PARTS):
                await send({"type": "http.response.body", "body": b"x" * PART, "more_body": index < PARTS - 1})
                sent += 1
        finally:
            ENDED.append(sent)


async def big(request: Request) -> Response:
    return PartedAnswer()


async def stream(request: Request) -> Response:
    async def parts() -> AsyncIterator[bytes]:
        yield b"HTTP/1.1 200 OK\r\n\r\n"  # a part that looks like a response head
        yield b"middle"

    return StreamingResponse(parts(), media_type="text/plain")


def _app(stall_seconds: float) -> Starlette:
    routes = [
        Route("/small", small, methods=["GET", "HEAD"]),
        Route("/empty", empty),
        Route("/echo", echo, methods=["POST"]),
        Route("/big", big),
        Route("/stream", stream),
    ]
    return Starlette(routes=routes, middleware=[Middleware(StalledReaders, stall_seconds=stall_seconds)])


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def test_each_kind_of_answer_arrives_whole() -> None:
    with served(_app(5.0)) as url:
        connection = http.client.HTTPConnection("127.0.0.1", _port(url), timeout=10)
        connection.request("GET", "/small")
        answer = connection.getresponse()
        assert (answer.status, answer.read()) == (201, b'{"status":"stored"}')
        connection.request("HEAD", "/small")
        answer = connection.getresponse()
        assert (answer.status, answer.read(), answer.getheader("content-length")) == (201, b"", "19")
        connection.request("GET", "/empty")
        answer = connection.getresponse()
        assert (answer.status, answer.read()) == (204, b"")
        connection.request("GET", "/big")
        answer = connection.getresponse()
        assert (answer.status, len(answer.read())) == (200, TOTAL)
        connection.request("GET", "/stream")
        answer = connection.getresponse()
        assert (answer.status, answer.read()) == (200, b"HTTP/1.1 200 OK\r\n\r\nmiddle")
        connection.request("POST", "/echo", body=b"x" * 200_000, headers={"Connection": "close"})
        answer = connection.getresponse()
        assert (answer.status, len(answer.read()), answer.getheader("connection")) == (200, 200_000, "close")
        connection.close()


def test_an_interim_100_continue_is_sent_at_once() -> None:
    """A client that waits for ``100 Continue`` before sending its body must get it before any answer."""
    with served(_app(5.0)) as url, socket.create_connection(("127.0.0.1", _port(url)), timeout=10) as sock:
        sock.sendall(b"POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
        assert sock.recv(4096).startswith(b"HTTP/1.1 100 Continue")
        sock.sendall(b"hello")
        answer = b""
        while not answer.endswith(b"hello"):
            part = sock.recv(4096)
            assert part, f"the connection closed before the answer was whole: {answer!r}"
            answer += part
        assert answer.startswith(b"HTTP/1.1 200 OK")


def test_an_answer_nobody_reads_is_abandoned_and_one_read_slowly_is_not(caplog: pytest.LogCaptureFixture) -> None:
    ENDED.clear()
    caplog.set_level(logging.INFO, logger="airflow_lineage_provider.consumer.limits.stalled_readers")
    with served(_app(1.0)) as url:
        stalled = socket.create_connection(("127.0.0.1", _port(url)))
        stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        stalled.sendall(b"GET /big HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")  # and reads nothing
        wait_until(lambda: ENDED and "the client read nothing" in caplog.text, "the stalled answer was never abandoned")
        assert ENDED[0] < PARTS  # its handler stopped at the send that waited, and its finally ran
        assert "the client read nothing of the answer for 1 s" in caplog.text

        stalled.close()
    # A reader taking 128 KiB every 0.05 s, 2.5 MB/s, gets the whole answer: each part is taken within the deadline.
    received = bytearray()
    with served(_app(3.0)) as url, socket.create_connection(("127.0.0.1", _port(url)), timeout=10) as slow:
        slow.sendall(b"GET /big HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        started = time.monotonic()
        while time.monotonic() - started < 2.0:
            part = slow.recv(128 * 1024)
            assert part
            received += part
            time.sleep(0.05)  # a real pause: this client reads slowly
        _read_all(slow, received)
    assert len(received) > TOTAL  # the head and every part
    assert ENDED[1] == PARTS


def _read_all(sock: socket.socket, into: bytearray) -> None:
    while part := sock.recv(1 << 20):
        into += part
