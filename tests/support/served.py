"""``airflow-lineage serve`` as a real subprocess on 127.0.0.1, for tests and benchmarks.

Usage::

    with serve_consumer(f"sqlite:///{tmp_path / 'lineage.db'}", tmp_path, "--key", "ui:read:s3cret") as served:
        requests.get(f"{served.url}/api/v1/namespaces", headers={"X-API-Key": "s3cret"})

The server is started with the project's ``airflow-lineage`` entry point (or, with ``tree``, importing the
package from another checkout), its output goes to ``<folder>/serve.log``, and it is stopped by its process
id when the block ends. It is ready when ``GET /api/v1/namespaces`` answers at all: 200 without keys, 401
with keys (the request carries none).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import requests

from support.feast_consumer import free_port

#: Seconds a server may take to answer its first request.
START_TIMEOUT = 60.0


@dataclass(frozen=True)
class Served:
    """A running ``airflow-lineage serve``: its base URL, process and log file."""

    url: str
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def pid(self) -> int:
        return self.process.pid


@contextmanager
def serve_consumer(store: str, folder: Path, *options: str, tree: Path | None = None) -> Iterator[Served]:
    """``airflow-lineage serve --store store`` on a free port of 127.0.0.1 with ``options``, until the block ends.

    Raises ``RuntimeError`` with the end of the server's log when it exits or does not answer in time.
    """
    port = free_port()
    command = [
        str(Path(sys.executable).parent / "airflow-lineage"),
        *("serve", "--store", store, "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"),
        *options,
    ]
    folder.mkdir(parents=True, exist_ok=True)
    log_path = folder / "serve.log"
    log = open(log_path, "a")  # noqa: SIM115 - closed below
    env = {**os.environ, "PYTHONPATH": str(tree)} if tree is not None else None
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
    served = Served(f"http://127.0.0.1:{port}", process, log_path)
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            try:
                if requests.get(f"{served.url}/api/v1/namespaces", timeout=2).status_code in (200, 401):
                    break
            except requests.RequestException:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"airflow-lineage serve did not start:\n{log_path.read_text()[-2000:]}")
            time.sleep(0.2)
        yield served
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)
        log.close()
