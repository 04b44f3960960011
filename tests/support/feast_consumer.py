"""Feast's OpenLineage consumer (``feast serve_lineage``) as a real third-party consumer for tests and benchmarks.

Feast cannot share the project's virtualenv (its pins clash with Airflow's), so it lives in its own one,
``<repo>/.venv-feast`` (ignored by git), created on first use with ``pip install feast==0.67.0`` (about
40 s from a warm pip cache, a few minutes fresh) and reused afterwards. Creation is serialised with a
file lock, so parallel users wait for one install.

Usage::

    from support.feast_consumer import FeastLineageServer, FeastUnavailable

    with FeastLineageServer(tmp_path, api_key="s3cret") as feast:
        ship_to(feast.url, endpoint=feast.endpoint, api_key=feast.api_key)
        runs = feast.runs()            # GET /api/v1/lineage/openlineage/runs
        events = feast.events("job")   # GET /api/v1/lineage/openlineage/events?job_name=job

The server writes a ``feature_store.yaml`` with ``openlineage.consumer.enabled: true`` and a SQL registry
on SQLite in the given folder, listens on a free port on 127.0.0.1 only, and is stopped (by its process
id) when the ``with`` block ends. :class:`FeastUnavailable` is raised, with the pip or server output,
when Feast cannot be installed or started; callers decide whether that skips or fails.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO

FEAST_VERSION = "0.67.0"
REPO = Path(__file__).resolve().parents[2]
VENV = Path(os.environ.get("LINEAGE_FEAST_VENV", REPO / ".venv-feast"))
_STAMP = VENV / ".alp-feast-installed"
INSTALL_TIMEOUT = 900.0
START_TIMEOUT = 90.0


class FeastUnavailable(RuntimeError):
    """Feast's consumer could not be installed or started; the message carries the tool's own output."""


def _base_python() -> str:
    """The interpreter the project's virtualenv was made from (a venv inside a venv is fragile)."""
    candidate = Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    return str(candidate if candidate.exists() else sys.executable)


def feast_executable() -> Path:
    return VENV / "bin" / "feast"


def ensure_feast_venv() -> Path:
    """Create (once) the virtualenv with ``feast==FEAST_VERSION`` and return the ``feast`` executable."""
    if _STAMP.is_file() and _STAMP.read_text().strip() == FEAST_VERSION and feast_executable().exists():
        return feast_executable()
    VENV.parent.mkdir(parents=True, exist_ok=True)
    lock_path = VENV.parent / f"{VENV.name}.lock"
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be installing: wait for it
        if _STAMP.is_file() and _STAMP.read_text().strip() == FEAST_VERSION and feast_executable().exists():
            return feast_executable()
        log = VENV.parent / f"{VENV.name}-install.log"
        steps = [
            [_base_python(), "-m", "venv", "--clear", str(VENV)],
            [str(VENV / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check", "--quiet",
             f"feast=={FEAST_VERSION}"],
        ]  # fmt: skip
        with open(log, "w") as out:
            for step in steps:
                try:
                    result = subprocess.run(step, stdout=out, stderr=subprocess.STDOUT, timeout=INSTALL_TIMEOUT)
                except subprocess.TimeoutExpired:
                    raise FeastUnavailable(f"{' '.join(step)} took over {INSTALL_TIMEOUT:.0f}s (log: {log})") from None
                if result.returncode != 0:
                    tail = log.read_text()[-3000:]
                    raise FeastUnavailable(f"{' '.join(step)} failed ({result.returncode}); log {log}:\n{tail}")
        if not feast_executable().exists():
            raise FeastUnavailable(f"feast=={FEAST_VERSION} installed but {feast_executable()} is missing")
        _STAMP.write_text(FEAST_VERSION)
    return feast_executable()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def feature_store_yaml(folder: Path, api_key: str | None = None, project: str = "lineage_interop") -> str:
    """A feature repository config: SQL registry on SQLite, SQLite online store, OpenLineage consumer on."""
    consumer: dict[str, Any] = {"enabled": True, "retention_days": 0}
    if api_key:
        consumer["api_key"] = api_key
    config = {
        "project": project,
        "provider": "local",
        "registry": {"registry_type": "sql", "path": f"sqlite:///{folder / 'registry.db'}", "cache_ttl_seconds": 60},
        "online_store": {"type": "sqlite", "path": str(folder / "online_store.db")},
        "entity_key_serialization_version": 3,
        # Feast itself emits nothing here: it only consumes.
        "openlineage": {"enabled": True, "emit_on_apply": False, "emit_on_materialize": False, "consumer": consumer},
    }
    return json.dumps(config, indent=2)  # JSON is YAML


class FeastLineageServer:
    """``feast serve_lineage`` on 127.0.0.1, as a context manager. See the module docstring."""

    endpoint = "api/v1/lineage"

    def __init__(self, folder: Path, api_key: str | None = None, port: int | None = None) -> None:
        self.folder = Path(folder)
        self.api_key = api_key
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = self.folder / "feast-serve-lineage.log"

    def start(self) -> FeastLineageServer:
        feast = ensure_feast_venv()
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / "feature_store.yaml").write_text(feature_store_yaml(self.folder, self.api_key))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENLINEAGE", "AIRFLOW", "FEAST_"))}
        env["PATH"] = f"{feast.parent}{os.pathsep}{env.get('PATH', '')}"
        self._log: BinaryIO | None = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            [str(feast), "-c", str(self.folder), "serve_lineage", "--host", "127.0.0.1", "--port", str(self.port)],
            cwd=self.folder,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self.stop()
                raise FeastUnavailable(f"feast serve_lineage exited:\n{self.log_path.read_text()[-3000:]}")
            try:
                self.get("lineage/openlineage/jobs")
                return self
            except (OSError, urllib.error.URLError):
                time.sleep(0.25)
        self.stop()
        raise FeastUnavailable(f"feast serve_lineage did not answer in {START_TIMEOUT:.0f}s:\n{self._log_tail()}")

    def _log_tail(self) -> str:
        return self.log_path.read_text()[-3000:] if self.log_path.exists() else ""

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self.process = None
        log = getattr(self, "_log", None)  # not set before start()
        if log is not None:
            log.close()
            self._log = None

    def __enter__(self) -> FeastLineageServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def get(self, path: str) -> Any:
        """GET ``/api/v1/<path>`` and return the decoded JSON."""
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}", timeout=10) as response:
            return json.loads(response.read())

    def _all(self, path: str, key: str, page: int, **query: str | None) -> list[dict[str, Any]]:
        params = {k: v for k, v in query.items() if v is not None}
        rows: list[dict[str, Any]] = []
        while True:
            encoded = urllib.parse.urlencode({**params, "limit": page, "offset": len(rows)})
            batch = list(self.get(f"{path}?{encoded}")[key])
            rows.extend(batch)
            if len(batch) < page:
                return rows

    def runs(self, job_name: str | None = None) -> list[dict[str, Any]]:
        """Every run Feast knows (``GET /api/v1/lineage/openlineage/runs``, all pages)."""
        return self._all("lineage/openlineage/runs", "runs", 500, job_name=job_name)

    def events(self, job_name: str | None = None) -> list[dict[str, Any]]:
        """Every stored event (``GET /api/v1/lineage/openlineage/events``, all pages)."""
        return self._all("lineage/openlineage/events", "events", 1000, job_name=job_name)

    def jobs(self) -> list[dict[str, Any]]:
        return list(self.get("lineage/openlineage/jobs")["jobs"])
