"""The lineage page's routes: the page and its assets, where the app is mounted, caching, and what ships."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from support.ui_page import ui_app

ASSETS = Path(__file__).resolve().parents[1] / "airflow_lineage_provider" / "consumer" / "ui" / "assets"
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def client(tmp_path: Path) -> TestClient:
    return TestClient(ui_app(f"sqlite:///{tmp_path / 'lineage.db'}"))


def _loaded_by(html: str) -> list[str]:
    return re.findall(r'(?:src|href)="([^"]*/ui/assets/[^"]+)"', html)


def _imports(script: str) -> list[str]:
    return re.findall(r'from "\./([^"]+)"', script)


def test_the_page_is_served_at_ui_with_a_strict_content_security_policy(client: TestClient) -> None:
    answer = client.get("/ui", params={"nodeId": "dataset:postgres://db:5432:public.orders"})
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/html")
    policy = answer.headers["content-security-policy"]
    assert "default-src 'self'" in policy and "script-src 'self';" in policy and "frame-ancestors 'self'" in policy
    assert '<meta name="lineage-base" content="">' in answer.text
    assert _loaded_by(answer.text) == ["/ui/assets/favicon.svg", "/ui/assets/lineage.css", "/ui/assets/app.js"]
    assert "/ui" not in client.get("/openapi.json").json()["paths"]


def test_mounted_under_a_prefix_the_page_loads_everything_from_there(tmp_path: Path) -> None:
    """As in the Airflow API server, which mounts the plugin's app under /lineage."""
    parent = FastAPI()
    parent.mount("/lineage", ui_app(f"sqlite:///{tmp_path / 'lineage.db'}"))
    client = TestClient(parent)
    page = client.get("/lineage/ui").text
    assert '<meta name="lineage-base" content="/lineage">' in page
    urls = _loaded_by(page)
    assert urls == [
        "/lineage/ui/assets/favicon.svg",
        "/lineage/ui/assets/lineage.css",
        "/lineage/ui/assets/app.js",
    ]
    for url in urls:
        assert client.get(url).status_code == 200, url
    assert client.get("/lineage/api/v1/namespaces").json() == {"namespaces": [], "totalCount": 0}


def test_every_module_the_page_imports_is_served_as_javascript(client: TestClient) -> None:
    pending, seen = ["app.js"], set()
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        answer = client.get(f"/ui/assets/{name}")
        assert answer.status_code == 200, name
        assert answer.headers["content-type"] == "text/javascript; charset=utf-8"
        assert answer.headers["x-content-type-options"] == "nosniff"
        pending += _imports(answer.text)
    assert seen == {p.name for p in ASSETS.glob("*.js")}  # no module left unused, none missing
    assert client.get("/ui/assets/lineage.css").headers["content-type"] == "text/css; charset=utf-8"
    assert client.get("/ui/assets/favicon.svg").headers["content-type"] == "image/svg+xml"


@pytest.mark.parametrize("name", ["nope.js", "..%2Frouter.py", "index.html.bak", "%2e%2e%2f__init__.py"])
def test_only_the_page_assets_are_served(client: TestClient, name: str) -> None:
    assert client.get(f"/ui/assets/{name}").status_code == 404


def test_assets_are_revalidated_by_etag(client: TestClient) -> None:
    first = client.get("/ui/assets/app.js")
    assert first.headers["cache-control"] == "no-cache"
    again = client.get("/ui/assets/app.js", headers={"If-None-Match": first.headers["etag"]})
    assert again.status_code == 304
    assert again.content == b""
    assert client.get("/ui/assets/app.js", headers={"If-None-Match": '"stale"'}).status_code == 200


def test_the_page_is_hand_written_and_self_contained() -> None:
    """Nothing fetched from elsewhere, no minified bundle, nothing inline that the policy would block."""
    for path in ASSETS.iterdir():
        text = path.read_text(encoding="utf-8")
        urls = set(re.findall(r"https?://[^\s\"'`)]+", text)) - {"http://www.w3.org/2000/svg"}
        assert urls == set(), (path.name, urls)
        assert "sourceMappingURL" not in text, path.name
        assert max(len(line) for line in text.splitlines()) <= 120, f"{path.name} has lines over 120 characters"
    page = (ASSETS / "index.html").read_text(encoding="utf-8")
    assert re.findall(r"<script(?![^>]*\bsrc=)", page) == []
    assert " style=" not in page and "<style" not in page


def test_the_wheel_ships_the_page(tmp_path: Path) -> None:
    """The package build as pip runs it (from a copy: setuptools writes build/ next to the sources)."""
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    shutil.copytree(
        REPO / "airflow_lineage_provider",
        source / "airflow_lineage_provider",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(tmp_path), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert build.returncode == 0, build.stderr[-3000:]
    (wheel,) = tmp_path.glob("airflow_lineage_provider-*.whl")
    shipped = set(zipfile.ZipFile(wheel).namelist())
    wanted = {f"airflow_lineage_provider/consumer/ui/assets/{p.name}" for p in ASSETS.iterdir()}
    assert wanted - shipped == set()
    assert "airflow_lineage_provider/consumer/ui/router.py" in shipped
