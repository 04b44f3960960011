"""API-key check for writes: ``X-API-Key: <key>`` or ``Authorization: Bearer <key>``.

The Bearer form is what openlineage-python's HTTP transport sends with ``auth: {type: api_key}``.
"""

from __future__ import annotations

import hmac

from fastapi import HTTPException, Request, status


def presented_key(request: Request) -> str | None:
    """The key a request carries, if any."""
    key = request.headers.get("x-api-key")
    if key:
        return key
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


def require_api_key(request: Request) -> None:
    """FastAPI dependency: 401 unless the configured key is presented (no key configured: allow)."""
    expected: str | None = request.app.state.settings.api_key
    if not expected:
        return
    given = presented_key(request)
    if given is None or not hmac.compare_digest(given.encode(), expected.encode()):
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            detail="this consumer needs an API key for writes: send X-API-Key: <key> or Authorization: Bearer <key>",
            headers={"WWW-Authenticate": "Bearer"},
        )
