"""A real Airflow deployment for tests, set up by the recipe in ``docs/deploy.md``.

``airflow scheduler --skip-serve-logs``, ``airflow dag-processor``, ``airflow triggerer --skip-serve-logs`` and
``airflow api-server`` (127.0.0.1, a free port, one worker) run as processes of their own on a fresh AIRFLOW_HOME:
LocalExecutor on an SQLite metadata database (Airflow 3 allows it), SimpleAuthManager. Their configuration is the
recipe itself — its ``settings`` block is the whole ``airflow.cfg``, its shell blocks run in ``bash`` as written,
its ``export-dag`` block is the DAG file — plus what any deployment chooses for itself (executor, address, users,
secrets), given as ``AIRFLOW__*`` environment variables. The one change made to the recipe, the API server's port
in the connection, is checked to apply.

Every process is started in a session of its own and stopped by its process group when the block ends,
whatever happened; a failure within the block is raised again with the end of every log
(:meth:`Deployment.report`).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import subprocess
import time
from collections.abc import Iterator
from configparser import ConfigParser
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil  # type: ignore[import-untyped]  # no stubs installed

from support.airflow_run import VENV_BIN, airflow_env
from support.feast_consumer import free_port

RECIPE = Path(__file__).resolve().parents[2] / "docs" / "deploy.md"
#: ``<!-- recipe: NAME -->`` followed by a fenced code block.
_BLOCK = re.compile(
    r"<!-- recipe: (?P<name>[\w-]+) -->\s*```(?P<lang>\w+)\n(?P<code>.*?)^```", re.DOTALL | re.MULTILINE
)
#: The recipe's blocks, each used below: a block added to the recipe must be added here, so that it runs.
RECIPE_BLOCKS = {"settings", "connections", "export-dag", "example-connection"}
#: The API server's port the recipe's connection names (Airflow's default), replaced by the test's own.
RECIPE_PORT = "--conn-port 8080"

USER, PASSWORD = "admin", secrets.token_urlsafe(12)
#: Seconds every stopped process gets to end before its process group is killed.
STOP_GRACE = 20.0


def recipe_blocks(path: Path = RECIPE) -> dict[str, str]:
    """The recipe's marked code blocks, by name (``settings``, ``connections``, ``export-dag``, ...)."""
    return {match["name"]: match["code"] for match in _BLOCK.finditer(path.read_text())}


def recipe_settings(blocks: dict[str, str]) -> ConfigParser:
    """The recipe's ``airflow.cfg`` settings, parsed as Airflow parses its configuration file."""
    parser = ConfigParser(interpolation=None)
    parser.read_string(blocks["settings"])
    return parser


class Deadline:
    """One time budget for a whole deployment test: every wait takes what is left of it."""

    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return self.end - time.monotonic()

    def wait_for(self, what: str, check: Any, interval: float = 1.0, detail: Any = None) -> Any:
        """Call ``check`` until it returns something truthy; fail naming ``what`` (and ``detail()``) when the
        budget is spent."""
        while True:
            found = check()
            if found:
                return found
            if self.left() <= 0:
                raise AssertionError(f"timed out waiting for {what}" + (f": {detail()}" if detail else ""))
            time.sleep(min(interval, max(self.left(), 0.05)))


@dataclass
class Deployment:
    """A running deployment: its home, URL, environment and processes."""

    root: Path
    home: Path
    dags: Path
    url: str
    env: dict[str, str]
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    listening: set[tuple[str, str, int]] = field(default_factory=set)

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    def token(self, username: str = USER, password: str = PASSWORD) -> str:
        """An Airflow JWT from ``POST /auth/token``, as a user or a script gets one."""
        answer = httpx.post(f"{self.url}/auth/token", json={"username": username, "password": password}, timeout=30)
        assert answer.status_code in (200, 201), answer.text
        return str(answer.json()["access_token"])

    def client(self) -> httpx.Client:
        """An HTTP client to the API server with an admin's token."""
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {self.token()}"}, timeout=30)

    def check_alive(self) -> None:
        """Fail when a process of the deployment has ended."""
        for name, process in self.processes.items():
            if process.poll() is not None:
                raise AssertionError(f"airflow {name} exited with {process.returncode}")

    def note_listening(self) -> set[tuple[str, str, int]]:
        """Record the listening TCP sockets of every process of the deployment and its children (workers,
        task runners) now; returns all recorded so far as ``(process, address, port)``."""
        for name, process in self.processes.items():
            try:
                tree = [psutil.Process(process.pid), *psutil.Process(process.pid).children(recursive=True)]
            except psutil.NoSuchProcess:
                continue
            for member in tree:
                try:
                    sockets = member.net_connections(kind="inet")
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    continue
                for sock in sockets:
                    if sock.status == psutil.CONN_LISTEN:
                        self.listening.add((f"{name}:{member.pid}", sock.laddr.ip, sock.laddr.port))
        return self.listening

    def report(self) -> str:
        """The end of each process's log and of every task log, for a failure message."""
        parts = []
        for path in sorted(self.logs.glob("*.log")):
            parts.append(f"--- {path.name} (last 4000 characters)\n{path.read_text(errors='replace')[-4000:]}")
        for path in sorted((self.home / "logs").rglob("attempt=*.log"))[:40]:
            text = path.read_text(errors="replace")
            if '"level":"error"' in text or "Traceback" in text or "ERROR" in text:
                parts.append(f"--- {path.relative_to(self.home)} (last 2500 characters)\n{text[-2500:]}")
        return "\n".join(parts)


def _run(command: list[str], env: dict[str, str], cwd: Path, timeout: float) -> str:
    """Run ``command`` to its end in a process group of its own (killed whole when it overruns ``timeout``)."""
    process = subprocess.Popen(
        command, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    try:
        output, _ = process.communicate(timeout=max(timeout, 1.0))
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        raise AssertionError(
            f"{' '.join(command[:3])} did not finish within {timeout:.0f} s:\n{output[-3000:]}"
        ) from None
    if process.returncode != 0:
        raise AssertionError(f"{' '.join(command[:3])} failed ({process.returncode}):\n{output[-3000:]}")
    return output


def run_recipe_shell(code: str, env: dict[str, str], cwd: Path, timeout: float = 180) -> dict[str, str]:
    """Run a shell block of the recipe with ``bash -euo pipefail``, as written; returns the variables it exported
    (what the recipe says to keep in the components' environment)."""
    dump = cwd / f"env-{secrets.token_hex(4)}.json"
    script = f'{code}\npython -c "import json, os; print(json.dumps(dict(os.environ)))" > {dump}\n'
    _run(["bash", "-euo", "pipefail", "-c", script], env, cwd, timeout)
    after = json.loads(dump.read_text())
    dump.unlink()
    return {key: value for key, value in after.items() if env.get(key) != value and key.startswith("AIRFLOW__")}


def run_python(code: str, env: dict[str, str], cwd: Path, timeout: float = 120) -> str:
    """Run ``code`` with the deployment's Python and environment (its metadata database); returns its output."""
    return _run([str(VENV_BIN / "python"), "-c", code], env, cwd, timeout)


def deployment_env(home: Path, dags: Path, port: int, root: Path) -> dict[str, str]:
    """What a deployment chooses for itself, beside the recipe: executor, address, users and secrets."""
    from cryptography.fernet import Fernet

    passwords = root / "passwords.json"
    passwords.write_text(json.dumps({USER: PASSWORD}))
    return airflow_env(
        home,
        dags,
        {
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__CORE__PARALLELISM": "4",
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{USER}:admin",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
            "AIRFLOW__CORE__FERNET_KEY": Fernet.generate_key().decode(),
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(port),
            "AIRFLOW__API__WORKERS": "1",
            "AIRFLOW__API__SECRET_KEY": secrets.token_urlsafe(16),
            "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_urlsafe(32),
            "LINEAGE_DEMO_DIR": str(root),
        },
    )


def _start(deployment: Deployment, name: str, *arguments: str) -> None:
    log = (deployment.logs / f"{name}.log").open("w")
    deployment.processes[name] = subprocess.Popen(
        [str(VENV_BIN / "airflow"), *arguments],
        env=deployment.env,
        cwd=deployment.root,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group: stopped with every child it started
    )
    log.close()


def _stop(processes: dict[str, subprocess.Popen[bytes]]) -> None:
    """SIGTERM each process group started here, then SIGKILL what is left of it after :data:`STOP_GRACE`."""
    for process in processes.values():
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
    end = time.monotonic() + STOP_GRACE
    for process in processes.values():
        with suppress(subprocess.TimeoutExpired):
            process.wait(timeout=max(end - time.monotonic(), 0.1))
    for process in processes.values():
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)  # the group: children that outlived their parent too
        process.wait(timeout=10)


def _healthy(deployment: Deployment) -> bool:
    deployment.check_alive()
    try:
        health = httpx.get(f"{deployment.url}/api/v2/monitor/health", timeout=5).json()
    except (httpx.HTTPError, ValueError):
        return False
    parts = ("metadatabase", "scheduler", "dag_processor", "triggerer")
    return all((health.get(part) or {}).get("status") == "healthy" for part in parts)


@contextmanager
def airflow_deployment(root: Path, dag_files: list[Path], deadline: Deadline) -> Iterator[Deployment]:
    """Set up a deployment in ``root`` by the recipe, with ``dag_files`` and the recipe's export DAG in its DAGs
    folder, and run it until the block ends."""
    blocks = recipe_blocks()
    assert set(blocks) == RECIPE_BLOCKS, f"the recipe's blocks are {sorted(blocks)}: run each new one here"
    home, dags = root / "airflow", root / "dags"
    for folder in (home, dags, root / "logs"):
        folder.mkdir(parents=True, exist_ok=True)
    for dag_file in dag_files:
        (dags / dag_file.name).write_text(dag_file.read_text())
    (dags / "openlineage_export.py").write_text(blocks["export-dag"])
    (home / "airflow.cfg").write_text(blocks["settings"])
    port = free_port()
    env = deployment_env(home, dags, port, root)
    deployment = Deployment(root, home, dags, f"http://127.0.0.1:{port}", env)
    try:
        _run([str(VENV_BIN / "airflow"), "db", "migrate"], env, root, timeout=deadline.left())
        assert RECIPE_PORT in blocks["connections"], f"the recipe's connection no longer names {RECIPE_PORT!r}"
        connections = blocks["connections"].replace(RECIPE_PORT, f"--conn-port {port}")
        env.update(run_recipe_shell(connections, env, root, timeout=deadline.left()))
        env.update(run_recipe_shell(blocks["example-connection"], env, root, timeout=deadline.left()))
        _start(deployment, "api-server", "api-server")
        _start(deployment, "scheduler", "scheduler", "--skip-serve-logs")
        _start(deployment, "dag-processor", "dag-processor")
        _start(deployment, "triggerer", "triggerer", "--skip-serve-logs")
        deadline.wait_for("the scheduler, DAG processor and API server to be healthy", lambda: _healthy(deployment))
        yield deployment
    except BaseException as error:  # the set-up's or the block's: reported with every log (pytest.fail's too)
        if isinstance(error, KeyboardInterrupt | GeneratorExit):
            raise
        raise AssertionError(f"{type(error).__name__}: {error}\n{deployment.report()}") from error
    finally:
        _stop(deployment.processes)
