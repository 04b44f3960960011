"""The ``Host`` allow-list: requests addressed to a name the consumer does not serve get 400.

A web page can make a browser send requests to a consumer on the visitor's own machine by pointing its
own DNS name at ``127.0.0.1`` (DNS rebinding); the browser then treats the consumer's answers as the
page's own. The ``Host`` header still carries the page's name, so refusing unknown names closes that
door. ``airflow-lineage serve`` allows the address it listens on, ``localhost`` and the loopback
addresses, the machine's own names when it listens on every interface, and any ``--allowed-host``.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
from collections.abc import Iterable

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from airflow_lineage_provider.consumer.validation import shown

#: Names every consumer answers to: this machine only.
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
#: Addresses that mean "every interface".
WILDCARDS = ("0.0.0.0", "::", "")
#: Distinct allowed ``Host`` header values an app remembers (each a few bytes).
ALLOWED_HEADERS_KEPT = 1000


def host_name(header: str) -> str:
    """The name part of a ``Host`` header, lower case, without the port (``[::1]:6580`` → ``::1``)."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1 : header.find("]")] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def serve_hosts(bind: str, extra: Iterable[str] = ()) -> tuple[str, ...]:
    """The names ``serve`` allows when listening on ``bind``, plus ``extra`` (``*`` allows any)."""
    names = [*LOOPBACK_NAMES, host_name(bind)]
    if host_name(bind) in WILDCARDS:
        names += [socket.gethostname(), socket.getfqdn()]
        with contextlib.suppress(OSError):
            names += [str(info[4][0]) for info in socket.getaddrinfo(socket.gethostname(), None)]
    names += [host_name(name) if name != "*" else "*" for name in extra]
    return tuple(dict.fromkeys(name.lower() for name in names if name and name not in WILDCARDS))


def _normal(name: str) -> str:
    try:
        return str(ipaddress.ip_address(name))
    except ValueError:
        return name.rstrip(".")


class AllowedHosts:
    """ASGI middleware answering 400 to any HTTP request whose ``Host`` is not in ``hosts``."""

    def __init__(self, app: ASGIApp, hosts: Iterable[str]) -> None:
        self.app = app
        self.hosts = frozenset(_normal(host_name(name)) for name in hosts)
        #: ``Host`` header values seen allowed (clients send the same one on every request, so it is read as an IP
        #: address once); bounded, refused values are never kept.
        self._allowed: set[bytes] = set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket") and "*" not in self.hosts:
            raw = next((v for k, v in scope.get("headers", ()) if k == b"host"), b"")
            if raw not in self._allowed:
                header = raw.decode("latin-1")
                if _normal(host_name(header)) not in self.hosts:
                    await self._refuse(header, send)
                    return
                if len(self._allowed) < ALLOWED_HEADERS_KEPT:
                    self._allowed.add(raw)
        await self.app(scope, receive, send)

    async def _refuse(self, header: str, send: Send) -> None:
        name = host_name(header)
        detail = (
            f"this consumer does not answer to the host {shown(name)}: start it with --allowed-host "
            f"{name or 'NAME'} (or add the name to allowed_hosts) if clients reach it by that name"
        )
        response = JSONResponse({"detail": detail}, status_code=400)
        await response({"type": "http"}, _no_body, send)


async def _no_body() -> dict[str, object]:
    return {"type": "http.disconnect"}
