"""The consumer's guard inside Airflow's API server: Airflow's JWT and auth manager, plus consumer API keys.

A request is resolved in this order:

1. ``X-API-Key``, or an ``Authorization: Bearer`` value that is one of the consumer's keys: that key
   (producers such as openlineage-python's HTTP transport send their key as a Bearer token);
2. any other ``Authorization: Bearer`` value: an Airflow JWT (from ``POST /auth/token``);
3. the Airflow UI's session cookie (``_token``) — for reads and the page only: a write or prune on a
   cookie alone is refused (403), so a page on another site cannot make a logged-in browser write.

The user is then authorized by the configured auth manager (SimpleAuthManager, FAB, Keycloak, ...) as on
Airflow's own asset endpoints — :data:`PERMISSIONS` is the table; docs/security.md explains it.

Validating a JWT in Airflow queries the metadata database for revoked tokens on every request, about as
much as a small graph walk (``docs/benchmarks.md``, "Auth: cost per request"). So each decision — this
token, this permission: allowed or not — is remembered for ``cache_seconds`` (``[lineage_provider]
consumer_auth_cache_seconds``, default 5; never past the token's own expiry): a logout or a permission
change takes effect within that time. Keys are hashes of the tokens, never the tokens.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import OrderedDict
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

from fastapi import HTTPException, Request
from fastapi.concurrency import run_in_threadpool

from airflow_lineage_provider.consumer.security.access import (
    ANONYMOUS,
    Access,
    KeyRing,
    NamespaceScope,
    Principal,
    UserScopes,
)
from airflow_lineage_provider.consumer.security.guards import (
    ACTIONS,
    KEY_HEADERS,
    forbidden,
    header_credential,
    key_principal,
)
from airflow_lineage_provider.consumer.security.guards import unauthorized as _unauthorized

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


def _seconds_left(token: str) -> float:
    """Seconds until the token's ``exp`` claim (read unverified: Airflow has just verified it), or infinity."""
    import jwt

    try:
        expiry = jwt.decode(token, options={"verify_signature": False}).get("exp")
    except jwt.InvalidTokenError:
        return 0.0
    return max(0.0, float(expiry) - time.time()) if isinstance(expiry, (int, float)) else float("inf")


class AirflowGuard:
    """Authenticates with Airflow's JWT and authorizes with the configured auth manager (module docstring).

    ``keys`` are the consumer's own API keys (``[lineage_provider] consumer_api_key`` and
    ``consumer_keys_file``); ``anonymous`` the level a request without a credential gets (None: none);
    ``user_scopes`` the namespaces users, roles and teams are limited to (``consumer_user_namespaces``: a user
    none of its entries names sees every namespace).
    """

    mode = "airflow"

    #: Decisions remembered at most (least recently used dropped first).
    CACHE_ENTRIES = 4096

    def __init__(
        self,
        keys: KeyRing,
        anonymous: Access | None = None,
        cache_seconds: float = 5.0,
        user_scopes: UserScopes | None = None,
    ) -> None:
        self.keys = keys
        self.anonymous = anonymous
        self.cache_seconds = cache_seconds
        self.user_scopes = user_scopes or UserScopes()
        # (sha256 of the token, method) -> (monotonic expiry, user name, allowed, namespaces the user may see)
        self._decisions: OrderedDict[tuple[bytes, str], tuple[float, str, bool, NamespaceScope | None]] = OrderedDict()

    async def authorize(self, request: Request, access: Access) -> Principal:
        credential = header_credential(request)
        if credential is not None:
            kind, value = credential
            principal = key_principal(self.keys, value, access) if self.keys else None
            if principal is not None:
                return principal
            if kind == "x-api-key":
                raise _unauthorized(f"the X-API-Key presented is not one of this consumer's keys: {HOW_TO}")
            return await self._token_decision(value, access)
        # The cookie is read here rather than taken from Airflow's JWT-refresh middleware (which resolves the
        # same cookie into request.state.user): the decision cache then serves cookie and header alike.
        token = request.cookies.get(COOKIE)
        if not token:
            if self.anonymous is not None and access <= self.anonymous:
                return ANONYMOUS
            raise _unauthorized(f"to {ACTIONS[access]}: {HOW_TO}")
        if access >= Access.WRITE:
            await self._user_from_token(token)  # an invalid or expired cookie is a 401, as for reads
            raise forbidden(
                f"to {ACTIONS[access]} send the credential in a header (Authorization: Bearer <JWT> or "
                f"{KEY_HEADERS}): a session cookie alone is refused for writes, against cross-site requests"
            )
        return await self._token_decision(token, access)

    async def _token_decision(self, token: str, access: Access) -> Principal:
        """The principal of a JWT for ``access``, from the decision cache or from Airflow (then cached)."""
        method = PERMISSIONS[access]
        key = (hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest(), method)
        now = time.monotonic()
        cached = self._decisions.get(key)
        if cached is not None and cached[0] > now:
            self._decisions.move_to_end(key)
            return self._decided(cached[1], cached[2], access, cached[3])
        user = await self._user_from_token(token)
        name, allowed = user.get_name(), await self._is_authorized(user, method)
        scope = self.user_scopes.scope_for(name, user_roles(user), user_teams(user))
        if self.cache_seconds > 0:
            self._decisions[key] = (now + min(self.cache_seconds, _seconds_left(token)), name, allowed, scope)
            self._decisions.move_to_end(key)
            while len(self._decisions) > self.CACHE_ENTRIES:
                self._decisions.popitem(last=False)
        return self._decided(name, allowed, access, scope)

    async def _user_from_token(self, token: str) -> BaseUser:
        from jwt import ExpiredSignatureError, InvalidTokenError

        try:
            return await _auth_manager().get_user_from_token(token)
        except ExpiredSignatureError:
            raise _unauthorized(f"the Airflow token has expired: {HOW_TO}") from None
        except InvalidTokenError:
            raise _unauthorized(f"the credential is neither an Airflow token nor a consumer key: {HOW_TO}") from None

    @staticmethod
    async def _is_authorized(user: BaseUser, method: ResourceMethod) -> bool:
        # Auth managers may look permissions up in a database (FAB does): off the event loop.
        return bool(await run_in_threadpool(_auth_manager().is_authorized_asset, method=method, user=user))

    @staticmethod
    def _decided(name: str, allowed: bool, access: Access, scope: NamespaceScope | None = None) -> Principal:
        method = PERMISSIONS[access]
        if not allowed:
            raise forbidden(
                f"Airflow user {name!r} may not {ACTIONS[access]}: that needs the {_PERMISSION_NAMES[method]} "
                "permission on Assets in Airflow (docs/security.md has the table)"
            )
        return Principal(name, "user", scope)

    def login_url(self, request: Request) -> str | None:
        """Airflow's login page, coming back to ``request``'s URL."""
        next_url = str(request.url)
        try:
            url = _auth_manager().get_url_login(next_url=next_url)
        except (HTTPException, RuntimeError, AttributeError) as error:  # no auth manager in this process
            log.warning("cannot build Airflow's login URL for the lineage page: %s", error)
            return None
        return with_next(url, next_url)


def user_roles(user: BaseUser) -> list[str]:
    """The role names of an Airflow user, as its auth manager's user object holds them: SimpleAuthManager's
    ``role``, FAB's ``roles`` (objects with a ``name``); none for a user object with neither."""
    names = []
    role = getattr(user, "role", None)
    if isinstance(role, str) and role:
        names.append(role)
    for held in getattr(user, "roles", None) or ():
        found = held if isinstance(held, str) else getattr(held, "name", None)
        if isinstance(found, str) and found:
            names.append(found)
    return names


def user_teams(user: BaseUser) -> list[str]:
    """The team names of an Airflow user whose auth manager has teams (SimpleAuthManager's ``teams``)."""
    teams = getattr(user, "teams", None) or ()
    return [team for team in teams if isinstance(team, str) and team]


def with_next(login_url: str, next_url: str) -> str:
    """``login_url`` with ``next=next_url`` added when the auth manager left it out (Airflow 3.1's
    SimpleAuthManager ignores ``next_url``, though its login page follows ``next`` after logging in)."""
    parts = urlsplit(login_url)
    if "next" in parse_qs(parts.query):
        return login_url
    query = f"{parts.query}&" if parts.query else ""
    return urlunsplit(parts._replace(query=query + urlencode({"next": next_url})))
