"""Secure by default, standalone: every route behind the one auth dependency, keys with scopes, anonymous
access only where opted in, the audit trail, and ``airflow-lineage serve``'s refusal to open an unguarded
consumer on a non-loopback address."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from support.consumer_helpers import dataset, run_event

from airflow_lineage_provider.cli.serve_command import anonymous_access, is_loopback
from airflow_lineage_provider.consumer import create_app
from airflow_lineage_provider.consumer.security import access as access_module
from airflow_lineage_provider.consumer.security.access import Access, ApiKey, KeyRing, NamespaceScope, load_keys_file
from airflow_lineage_provider.consumer.security.auth import requires

READ, WRITE, ADMIN = "read-secret-1", "write-secret-2", "admin-secret-3"
KEYS = (
    ApiKey("reader", Access.READ, READ),
    ApiKey("producer", Access.WRITE, WRITE),
    ApiKey("operator", Access.ADMIN, ADMIN),
)
AUDIT = "airflow_lineage_provider.consumer.security.audit"


@pytest.fixture
def keyed(tmp_path: Path) -> Any:
    app = create_app(store_url=f"sqlite:///{tmp_path / 'lineage.db'}", keys=KEYS)
    with TestClient(app) as client:
        yield client
    app.state.store.dispose()


def _calls(client: TestClient, headers: dict[str, str]) -> dict[str, int]:
    event = run_event("COMPLETE", "load", inputs=[dataset("a")], outputs=[dataset("b")])
    assert client.post("/api/v1/lineage", json=event, headers={"X-API-Key": ADMIN}).status_code == 201
    return {
        "read": client.get("/api/v1/namespaces", headers=headers).status_code,
        "walk": client.get("/api/v1/lineage", params={"nodeId": "dataset:warehouse:b"}, headers=headers).status_code,
        "ingest": client.post("/api/v1/lineage", json=event, headers=headers).status_code,
        "prune": client.post("/api/v1/retention", params={"days": 1}, headers=headers).status_code,
    }


def _needed(dependant: Any) -> set[Access]:
    """The access levels a route's dependency tree asks for through the one auth dependency."""
    levels = {requires(level): level for level in Access}
    found = {levels[d.call] for d in dependant.dependencies if d.call in levels}
    for sub in dependant.dependencies:
        found |= _needed(sub)
    return found


def test_every_route_declares_the_one_auth_dependency() -> None:
    app = create_app(store_url="sqlite:///unused.db", keys=KEYS)
    paths = set()
    for route in app.routes:
        assert isinstance(route, APIRoute), f"{route.path} is not an API route: it would bypass the auth dependency"
        assert _needed(route.dependant), f"{route.path} answers without the auth dependency"
        paths.add(route.path)
    assert {"/api/v1/lineage", "/api/v1/retention", "/ui", "/docs", "/openapi.json"} <= paths
    writes = {r.path: _needed(r.dependant) for r in app.routes if "POST" in r.methods}
    assert writes["/api/v1/lineage"] == {Access.WRITE} and writes["/api/v1/retention"] == {Access.ADMIN}
    reads = {r.path: _needed(r.dependant) for r in app.routes if "GET" in r.methods}
    assert reads["/api/v1/drift"] == {Access.READ}


def _route_calls(app: Any) -> list[tuple[str, str, Access]]:
    """Every route of ``app`` as ``(method, path with placeholders filled, level it needs)``."""
    calls = []
    for route in app.routes:
        path = route.path
        for name in route.param_convertors:
            path = path.replace(f"{{{name}:path}}", "x").replace(f"{{{name}}}", "x")
        level = max(_needed(route.dependant), key=list(Access).index)
        calls += [(method, path, level) for method in sorted(route.methods - {"HEAD"})]
    return calls


def test_every_route_refuses_a_caller_without_the_access_it_needs(keyed: TestClient) -> None:
    """Called, not only declared: every route answers 401 to an anonymous caller (the page and the API
    description load without a key by design, holding no data) and 403 to a key one level too low."""
    calls = _route_calls(keyed.app)
    assert len(calls) > 40  # the Marquez routes included
    below = {Access.WRITE: READ, Access.ADMIN: WRITE}
    for method, path, level in calls:
        if level is Access.PAGE:
            continue
        anonymous = keyed.request(method, path)
        assert anonymous.status_code == 401, f"{method} {path}: {anonymous.status_code} to an anonymous caller"
        if level in below:
            too_low = keyed.request(method, path, headers={"X-API-Key": below[level]})
            assert too_low.status_code == 403, f"{method} {path}: {too_low.status_code} to a key one level below"


def test_keys_of_each_scope_get_what_their_scope_allows(keyed: TestClient) -> None:
    assert _calls(keyed, {}) == {"read": 401, "walk": 401, "ingest": 401, "prune": 401}
    assert _calls(keyed, {"X-API-Key": READ}) == {"read": 200, "walk": 200, "ingest": 403, "prune": 403}
    assert _calls(keyed, {"Authorization": f"Bearer {WRITE}"}) == {
        "read": 200,
        "walk": 200,
        "ingest": 201,
        "prune": 403,
    }
    assert _calls(keyed, {"X-API-Key": ADMIN}) == {"read": 200, "walk": 200, "ingest": 201, "prune": 200}
    assert _calls(keyed, {"X-API-Key": "not-a-key-at-all"}) == {"read": 401, "walk": 401, "ingest": 401, "prune": 401}


def test_refusals_say_what_is_missing_and_how_to_send_it(keyed: TestClient) -> None:
    anonymous = keyed.get("/api/v1/events")
    assert anonymous.headers["www-authenticate"] == "Bearer"
    assert anonymous.json()["detail"] == (
        "this consumer needs a key with scope read to read lineage: "
        "send X-API-Key: <key> or Authorization: Bearer <key>"
    )
    too_low = keyed.post("/api/v1/retention", params={"days": 1}, headers={"X-API-Key": WRITE})
    assert too_low.json()["detail"] == (
        "key 'producer' has scope write; to prune or reset the lineage store a key needs scope admin"
    )
    assert READ not in too_low.text and WRITE not in too_low.text


def test_the_page_and_the_api_description_hold_no_data_and_load_without_a_key(keyed: TestClient) -> None:
    page = keyed.get("/ui")
    assert page.status_code == 200 and '<meta name="lineage-auth" content="key">' in page.text
    assert keyed.get("/ui/assets/api.js").status_code == 200
    schemes = keyed.get("/openapi.json").json()["components"]["securitySchemes"]
    assert schemes["APIKeyHeader"] == {
        "type": "apiKey",
        "in": "header",
        "name": "X-API-Key",
        "description": "A consumer API key.",
    }
    assert keyed.get("/docs").status_code == 200


@pytest.mark.parametrize(
    ("level", "expected"),
    [
        (Access.READ, {"read": 200, "walk": 200, "ingest": 401, "prune": 401}),
        (Access.WRITE, {"read": 200, "walk": 200, "ingest": 201, "prune": 401}),
        (Access.ADMIN, {"read": 200, "walk": 200, "ingest": 201, "prune": 200}),
    ],
)
def test_anonymous_access_is_what_the_operator_opted_in_to(tmp_path: Path, level: Access, expected: dict) -> None:
    app = create_app(store_url=f"sqlite:///{tmp_path / 'lineage.db'}", keys=KEYS, anonymous=level)
    with TestClient(app) as client:
        assert _calls(client, {}) == expected
        # a key still counts for more than anonymous, and an unknown key is refused, not downgraded
        assert _calls(client, {"X-API-Key": ADMIN})["prune"] == 200
        assert _calls(client, {"X-API-Key": "unknown-key-9"})["read"] == 401
    app.state.store.dispose()


def test_an_app_with_no_credentials_and_no_opt_in_is_refused_at_build() -> None:
    with pytest.raises(ValueError, match="no credentials configured: pass keys="):
        create_app(store_url="sqlite:///unused.db")


def test_the_legacy_api_key_is_a_write_key(tmp_path: Path) -> None:
    app = create_app(store_url=f"sqlite:///{tmp_path / 'lineage.db'}", api_key="legacy-key")
    with TestClient(app) as client:
        event = run_event("COMPLETE", "load", inputs=[dataset("a")], outputs=[dataset("b")])
        assert client.post("/api/v1/lineage", json=event).status_code == 401
        assert client.post("/api/v1/lineage", json=event, headers={"X-API-Key": "legacy-key"}).status_code == 201
        assert client.get("/api/v1/namespaces", headers={"X-API-Key": "legacy-key"}).status_code == 200
        assert client.post("/api/v1/retention?days=1", headers={"X-API-Key": "legacy-key"}).status_code == 403
    app.state.store.dispose()


def test_key_matching_compares_every_key_whichever_matches(monkeypatch: pytest.MonkeyPatch) -> None:
    ring = KeyRing(KEYS)
    compared: list[bytes] = []
    real = access_module.hmac.compare_digest

    def counting(a: bytes, b: bytes) -> bool:
        compared.append(b)
        return real(a, b)

    monkeypatch.setattr(access_module.hmac, "compare_digest", counting)
    for secret, name in ((READ, "reader"), (ADMIN, "operator"), ("nope-nope", None)):
        compared.clear()
        found = ring.match(secret)
        assert (found.name if found else None) == name
        assert len(compared) == len(KEYS)


def test_keys_never_show_their_secret() -> None:
    key = ApiKey.parse("ci:write:pa:ss:word-1")
    assert (key.name, key.scope, key.secret) == ("ci", Access.WRITE, "pa:ss:word-1")
    assert "pa:ss" not in repr(key) and "pa:ss" not in str(key)
    with pytest.raises(ValueError) as bad_scope:
        ApiKey.parse("ci:owner:topsecret-1")
    assert str(bad_scope.value) == "unknown access scope 'owner': use read, write or admin (in key 'ci:owner:***')"
    with pytest.raises(ValueError, match="at least 8 characters"):
        ApiKey.parse("ci:read:short")
    with pytest.raises(ValueError, match="key names must be unique"):
        KeyRing([ApiKey("a", Access.READ, "secret-one"), ApiKey("a", Access.WRITE, "secret-two")])


def test_a_keys_file_gives_named_scoped_and_namespace_limited_keys(tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    path.write_text(
        json.dumps(
            {
                "keys": [
                    {"name": "producers", "scope": "write", "secret": "producer-secret"},
                    {"name": "fin", "scope": "read", "secret": "finance-secret", "namespaces": ["postgres://fin*"]},
                ]
            }
        )
    )
    producers, fin = load_keys_file(path)
    assert (producers.name, producers.scope, producers.namespaces) == ("producers", Access.WRITE, None)
    assert fin.namespaces == NamespaceScope(("postgres://fin*",))
    assert fin.namespaces.allows("postgres://fin-db:5432") and not fin.namespaces.allows("warehouse")
    path.write_text('{"keys": [{"name": "x", "scope": "read", "secret": "long-enough", "role": "admin"}]}')
    with pytest.raises(ValueError, match=r"unknown field\(s\) \['role'\]"):
        load_keys_file(path)
    path.write_text("{not json")
    with pytest.raises(ValueError, match="is not JSON"):
        load_keys_file(path)


def test_a_namespace_limited_write_key_may_write_only_its_namespaces(tmp_path: Path) -> None:
    limited = ApiKey("wh-loader", Access.WRITE, "warehouse-loader", NamespaceScope(("warehouse", "pipelines")))
    app = create_app(store_url=f"sqlite:///{tmp_path / 'lineage.db'}", keys=(limited,))
    inside = run_event("COMPLETE", "load", inputs=[dataset("a")], outputs=[dataset("b")])
    outside = run_event("COMPLETE", "leak", inputs=[dataset("a")], outputs=[dataset("x", namespace="finance")])
    with TestClient(app) as client:
        headers = {"X-API-Key": "warehouse-loader"}
        answer = client.post("/api/v1/lineage/batch", json=[inside, outside], headers=headers)
        assert answer.status_code == 207
        assert answer.json()["errors"] == [
            {
                "index": 1,
                "error": "key 'wh-loader' may write only namespaces matching ['warehouse', 'pipelines']; "
                "this event names ['finance']",
            }
        ]
        assert client.post("/api/v1/lineage", json=outside, headers=headers).status_code == 400
        # a namespace named deeper in the event (a column-lineage input field) counts too
        columns = {"total": [("finance", "ledger", "amount")]}
        sneaky = run_event("COMPLETE", "load", outputs=[dataset("b", fields=["total"], columns=columns)])
        refused = client.post("/api/v1/lineage", json=sneaky, headers=headers)
        assert refused.status_code == 400 and "this event names ['finance']" in refused.json()["detail"]
    app.state.store.dispose()


def test_every_write_prune_and_refusal_is_in_the_audit_log(keyed: TestClient, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=AUDIT)
    events = [
        run_event("START", "load", outputs=[dataset("b")]),
        run_event("COMPLETE", "load", outputs=[dataset("c", namespace="finance")]),
    ]
    keyed.post("/api/v1/lineage/batch", json=events, headers={"X-API-Key": WRITE})
    keyed.post("/api/v1/lineage/batch", json=events, headers={"X-API-Key": WRITE})
    keyed.post("/api/v1/retention", params={"days": 30}, headers={"X-API-Key": ADMIN})
    keyed.post("/api/v1/retention", params={"days": 30}, headers={"X-API-Key": READ})
    keyed.post("/api/v1/lineage", json=events[0])
    lines = [r.getMessage() for r in caplog.records if r.name == AUDIT]
    assert lines == [
        "lineage audit: ingest by key 'producer': 2 received, 2 stored, 0 duplicate, 0 refused; "
        "namespaces finance, pipelines, warehouse -> 200",
        "lineage audit: ingest by key 'producer': 2 received, 0 stored, 2 duplicate, 0 refused; "
        "namespaces finance, pipelines, warehouse -> 200",
        "lineage audit: prune by key 'operator': older than 30 days; removed 2 events, 1 runs -> 200",
        "lineage audit: refused admin (prune or reset the lineage store) with a header credential "
        "at POST /api/v1/retention -> 403",
        "lineage audit: refused write (ingest events or change tags) anonymous at POST /api/v1/lineage -> 401",
    ]
    assert all(level == "INFO" for level in (r.levelname for r in caplog.records if r.name == AUDIT))
    assert not any(secret in caplog.text for secret in (READ, WRITE, ADMIN))


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.53", "localhost", "::1", "[::1]"])
def test_loopback_addresses_are_recognised(host: str) -> None:
    assert is_loopback(host)


def test_no_keys_means_this_machine_only_and_an_explicit_flag_elsewhere() -> None:
    assert anonymous_access("127.0.0.1", has_keys=False, allow_anonymous=None) is Access.ADMIN
    assert anonymous_access("0.0.0.0", has_keys=True, allow_anonymous=None) is None
    assert anonymous_access("0.0.0.0", has_keys=False, allow_anonymous="admin") is Access.ADMIN
    assert anonymous_access("0.0.0.0", has_keys=True, allow_anonymous="read") is Access.READ
    assert not is_loopback("0.0.0.0") and not is_loopback("lineage.internal")


def test_serve_refuses_a_non_loopback_address_with_no_credentials(tmp_path: Path) -> None:
    command = [
        str(Path(sys.executable).parent / "airflow-lineage"),
        "serve",
        "--store",
        f"sqlite:///{tmp_path / 'lineage.db'}",
        "--host",
        "0.0.0.0",
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr.startswith(
        "airflow-lineage: error: refusing to serve lineage on 0.0.0.0 with no credentials: anyone who reaches it"
    )
    assert "--keys-file FILE, or --key NAME:SCOPE:SECRET" in result.stderr and "--allow-anonymous" in result.stderr
    assert not (tmp_path / "lineage.db").exists()  # refused before anything was opened


def test_serve_names_a_bad_key_without_showing_its_secret(tmp_path: Path) -> None:
    command = [
        str(Path(sys.executable).parent / "airflow-lineage"),
        "serve",
        "--store",
        f"sqlite:///{tmp_path / 'lineage.db'}",
        "--key",
        "ci:sudo:hunter2-hunter2",
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "airflow-lineage: error: unknown access scope 'sudo': use read, write or admin (in key 'ci:sudo:***')"
    )
