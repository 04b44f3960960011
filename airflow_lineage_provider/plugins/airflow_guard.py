"""The consumer's guard inside Airflow's API server: Airflow's JWT and auth manager, plus consumer API keys.

A request is resolved in this order:

1. ``X-API-Key``, or an ``Authorization: Bearer`` value that is one of the consumer's keys: that key
   (producers such as openlineage-python's HTTP transport send their key as a Bearer token);
2. any other ``Authorization: Bearer`` value: an Airflow JWT (from ``POST /auth/token``);
3. the Airflow UI's session cookie (``_token``) — for reads and the page only: a write or prune on a
   cookie alone is refused (403), so a page on another site cannot make a logged-in browser write.

The user is then authorized by the configured auth manager (SimpleAuthManager, FAB, Keycloak, ...) as on
Airflow's own asset endpoints — :data:`PERMISSIONS` is the table; docs/security.md explains it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from fastapi import HTTPException, Request
from fastapi.concurrency import run_in_threadpool

from airflow_lineage_provider.consumer.access import ANONYMOUS, Access, KeyRing, Principal
from airflow_lineage_provider.consumer.guards import ACTIONS, KEY_HEADERS, forbidden, header_credential, key_principal
from airflow_lineage_provider.consumer.guards import unauthorized as _unauthorized

if TYPE_CHECKING:
    from airflow.api_fastapi.auth.managers.base_auth_manager import BaseAuthManager, ResourceMethod
    from airflow.api_fastapi.auth.managers.models.base_user import BaseUser

log = logging.getLogger(__name__)

#: The Airflow permission each access level needs: a method on Assets (``is_authorized_asset``), the
#: resource Airflow's own API guards asset reads (GET), asset events (POST) and deletions (DELETE) with.
PERMISSIONS: dict[Access, ResourceMethod] = {
    Access.PAGE: "GET",
    Access.READ: "GET",
    Access.WRITE: "POST",
    Access.ADMIN: "DELETE",
}
_PERMISSION_NAMES = {"GET": "read", "POST": "create", "DELETE": "delete"}
COOKIE = "_token"  # airflow.api_fastapi.auth.managers.base_auth_manager.COOKIE_NAME_JWT_TOKEN
HOW_TO = (
    "log in to Airflow, or send Authorization: Bearer <a JWT from Airflow's POST /auth/token> "
    f"(producers: a consumer API key, {KEY_HEADERS})"
)


def _auth_manager() -> BaseAuthManager:
    from airflow.api_fastapi.app import get_auth_manager

    return get_auth_manager()


def _trusted_user(request: Request) -> BaseUser | None:
    """The user Airflow's own JWT-refresh middleware resolved from the cookie for this request, if any."""
    try:
        from airflow.api_fastapi.core_api.security import USER_INJECTED_BY_TRUSTED_MIDDLEWARE
    except ImportError:  # Airflow versions before the marker: resolve the cookie ourselves
        return None
    user = getattr(request.state, "user", None)
    trusted = getattr(request.state, "user_authenticated_via", None) is USER_INJECTED_BY_TRUSTED_MIDDLEWARE
    return user if trusted else None


class AirflowGuard:
    """Authenticates with Airflow's JWT and authorizes with the configured auth manager (module docstring).

    ``keys`` are the consumer's own API keys (``[lineage_provider] consumer_api_key`` and
    ``consumer_keys_file``); ``anonymous`` the level a request without a credential gets (None: none).
    """

    mode = "airflow"

    def __init__(self, keys: KeyRing, anonymous: Access | None = None) -> None:
        self.keys = keys
        self.anonymous = anonymous

    async def authorize(self, request: Request, access: Access) -> Principal:
        credential = header_credential(request)
        if credential is not None:
            kind, value = credential
            principal = key_principal(self.keys, value, access) if self.keys else None
            if principal is not None:
                return principal
            if kind == "x-api-key":
                raise _unauthorized(f"the X-API-Key presented is not one of this consumer's keys: {HOW_TO}")
            user = await self._user_from_token(value)
        else:
            user = _trusted_user(request)
            token = request.cookies.get(COOKIE)
            if user is None and token:
                user = await self._user_from_token(token)
            if user is None:
                if self.anonymous is not None and access <= self.anonymous:
                    return ANONYMOUS
                raise _unauthorized(f"to {ACTIONS[access]}: {HOW_TO}")
            if access >= Access.WRITE:
                raise forbidden(
                    f"to {ACTIONS[access]} send the credential in a header (Authorization: Bearer <JWT> or "
                    f"{KEY_HEADERS}): a session cookie alone is refused for writes, against cross-site requests"
                )
        return await self._authorized(user, access)

    async def _user_from_token(self, token: str) -> BaseUser:
        from jwt import ExpiredSignatureError, InvalidTokenError

        try:
            return await _auth_manager().get_user_from_token(token)
        except ExpiredSignatureError:
            raise _unauthorized(f"the Airflow token has expired: {HOW_TO}") from None
        except InvalidTokenError:
            raise _unauthorized(f"the credential is neither an Airflow token nor a consumer key: {HOW_TO}") from None

    async def _authorized(self, user: BaseUser, access: Access) -> Principal:
        method = PERMISSIONS[access]
        manager = _auth_manager()
        # Auth managers may look permissions up in a database (FAB does): off the event loop.
        allowed = await run_in_threadpool(manager.is_authorized_asset, method=method, user=user)
        name = user.get_name()
        if not allowed:
            raise forbidden(
                f"Airflow user {name!r} may not {ACTIONS[access]}: that needs the {_PERMISSION_NAMES[method]} "
                "permission on Assets in Airflow (docs/security.md has the table)"
            )
        return Principal(name, "user")

    def login_url(self, request: Request) -> str | None:
        """Airflow's login page, coming back to ``request``'s URL."""
        try:
            return _auth_manager().get_url_login(next_url=str(request.url))
        except (HTTPException, RuntimeError, AttributeError) as error:  # no auth manager in this process
            log.warning("cannot build Airflow's login URL for the lineage page: %s", error)
            return None
