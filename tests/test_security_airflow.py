"""The consumer's guard inside a real Airflow 3 API server with logins: SimpleAuthManager with three users
(viewer, operator with role OP, admin), Airflow's JWTs from ``POST /auth/token``, the UI's session cookie,
the consumer's own API keys (a write key, a read key, an admin key) — and a headless Chromium that opens
the lineage page, lands on Airflow's login form, logs in and comes back to a working page.

One server for the module (``airflow.api_fastapi.app.create_app`` on uvicorn in a subprocess with its own
AIRFLOW_HOME, as in test_ui_airflow.py, but *without* ``simple_auth_manager_all_admins``); its log file is
the audit trail test 5 reads.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import httpx
import jwt
import pytest
from selenium.webdriver.common.by import By
from support.airflow_run import airflow_env, api_server, migrate
from support.browser import wait_for
from support.environment import doc_image
from support.ui_graph import CUSTOMERS, DAILY, ENRICH, ENRICHED, ORDERS, PG, REVENUE, sales_events
from support.ui_page import LineagePage
from support.waiting import wait_until

pytest_plugins = ("support.ui_fixtures",)
pytestmark = pytest.mark.airflow

SCREENSHOT = doc_image("lineage-ui-airflow-login.png")

SIMPLE_AUTH_MANAGER = "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"
#: SimpleAuthManager's ``[core] simple_auth_manager_users``: ``username:role`` (roles viewer, user, op, admin).
USERS = "viewer:viewer,operator:op,admin:admin,analyst:viewer"
#: ``[core] simple_auth_manager_passwords_file``, written before the server starts (nothing generated).
PASSWORDS = {
    "viewer": "viewer-Pa55-7f3c",
    "operator": "operator-Pa55-2b9e",
    "admin": "admin-Pa55-91d4",
    "analyst": "analyst-Pa55-c81e",
}
#: ``[lineage_provider] consumer_user_namespaces``: analyst (a viewer) sees only the warehouse namespace.
USER_NAMESPACES = "user:analyst = warehouse"
#: ``[api_auth] jwt_secret``, known here to forge an expired token (64 bytes and more, as HS512 wants).
JWT_SECRET = "test-security-airflow-jwt-secret-5d0c8a7e-" + "0123456789abcdef" * 2
WRITE_KEY = "producers-write-9c2f71a4e8"  # [lineage_provider] consumer_api_key: a write key
READ_KEY = "reader-read-3e8b05d1c6"
ADMIN_KEY = "pruner-admin-6a1d94f0b2"
#: ``[lineage_provider] consumer_auth_cache_seconds``: short, so the revocation test waits little.
AUTH_CACHE_SECONDS = 2.0
#: ``[lineage_provider] consumer_upload_timeout_seconds``: short, so the trickling upload is dropped soon.
UPLOAD_SECONDS = 3.0
KEYS_FILE = {
    "keys": [
        {"name": "reader", "scope": "read", "secret": READ_KEY},
        {"name": "pruner", "scope": "admin", "secret": ADMIN_KEY},
    ]
}
SECRETS = (WRITE_KEY, READ_KEY, ADMIN_KEY, JWT_SECRET, *PASSWORDS.values())

NAMESPACES = "/lineage/api/v1/namespaces"
LINEAGE = "/lineage/api/v1/lineage"
RETENTION = "/lineage/api/v1/retention"
PRODUCER = "https://github.com/acme/airflow-lineage-provider/tests/security"


@dataclass
class Airflow:
    """The running API server: its URL, its log file and a JWT per user (from ``POST /auth/token``)."""

    url: str
    log: Path
    tokens: dict[str, str] = field(default_factory=dict)

    def log_text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def headers(self, caller: str) -> dict[str, str]:
        """The request headers of one caller of the matrix."""
        if caller == "anonymous":
            return {}
        if caller in self.tokens:
            return {"Authorization": f"Bearer {self.tokens[caller]}"}
        return {
            "write key": {"Authorization": f"Bearer {WRITE_KEY}"},  # as openlineage-python's HTTP transport sends it
            "read key": {"X-API-Key": READ_KEY},
            "admin key": {"X-API-Key": ADMIN_KEY},
        }[caller]


def _token(url: str, username: str) -> str:
    answer = httpx.post(f"{url}/auth/token", json={"username": username, "password": PASSWORDS[username]}, timeout=10)
    assert answer.status_code == 201, answer.text
    return answer.json()["access_token"]


def _event(namespace: str = "security-tests") -> dict[str, Any]:
    """A fresh COMPLETE run event of a job in ``namespace`` (a new run id, so it is always stored)."""
    return {
        "eventType": "COMPLETE",
        "eventTime": datetime.now(timezone.utc).isoformat(),
        "run": {"runId": str(uuid.uuid4())},
        "job": {"namespace": namespace, "name": "guarded_job"},
        "inputs": [],
        "outputs": [{"namespace": namespace, "name": "guarded_table"}],
        "producer": PRODUCER,
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/definitions/RunEvent",
    }


@pytest.fixture(scope="module")
def airflow(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Airflow]:
    """Airflow's API server with SimpleAuthManager logins and the consumer's keys; the sales events posted."""
    root = tmp_path_factory.mktemp("security-airflow")
    home = root / "airflow"
    migrate(home)
    passwords = root / "passwords.json"
    passwords.write_text(json.dumps(PASSWORDS), encoding="utf-8")
    keys = root / "keys.json"
    keys.write_text(json.dumps(KEYS_FILE), encoding="utf-8")
    env = airflow_env(
        home,
        home / "dags",
        {
            "AIRFLOW__CORE__AUTH_MANAGER": SIMPLE_AUTH_MANAGER,
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": USERS,
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
            "AIRFLOW__API_AUTH__JWT_SECRET": JWT_SECRET,
            "AIRFLOW__API__HOST": "127.0.0.1",  # as served (else SimpleAuthManager warns of a production shape)
            "AIRFLOW__LINEAGE_PROVIDER__CONSUMER_STORE_URL": f"sqlite:///{root / 'lineage.db'}",
            "AIRFLOW__LINEAGE_PROVIDER__CONSUMER_API_KEY": WRITE_KEY,
            "AIRFLOW__LINEAGE_PROVIDER__CONSUMER_KEYS_FILE": str(keys),
            "AIRFLOW__LINEAGE_PROVIDER__CONSUMER_AUTH_CACHE_SECONDS": str(AUTH_CACHE_SECONDS),
            "AIRFLOW__LINEAGE_PROVIDER__CONSUMER_USER_NAMESPACES": USER_NAMESPACES,
            "AIRFLOW__LINEAGE_PROVIDER__CONSUMER_UPLOAD_TIMEOUT_SECONDS": str(UPLOAD_SECONDS),
        },
    )
    log_path = root / "api-server.log"
    with api_server(env, log_path) as url:
        running = Airflow(url, log_path, {user: _token(url, user) for user in PASSWORDS})
        answer = httpx.post(
            f"{url}{LINEAGE}/batch", json=sales_events(), headers=running.headers("admin key"), timeout=60
        )
        assert answer.status_code == 200 and answer.json()["failed"] == 0, answer.text[:2000]
        yield running


# What SimpleAuthManager grants on Assets (is_authorized_asset: GET from VIEWER, any other method from OP;
# ADMIN everything): viewer reads only; operator (OP) and admin read, create (ingest) and delete (prune).
# The keys have the scopes read < write < admin.
MATRIX = {
    # caller: (read, ingest, retention)
    "anonymous": (401, 401, 401),
    "viewer": (200, 403, 403),
    "operator": (200, 201, 200),
    "admin": (200, 201, 200),
    "write key": (200, 201, 403),
    "read key": (200, 403, 403),
    "admin key": (200, 201, 200),
}


def _assert_clear_refusal(answer: httpx.Response, caller: str, action: str) -> None:
    """A 401 says how to log in or authenticate; a 403 names who was refused and the permission or scope."""
    detail = answer.json()["detail"]
    assert action in detail, detail
    if answer.status_code == 401:
        assert "log in to Airflow" in detail and "Authorization: Bearer" in detail, detail
        assert answer.headers["www-authenticate"] == "Bearer"
    elif caller.endswith(" key"):
        name = {"write key": "api-key", "read key": "reader"}[caller]  # consumer_api_key is "api-key"
        assert f"key {name!r} has scope" in detail and "needs scope" in detail, detail
    else:
        assert f"Airflow user {caller!r} may not" in detail and "permission on Assets" in detail, detail


@pytest.mark.parametrize("caller", list(MATRIX))
def test_each_caller_may_read_ingest_and_prune_as_its_role_or_scope_allows(airflow: Airflow, caller: str) -> None:
    expected_read, expected_ingest, expected_retention = MATRIX[caller]
    headers = airflow.headers(caller)
    with httpx.Client(base_url=airflow.url, headers=headers, timeout=30) as client:
        namespaces = client.get(NAMESPACES)
        graph = client.get(LINEAGE, params={"nodeId": ENRICHED, "depth": 2})
        ingest = client.post(LINEAGE, json=_event())
        retention = client.post(RETENTION, params={"days": 1})
    observed = (namespaces.status_code, graph.status_code, ingest.status_code, retention.status_code)
    assert observed == (expected_read, expected_read, expected_ingest, expected_retention), [
        a.text[:300] for a in (namespaces, graph, ingest, retention)
    ]
    if expected_read == 200:
        assert "warehouse" in {ns["name"] for ns in namespaces.json()["namespaces"]}
        assert ENRICHED in {node["id"] for node in graph.json()["graph"]}
    else:
        _assert_clear_refusal(namespaces, caller, "to read lineage")
        _assert_clear_refusal(graph, caller, "to read lineage")
    if expected_ingest == 201:
        assert ingest.json() == {"status": "stored"}
    else:
        _assert_clear_refusal(ingest, caller, "ingest events")
    if expected_retention == 200:
        assert set(retention.json()) == {"events", "runs"}
    else:
        _assert_clear_refusal(retention, caller, "prune or reset the lineage store")


def test_airflow_itself_refuses_anonymous_requests_as_the_consumer_does(airflow: Airflow) -> None:
    assert httpx.get(f"{airflow.url}/api/v2/dags", timeout=10).status_code == 401
    assert httpx.get(f"{airflow.url}{NAMESPACES}", timeout=10).status_code == 401
    viewer = airflow.headers("viewer")
    assert httpx.get(f"{airflow.url}/api/v2/dags", headers=viewer, timeout=10).status_code == 200
    assert httpx.get(f"{airflow.url}{NAMESPACES}", headers=viewer, timeout=10).status_code == 200


def _namespace_names(airflow: Airflow) -> set[str]:
    answer = httpx.get(f"{airflow.url}{NAMESPACES}", headers=airflow.headers("admin key"), timeout=10)
    assert answer.status_code == 200, answer.text
    return {ns["name"] for ns in answer.json()["namespaces"]}


def test_a_session_cookie_alone_reads_but_may_not_write(airflow: Airflow) -> None:
    namespace = f"cookie-only-{uuid.uuid4().hex[:8]}"
    cookie = {"_token": airflow.tokens["admin"]}  # the admin's session: writes need a header all the same
    with httpx.Client(base_url=airflow.url, cookies=cookie, timeout=30) as client:
        ingest = client.post(LINEAGE, json=_event(namespace))
        batch = client.post(f"{LINEAGE}/batch", json=[_event(namespace)])
        retention = client.post(RETENTION, params={"days": 1})
        read = client.get(NAMESPACES)
    assert (ingest.status_code, batch.status_code, retention.status_code) == (403, 403, 403), ingest.text
    assert "a session cookie alone is refused for writes" in ingest.json()["detail"]
    assert "Authorization: Bearer" in ingest.json()["detail"]
    assert namespace not in _namespace_names(airflow)  # nothing stored
    assert read.status_code == 200, read.text
    assert "warehouse" in {ns["name"] for ns in read.json()["namespaces"]}


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _forged(airflow: Airflow, *, secret: str = JWT_SECRET, expired: bool = False) -> str:
    """The admin's token with its claims kept, re-signed with ``secret`` (and expired an hour ago)."""
    token = airflow.tokens["admin"]
    header = jwt.get_unverified_header(token)
    claims = jwt.decode(token, options={"verify_signature": False})
    if expired:
        now = int(time.time())
        claims.update(iat=now - 7200, nbf=now - 7200, exp=now - 3600)
    return jwt.encode(
        claims, secret, algorithm=header["alg"], headers={"kid": header["kid"]} if "kid" in header else {}
    )


def test_an_expired_or_garbage_bearer_is_refused_with_401(airflow: Airflow) -> None:
    # The re-signed token with the claims unchanged is accepted: the forging itself is right.
    assert httpx.get(f"{airflow.url}{NAMESPACES}", headers=_bearer(_forged(airflow)), timeout=10).status_code == 200
    expired = httpx.get(f"{airflow.url}{NAMESPACES}", headers=_bearer(_forged(airflow, expired=True)), timeout=10)
    assert expired.status_code == 401, expired.text
    assert "the Airflow token has expired" in expired.json()["detail"]
    for garbage in ("not-a-token-and-not-a-key", _forged(airflow, secret="someone-else" * 8)):
        for path in (NAMESPACES, LINEAGE):
            method = httpx.get if path == NAMESPACES else httpx.post
            kwargs: dict[str, Any] = {} if path == NAMESPACES else {"json": _event()}
            answer = method(f"{airflow.url}{path}", headers=_bearer(garbage), timeout=10, **kwargs)
            assert answer.status_code == 401, (path, answer.text)
            assert "neither an Airflow token nor a consumer key" in answer.json()["detail"]
    unknown_key = httpx.get(f"{airflow.url}{NAMESPACES}", headers={"X-API-Key": "not-one-of-ours"}, timeout=10)
    assert unknown_key.status_code == 401
    assert "not one of this consumer's keys" in unknown_key.json()["detail"]


def test_the_page_sends_an_anonymous_browser_to_airflows_login_and_works_after_it(browser, airflow: Airflow) -> None:
    browser.delete_all_cookies()
    page_url = f"{airflow.url}/lineage/ui?{urlencode({'nodeId': ENRICHED})}"
    browser.get(page_url)
    username = wait_for(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "input[name='username']"), "login form")
    login = urlsplit(browser.current_url)
    assert login.path == "/auth/login", browser.current_url
    assert "next=" in login.query
    password = browser.find_element(By.CSS_SELECTOR, "input[name='password']")
    assert password.get_attribute("type") == "password"
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(SCREENSHOT))

    username[0].send_keys("viewer")
    password.send_keys(PASSWORDS["viewer"])
    browser.find_element(By.CSS_SELECTOR, "button[type='submit']").click()
    wait_for(browser, lambda d: urlsplit(d.current_url).path == "/lineage/ui", "the way back to the lineage page")
    page = LineagePage(browser, f"{airflow.url}/lineage")
    page.wait_ready()
    assert page.state() == "ready"
    assert page.node_ids() == {ENRICHED, ENRICH, ORDERS, CUSTOMERS, DAILY, REVENUE}
    assert browser.get_cookie("_token") is not None  # the session the page's API calls ride on

    # Opening the page again goes straight to it: the session holds, no second login.
    page.open(nodeId=ENRICHED)
    assert urlsplit(browser.current_url).path == "/lineage/ui"
    assert page.node_ids() == {ENRICHED, ENRICH, ORDERS, CUSTOMERS, DAILY, REVENUE}
    browser.delete_all_cookies()


def test_writes_and_refusals_are_audited_without_secrets(airflow: Airflow) -> None:
    ingest = httpx.post(f"{airflow.url}{LINEAGE}", json=_event(), headers=airflow.headers("admin"), timeout=10)
    assert ingest.status_code == 201, ingest.text
    refused = httpx.post(f"{airflow.url}{LINEAGE}", json=_event(), headers=airflow.headers("viewer"), timeout=10)
    assert refused.status_code == 403
    assert httpx.post(f"{airflow.url}{LINEAGE}", json=_event(), timeout=10).status_code == 401
    expected = (
        "lineage audit: ingest by user 'admin': 1 received, 1 stored",
        "lineage audit: refused write (ingest events or change tags) with a header credential"
        " at POST /lineage/api/v1/lineage -> 403",
        "lineage audit: refused write (ingest events or change tags) anonymous at POST /lineage/api/v1/lineage -> 401",
    )

    def missing() -> list[str]:
        return [line for line in expected if line not in airflow.log_text()]

    wait_until(
        lambda: not missing(),
        "the audit lines in the server's log",
        interval=0.1,
        detail=lambda: f"{missing()} not in:\n{airflow.log_text()[-3000:]}",
    )
    text = airflow.log_text()
    leaked = [secret for secret in (*SECRETS, *airflow.tokens.values()) if secret in text]
    assert not leaked, "the server's log shows a secret or a token"
    assert "eyJ" not in text  # no JWT at all (every JWT starts with a base64 '{"')


def test_the_api_description_needs_a_login_too(airflow: Airflow) -> None:
    for path in ("/lineage/openapi.json", "/lineage/docs"):
        anonymous = httpx.get(f"{airflow.url}{path}", timeout=10)
        assert anonymous.status_code == 401, (path, anonymous.status_code, anonymous.headers.get("location"))
        assert "log in to Airflow" in anonymous.json()["detail"]
        viewer = httpx.get(f"{airflow.url}{path}", headers=airflow.headers("viewer"), timeout=10)
        assert viewer.status_code == 200, (path, viewer.text[:300])
    document = httpx.get(f"{airflow.url}/lineage/openapi.json", headers=airflow.headers("viewer"), timeout=10).json()
    assert "/api/v1/lineage" in document["paths"]


def test_only_a_browser_opening_a_page_is_sent_to_airflows_login(airflow: Airflow) -> None:
    browser_accept = {"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}
    page = httpx.get(f"{airflow.url}/lineage/ui", params={"nodeId": ENRICHED}, headers=browser_accept, timeout=10)
    assert page.status_code == 303
    location = urlsplit(page.headers["location"])
    assert location.path == "/auth/login"
    assert httpx.QueryParams(location.query)["next"] == f"{airflow.url}/lineage/ui?{urlencode({'nodeId': ENRICHED})}"
    asset = httpx.get(f"{airflow.url}/lineage/ui/assets/app.js", timeout=10)
    assert asset.status_code == 401, asset.headers.get("location")
    spec = httpx.get(f"{airflow.url}/lineage/openapi.json", headers={"Accept": "application/json"}, timeout=10)
    assert spec.status_code == 401, spec.headers.get("location")
    assert httpx.get(
        f"{airflow.url}/lineage/ui/assets/app.js", headers=airflow.headers("viewer"), timeout=10
    ).is_success


def test_a_revoked_token_is_refused_once_its_remembered_decision_expires(airflow: Airflow) -> None:
    token = _token(airflow.url, "viewer")
    namespaces = f"{airflow.url}/lineage/api/v1/namespaces"
    checked = time.monotonic()
    assert httpx.get(namespaces, headers=_bearer(token), timeout=10).status_code == 200
    logout = httpx.get(f"{airflow.url}/api/v2/auth/logout", headers=_bearer(token), timeout=10)
    assert logout.status_code in (302, 303, 307), logout.text[:300]
    airflows_own = httpx.get(f"{airflow.url}/api/v2/dags", headers=_bearer(token), timeout=10).status_code
    if airflows_own == 200:
        # Airflow 3.1 and 3.2 revoke no token sent in a header at logout (3.3 does): Airflow's own API and the
        # consumer, which asks Airflow, both keep accepting it until it expires.
        time.sleep(max(0.0, checked + AUTH_CACHE_SECONDS + 0.3 - time.monotonic()))
        assert httpx.get(namespaces, headers=_bearer(token), timeout=10).status_code == 200
        return
    assert airflows_own in (401, 403)
    remembered = httpx.get(namespaces, headers=_bearer(token), timeout=10).status_code
    if time.monotonic() - checked < AUTH_CACHE_SECONDS * 0.8:
        assert remembered == 200  # the decision is remembered: no metadata-database query this time
    time.sleep(max(0.0, checked + AUTH_CACHE_SECONDS + 0.3 - time.monotonic()))
    refused = httpx.get(namespaces, headers=_bearer(token), timeout=10)
    assert refused.status_code == 401
    assert "neither an Airflow token nor a consumer key" in refused.json()["detail"]


def test_hostile_requests_are_refused_inside_airflow_as_standalone(airflow: Airflow) -> None:
    """The mounted consumer applies the same request limits in Airflow's API server: a body of 400,000 gzip
    members (34 s on the event loop before, stalling Airflow's own API), NUL in a path segment (a 500 on a
    PostgreSQL store), and Airflow's own API keeps answering."""
    import gzip

    headers = airflow.headers("admin key")
    body = gzip.compress(json.dumps(_event()).encode()) + gzip.compress(b"") * 400_000
    bomb = httpx.post(
        f"{airflow.url}{LINEAGE}", content=body, headers={**headers, "Content-Encoding": "gzip"}, timeout=60
    )
    assert bomb.status_code == 400 and "gzip body holds more than 1000 members" in bomb.json()["detail"]
    for path in (
        "/lineage/api/v1/namespaces/%00",
        "/lineage/api/v1/namespaces/%00/jobs",
        "/lineage/api/v1/jobs/runs/%00",
    ):
        answer = httpx.get(f"{airflow.url}{path}", headers=headers, timeout=10)
        assert answer.status_code == 400 and "NUL" in answer.json()["detail"], (path, answer.text)
    assert httpx.get(f"{airflow.url}/api/v2/monitor/health", timeout=10).status_code == 200


def test_a_trickling_upload_is_dropped_inside_airflow(airflow: Airflow) -> None:
    import socket

    host, port = urlsplit(airflow.url).hostname or "127.0.0.1", urlsplit(airflow.url).port or 80
    with socket.create_connection((host, port), timeout=30) as raw:
        raw.sendall(
            f"POST {LINEAGE} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"X-API-Key: {ADMIN_KEY}\r\nContent-Length: 1000000\r\n\r\n".encode()
            + b" " * 1000
        )
        answer = b""
        deadline = time.monotonic() + 10 * UPLOAD_SECONDS
        while not answer and time.monotonic() < deadline:
            time.sleep(0.5)
            try:
                raw.sendall(b" ")
                raw.settimeout(0.05)
                answer = raw.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                break
    assert answer.startswith(b"HTTP/1.1 408"), answer
    assert b"upload_seconds" in answer and b"connection: close" in answer.lower()


def test_a_user_mapped_to_namespaces_is_limited_as_a_namespace_limited_key(airflow: Airflow) -> None:
    """``consumer_user_namespaces`` limits analyst to ``warehouse``: other namespaces are hidden from every read,
    as for a limited key (404 as if missing); viewer, who no entry names, still sees them all."""
    limited, unlimited = airflow.headers("analyst"), airflow.headers("viewer")
    base = f"{airflow.url}/lineage/api/v1"

    def names(headers: dict[str, str]) -> set[str]:
        answer = httpx.get(f"{base}/namespaces", headers=headers, timeout=30)
        assert answer.status_code == 200, answer.text
        return {namespace["name"] for namespace in answer.json()["namespaces"]}

    assert names(limited) == {"warehouse"}
    assert len(names(unlimited)) > 1
    hidden = httpx.get(
        f"{base}/namespaces/{quote(PG, safe='')}/datasets/shop.public.orders", headers=limited, timeout=30
    )
    assert hidden.status_code == 404, hidden.text
    shown = httpx.get(
        f"{base}/namespaces/{quote(PG, safe='')}/datasets/shop.public.orders", headers=unlimited, timeout=30
    )
    assert shown.status_code == 200, shown.text
    walk = httpx.get(
        f"{base}/lineage", params={"nodeId": "dataset:warehouse:analytics.daily_revenue"}, headers=limited, timeout=30
    )
    assert walk.status_code == 200 and PG not in walk.text, walk.text[:500]
