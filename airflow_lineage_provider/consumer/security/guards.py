"""Guards: turn a request's credential into a :class:`~.access.Principal`, or refuse it with 401 or 403.

Two guards, one per way the consumer runs:

* :class:`KeyGuard` — standalone (``airflow-lineage serve``, ``create_app``): API keys with scopes;
  anonymous access only where the operator opted in.
* :class:`~airflow_lineage_provider.plugins.airflow_guard.AirflowGuard` — inside Airflow's API server:
  Airflow's JWT (Bearer header or the UI's session cookie) authorized by the configured auth manager, plus
  the same API keys for producers.

Both answer ``401`` when no usable credential is presented and ``403`` when the credential is known but
its scope (or the Airflow user's permission) does not cover the route. The routes never call a guard
themselves: they declare the one dependency of :mod:`.auth`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from fastapi import HTTPException, Request, status

from airflow_lineage_provider.consumer.security.access import ANONYMOUS, Access, KeyRing, Principal

#: What each level lets a caller do, for error messages.
ACTIONS: dict[Access, str] = {
    Access.PAGE: "open the lineage page",
    Access.READ: "read lineage",
    Access.WRITE: "ingest events or change tags",
    Access.ADMIN: "prune or reset the lineage store",
}
KEY_HEADERS = "X-API-Key: <key> or Authorization: Bearer <key>"


class Guard(Protocol):
    """Resolves and authorizes the credential of a request for one access level."""

    async def authorize(self, request: Request, access: Access) -> Principal:
        """The principal the request acts as; HTTPException 401 (no or unknown credential) or 403."""
        ...

    def login_url(self, request: Request) -> str | None:
        """Where a browser without a session logs in (None: the page asks for a key itself)."""
        ...

    @property
    def mode(self) -> str:
        """``key`` or ``airflow``: how the lineage page authenticates its API calls."""
        ...


#: What ``create_app(guard=...)`` takes: a guard class (or function) of the keys and the anonymous level.
GuardFactory = Callable[[KeyRing, "Access | None"], Guard]


def header_credential(request: Request) -> tuple[str, str] | None:
    """``("x-api-key", value)`` or ``("bearer", value)`` from the request's headers, or None."""
    key = request.headers.get("x-api-key")
    if key:
        return "x-api-key", key.strip()
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return "bearer", token.strip()
    return None


def unauthorized(detail: str) -> HTTPException:
    """A 401 with the ``WWW-Authenticate`` challenge clients expect."""
    return HTTPException(status.HTTP_401_UNAUTHORIZED, detail=detail, headers={"WWW-Authenticate": "Bearer"})


def forbidden(detail: str) -> HTTPException:
    """A 403: the caller is known and may not do this."""
    return HTTPException(status.HTTP_403_FORBIDDEN, detail=detail)


def key_principal(keys: KeyRing, secret: str, access: Access) -> Principal | None:
    """The principal of the key ``secret`` if it is one of ``keys`` (403 if its scope is too low), else None."""
    key = keys.match(secret)
    if key is None:
        return None
    if key.scope < access:
        raise forbidden(
            f"key {key.name!r} has scope {key.scope.label}; to {ACTIONS[access]} a key needs scope {access.label}"
        )
    return Principal(key.name, "key", key.namespaces)


class KeyGuard:
    """API keys with scopes, for the standalone consumer.

    ``anonymous`` is the level a request without a credential gets (None: none — every route but the
    page's static files needs a key). When no keys are configured a presented credential is ignored (as
    before keys existed); otherwise an unknown one is refused rather than downgraded to anonymous.
    """

    mode = "key"

    def __init__(self, keys: KeyRing, anonymous: Access | None = None) -> None:
        self.keys = keys
        self.anonymous = anonymous

    async def authorize(self, request: Request, access: Access) -> Principal:
        credential = header_credential(request) if self.keys else None
        if credential is not None:
            principal = key_principal(self.keys, credential[1], access)
            if principal is None:
                raise unauthorized(f"the key presented is not one this consumer knows: send {KEY_HEADERS}")
            return principal
        if access is Access.PAGE or (self.anonymous is not None and access <= self.anonymous):
            return ANONYMOUS
        if self.anonymous is not None:
            raise unauthorized(
                f"anonymous access here is limited to {self.anonymous.label}; to {ACTIONS[access]} send a key "
                f"with scope {access.label}: {KEY_HEADERS}"
            )
        raise unauthorized(
            f"this consumer needs a key with scope {access.label} to {ACTIONS[access]}: send {KEY_HEADERS}"
        )

    def login_url(self, request: Request) -> str | None:
        return None
