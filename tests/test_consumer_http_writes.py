"""``serve``'s HTTP protocol writes a response's head together with its first body part (http_protocol.py's
HeadWithBody), over a real uvicorn on 127.0.0.1: one write per small answer, and every kind of answer intact —
a body, none (HEAD, 204), a stream whose parts look like heads, an interim 100 Continue, a closing connection."""

from __future__ import annotations

import http.client
import socket
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from support.uvicorn_thread import served

from airflow_lineage_provider.consumer.http_protocol import guarded_protocol

LOOKALIKE = b"HTTP/1.1 200 OK\r\n\r\n"  # a body part that looks like a response head


async def small(request: Request) -> Response:
    return JSONResponse({"status": "stored"}, status_code=201)


async def empty(request: Request) -> Response:
    return Response(status_code=204)


async def stream(request: Request) -> Response:
    async def parts() -> AsyncIterator[bytes]:
        yield LOOKALIKE
        yield b"middle"
        yield LOOKALIKE

    return StreamingResponse(parts(), media_type="text/plain")


async def echo(request: Request) -> Response:
    return Response(await request.body(), media_type="application/octet-stream")


APP = Starlette(
    routes=[
        Route("/small", small, methods=["GET", "HEAD"]),
        Route("/empty", empty),
        Route("/stream", stream),
        Route("/echo", echo, methods=["POST"]),
    ]
)


class _CountedWrites:
    """The real transport, counting its writes (a spy: every write still goes out)."""

    writes: list[bytes] = []

    def __init__(self, transport: Any) -> None:
        self._transport = transport

    def write(self, data: bytes) -> None:
        _CountedWrites.writes.append(bytes(data))
        self._transport.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


def _counting_protocol() -> type[Any]:
    base = guarded_protocol(10.0, 30.0)

    class Counting(base):  # type: ignore[misc, valid-type]
        def connection_made(self, transport: Any) -> None:
            super().connection_made(_CountedWrites(transport))

    return Counting


def test_each_kind_of_answer_arrives_whole_and_a_small_one_in_one_write() -> None:
    _CountedWrites.writes = []
    with served(APP, protocol=_counting_protocol()) as url:
        connection = http.client.HTTPConnection("127.0.0.1", int(url.rsplit(":", 1)[1]), timeout=10)
        connection.request("GET", "/small")
        answer = connection.getresponse()
        assert (answer.status, answer.read()) == (201, b'{"status":"stored"}')
        assert len(_CountedWrites.writes) == 1 and _CountedWrites.writes[0].endswith(b'{"status":"stored"}')

        connection.request("HEAD", "/small")
        answer = connection.getresponse()
        assert (answer.status, answer.read(), answer.getheader("content-length")) == (201, b"", "19")
        connection.request("GET", "/empty")
        answer = connection.getresponse()
        assert (answer.status, answer.read()) == (204, b"")
        connection.request("GET", "/stream")
        answer = connection.getresponse()
        assert (answer.status, answer.read()) == (200, LOOKALIKE + b"middle" + LOOKALIKE)
        connection.request("POST", "/echo", body=b"x" * 200_000, headers={"Connection": "close"})
        answer = connection.getresponse()
        assert (answer.status, len(answer.read()), answer.getheader("connection")) == (200, 200_000, "close")
        connection.close()


def test_an_interim_100_continue_is_sent_at_once() -> None:
    """A client that waits for ``100 Continue`` before sending its body must get it before any answer."""
    with served(APP) as url:
        with socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])), timeout=10) as sock:
            sock.sendall(b"POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
            interim = sock.recv(4096)
            assert interim.startswith(b"HTTP/1.1 100 Continue")
            sock.sendall(b"hello")
            answer = b""
            while not answer.endswith(b"hello"):
                part = sock.recv(4096)
                assert part, f"the connection closed before the answer was whole: {answer!r}"
                answer += part
            assert answer.startswith(b"HTTP/1.1 200 OK")
