"""What the consumer's auth check costs per request: a depth-3 walk and a single-event ingest,
with and without a credential to check, standalone and inside Airflow's API server. Target: under 5%.

One SQLite lineage store, filled with ``consumer_workload.py``'s layered graph (``--jobs`` jobs in 10
layers), is served by three server processes on 127.0.0.1:

* standalone, no keys (``airflow-lineage serve --allow-anonymous admin``): the "without auth" baseline;
* standalone with 5 keys (``--key NAME:SCOPE:SECRET`` x5): requests carry the write key as
  ``Authorization: Bearer``; every configured key is compared (constant-time matching);
* Airflow's API server (``airflow.api_fastapi.app.create_app()`` under uvicorn, its own AIRFLOW_HOME and
  SQLite metadata DB, SimpleAuthManager) with the plugin's consumer at ``/lineage``,
  ``consumer_anonymous_access = admin`` and the same 5 keys in ``consumer_keys_file``: requests without a
  credential (the baseline there), with an Airflow JWT from ``POST /auth/token`` (the admin user), and
  with the consumer write key.

Each baseline is also measured a second time through its own connection ("A/A"), to show the noise floor.

Requests: ``GET /api/v1/lineage?nodeId=<last-layer dataset>&depth=3&direction=upstream`` (cycling over 10
roots), and ``POST /api/v1/lineage`` of one fresh event (a START or COMPLETE with a new runId, of a job of a
second small graph in namespace ``ingest``, so ingest never touches the walked nodes). One sequential
client (``requests``, a kept-alive session per case), bodies serialized before the clock starts. After a
warm-up, the requests of every (case, request) pair are split into blocks of ``--block`` (10), one block
of each pair per round, in a new shuffled order every round (a round takes about a second), so the
machine's drift and other load hit every case alike; the first request of each block is not timed. "vs
baseline" is the median over rounds of the ratio of the case's block median to its baseline's block
median in the same round (a paired figure), with the difference of the overall medians in µs.

Then, in process: ``await guard.authorize(request, Access.READ)`` of a ``KeyGuard`` with 0-100 keys, and
in a child process with the Airflow environment the steps of ``AirflowGuard``'s JWT path (token
validation, ``RevokedToken.is_revoked``, ``is_authorized_asset`` through the thread pool).

    .venv/bin/python bench/auth_overhead.py                  # ~2.5 minutes
    .venv/bin/python bench/auth_overhead.py --requests 2000  # ~4 minutes (docs/benchmarks.md)
    .venv/bin/python bench/auth_overhead.py --quick          # smaller graph, 200 requests: ~1 minute
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from consumer_workload import LAYERS, NAMESPACE, dataset_name, workload  # noqa: E402

INGEST_NAMESPACE = "ingest"
INGEST_JOBS = 200
KEY_COUNT = 5
WRITE_SECRET = "bench-write-" + "w" * 24
ADMIN_PASSWORD = "bench-admin-password"
BLOCK_SKIP = 1
SERVE_AIRFLOW = """
import sys, uvicorn
from airflow.api_fastapi.app import create_app
uvicorn.run(create_app(), host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
"""


def _keys() -> list[dict[str, str]]:
    """``KEY_COUNT`` keys, the write key the clients send last (matching compares every key anyway)."""
    keys = [
        {"name": f"reader-{i}", "scope": "read" if i % 2 else "admin", "secret": f"bench-other-{i}-" + "x" * 24}
        for i in range(KEY_COUNT - 1)
    ]
    return [*keys, {"name": "producers", "scope": "write", "secret": WRITE_SECRET}]


# --- servers ------------------------------------------------------------------------------------------


def _wait_until_up(url: str, process: subprocess.Popen, log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if requests.get(url, timeout=2).status_code == 200:
                return
        except requests.RequestException:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the server did not start ({url}):\n{log.read_text()[-3000:]}")
        time.sleep(0.2)


@contextmanager
def _process(command: list[str], log: Path, health: str, env: dict[str, str] | None = None) -> Iterator[int]:
    """Run ``command`` until the block ends; yields its pid once ``health`` answers 200."""
    with log.open("a") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
        try:
            _wait_until_up(health, process, log, 180)
            yield process.pid
        finally:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@contextmanager
def serve_standalone(store: str, folder: Path, name: str, *options: str) -> Iterator[str]:
    """``airflow-lineage serve`` on a free port; yields its base URL."""
    from support.consumer_helpers import free_port

    port = free_port()
    command = [
        str(Path(sys.executable).parent / "airflow-lineage"),
        *("serve", "--store", store, "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"),
        *options,
    ]
    url = f"http://127.0.0.1:{port}"
    with _process(command, folder / f"{name}.log", f"{url}/openapi.json"):
        yield url


def airflow_environment(folder: Path, store: str) -> dict[str, str]:
    """The environment of Airflow's API server (and of the in-process profile of its guard)."""
    from support.airflow_run import airflow_env

    home = folder / "airflow"
    keys_file = folder / "keys.json"
    keys_file.write_text(json.dumps({"keys": _keys()}))
    passwords = folder / "passwords.json"
    passwords.write_text(json.dumps({"admin": ADMIN_PASSWORD}))
    return airflow_env(
        home,
        home / "dags",
        {
            "AIRFLOW__LINEAGE_PROVIDER__CONSUMER_STORE_URL": store,
            "AIRFLOW__LINEAGE_PROVIDER__CONSUMER_ANONYMOUS_ACCESS": "admin",
            "AIRFLOW__LINEAGE_PROVIDER__CONSUMER_KEYS_FILE": str(keys_file),
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
            "AIRFLOW__API_AUTH__JWT_SECRET": "bench-jwt-secret-" + "s" * 64,  # >= 64 bytes for HS512
            "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING",  # as the standalone servers' --log-level warning
        },
    )


@contextmanager
def serve_airflow(folder: Path, env: dict[str, str]) -> Iterator[str]:
    """Airflow's API server with the provider's plugin; yields its base URL."""
    from support.consumer_helpers import free_port

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-c", SERVE_AIRFLOW, str(port)]
    with _process(command, folder / "airflow-api-server.log", f"{url}/api/v2/monitor/health", env):
        probe = requests.get(f"{url}/lineage/api/v1/namespaces", timeout=30)
        if probe.status_code != 200:
            raise RuntimeError(f"the consumer is not mounted at /lineage: {probe.status_code} {probe.text[:300]}")
        yield url


def airflow_token(url: str) -> str:
    """A JWT for the SimpleAuthManager admin user, from Airflow's own ``POST /auth/token``."""
    response = requests.post(f"{url}/auth/token", json={"username": "admin", "password": ADMIN_PASSWORD}, timeout=30)
    response.raise_for_status()
    return response.json()["access_token"]


# --- the workload -------------------------------------------------------------------------------------


def _in_namespace(event: dict[str, Any], namespace: str) -> dict[str, Any]:
    """``event`` with its job and datasets moved to ``namespace``."""
    event = json.loads(json.dumps(event))
    event["job"]["namespace"] = namespace
    for dataset in (*event.get("inputs", ()), *event.get("outputs", ())):
        dataset["namespace"] = namespace
    return event


class FreshEvents:
    """Endless single events of re-runs of the ``ingest`` graph's jobs: START then COMPLETE of a new runId."""

    def __init__(self, pool: list[dict[str, Any]]) -> None:
        self.pool = pool
        self.at = 0
        self.run_id = ""

    def bodies(self, count: int) -> list[bytes]:
        out = []
        for _ in range(count):
            event = self.pool[self.at % len(self.pool)]
            if self.at % 2 == 0:  # a START: a new run
                self.run_id = str(uuid.uuid4())
            event["run"]["runId"] = self.run_id
            out.append(json.dumps(event).encode())
            self.at += 1
        return out


def fill(url: str, events: list[dict[str, Any]]) -> None:
    with requests.Session() as session:
        for offset in range(0, len(events), 500):
            response = session.post(f"{url}/api/v1/lineage/batch", json=events[offset : offset + 500], timeout=600)
            if response.status_code not in (200, 204):
                raise RuntimeError(f"batch ingest failed: {response.status_code} {response.text[:500]}")


# --- cases and timing ---------------------------------------------------------------------------------


@dataclass
class Case:
    label: str
    base: str
    """Base URL of the consumer (``http://host:port`` or ``.../lineage``)."""
    headers: dict[str, str]
    baseline: str
    """Label of the case this one is compared with (itself for a baseline)."""
    session: requests.Session = field(default_factory=requests.Session)
    samples: dict[str, list[float]] = field(default_factory=lambda: {"walk": [], "ingest": []})
    per_round: dict[str, list[float]] = field(default_factory=lambda: {"walk": [], "ingest": []})

    def __post_init__(self) -> None:
        self.session.headers.update(self.headers)


ROOTS = [f"dataset:{NAMESPACE}:{dataset_name(LAYERS - 1, i)}" for i in range(10)]
JSON_HEADERS = {"Content-Type": "application/json"}


def _run_block(case: Case, op: str, count: int, events: FreshEvents, record: bool) -> list[float]:
    """``count`` timed requests of ``op`` (after ``BLOCK_SKIP`` untimed ones) on ``case``'s connection."""
    session, base = case.session, case.base
    times: list[float] = []
    failures: list[str] = []
    if op == "walk":
        url = f"{base}/api/v1/lineage"
        params: list[dict[str, str | int]] = [
            {"nodeId": ROOTS[i % len(ROOTS)], "depth": 3, "direction": "upstream"} for i in range(count + BLOCK_SKIP)
        ]
        for i, query in enumerate(params):
            start = time.perf_counter()
            response = session.get(url, params=query, timeout=60)
            _ = response.content
            elapsed = time.perf_counter() - start
            if response.status_code != 200:
                failures.append(f"{response.status_code} {response.text[:200]}")
            if i >= BLOCK_SKIP:
                times.append(elapsed)
    else:
        url = f"{base}/api/v1/lineage"
        for i, body in enumerate(events.bodies(count + BLOCK_SKIP)):
            start = time.perf_counter()
            response = session.post(url, data=body, headers=JSON_HEADERS, timeout=60)
            _ = response.content
            elapsed = time.perf_counter() - start
            if response.status_code != 201:
                failures.append(f"{response.status_code} {response.text[:200]}")
            if i >= BLOCK_SKIP:
                times.append(elapsed)
    if failures:
        raise RuntimeError(f"{case.label} / {op}: {len(failures)} failed requests, first: {failures[0]}")
    if record:
        case.samples[op].extend(times)
        case.per_round[op].append(statistics.median(times))
    return times


def measure(cases: list[Case], rounds: int, block: int, warmup: int, events: FreshEvents) -> None:
    units = [(case, op) for case in cases for op in ("walk", "ingest")]
    for case, op in units:
        _run_block(case, op, warmup, events, record=False)
    rng = random.Random(11)
    started = time.perf_counter()
    for number in range(rounds):
        order = units[:]
        rng.shuffle(order)
        for case, op in order:
            _run_block(case, op, block, events, record=True)
        if (number + 1) % max(1, rounds // 10) == 0:
            print(f"  round {number + 1}/{rounds}: {time.perf_counter() - started:.0f} s", flush=True)


def _p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[-1]


# --- in-process guard costs ---------------------------------------------------------------------------


def _request(headers: dict[str, str]) -> Any:
    from starlette.requests import Request

    scope = {
        "type": "http",
        "method": "GET",
        "path": "/api/v1/lineage",
        "query_string": b"",
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
    }
    return Request(scope)


IDLE_S = 0.003
"""The pause before each call of the "after idle" figures: about what a server waits between requests."""


async def _per_call(call: Callable[[Any], Any], make: Callable[[], Any], iterations: int) -> tuple[float, float]:
    """Median µs of ``await call(make())``: back to back (batches of 200), and each after ``IDLE_S`` idle.

    Back to back the caches are hot and the thread pool's workers awake; after an idle pause — as between
    the requests of a sequential client — the same code runs cold, which is what a server sees.
    """
    batches = []
    for _ in range(max(5, iterations // 200)):
        inputs = [make() for _ in range(200)]
        start = time.perf_counter()
        for item in inputs:
            await call(item)
        batches.append((time.perf_counter() - start) / len(inputs) * 1e6)
    single = []
    for _ in range(max(100, iterations // 40)):
        item = make()
        await asyncio.sleep(IDLE_S)
        start = time.perf_counter()
        await call(item)
        single.append((time.perf_counter() - start) * 1e6)
    return statistics.median(batches), statistics.median(single)


def keyguard_costs(iterations: int) -> list[tuple[str, float, float]]:
    """µs per ``await KeyGuard.authorize(request, Access.READ)`` for 0 (anonymous) to 100 keys."""
    from airflow_lineage_provider.consumer.security.access import Access, ApiKey, KeyRing
    from airflow_lineage_provider.consumer.security.guards import KeyGuard, header_credential

    rows = []

    async def run() -> None:
        anonymous = KeyGuard(KeyRing(), Access.ADMIN)
        costs = await _per_call(lambda r: anonymous.authorize(r, Access.READ), lambda: _request({}), iterations)
        rows.append(("KeyGuard, no keys, no header (anonymous)", *costs))
        bearer = {"Authorization": f"Bearer {WRITE_SECRET}"}

        async def parse(r: Any) -> None:
            header_credential(r)

        costs = await _per_call(parse, lambda: _request(bearer), iterations)
        rows.append(("header_credential (Bearer): reading the header", *costs))
        for count in (1, 5, 20, 100):
            others = [ApiKey(f"k{i}", Access.READ, f"other-secret-{i:04d}-" + "x" * 20) for i in range(count - 1)]
            guard = KeyGuard(KeyRing([*others, ApiKey("producers", Access.WRITE, WRITE_SECRET)]))
            check = lambda r, g=guard: g.authorize(r, Access.READ)  # noqa: E731
            costs = await _per_call(check, lambda: _request(bearer), iterations)
            rows.append((f"KeyGuard, {count} key{'s' if count > 1 else ''}, Bearer write key", *costs))

    asyncio.run(run())
    return rows


def airflow_guard_profile(iterations: int) -> list[tuple[str, float, float]]:
    """Run in the Airflow environment (a child process): µs of each step of AirflowGuard's paths."""
    from airflow.api_fastapi.app import init_auth_manager
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser
    from airflow.models.revoked_token import RevokedToken
    from fastapi.concurrency import run_in_threadpool

    from airflow_lineage_provider import conf
    from airflow_lineage_provider.consumer.security.access import Access, KeyRing, load_keys_file
    from airflow_lineage_provider.plugins.airflow_guard import AirflowGuard

    manager = init_auth_manager()
    user = SimpleAuthManagerUser(username="admin", role="admin")
    token = manager.generate_jwt(user)
    validator = manager._get_token_validator()
    keys_file = conf.consumer_keys_file()
    assert keys_file is not None, "airflow_environment() sets consumer_keys_file"
    keys = KeyRing(load_keys_file(keys_file))
    guard = AirflowGuard(keys, Access.ADMIN)  # the default: decisions remembered 5 s
    uncached = AirflowGuard(keys, Access.ADMIN, cache_seconds=0)  # consumer_auth_cache_seconds = 0
    rows = []

    async def run() -> None:
        jti = (await validator.avalidated_claims(token))["jti"]

        async def validate(_: Any) -> None:
            await validator.avalidated_claims(token)

        async def revoked(_: Any) -> None:
            RevokedToken.is_revoked(jti)

        async def from_token(_: Any) -> None:
            await manager.get_user_from_token(token)

        async def authorized(_: Any) -> None:
            manager.is_authorized_asset(method="POST", user=user)

        async def authorized_in_pool(_: Any) -> None:
            await run_in_threadpool(manager.is_authorized_asset, method="POST", user=user)

        none = lambda: None  # noqa: E731
        steps: list[tuple[str, Callable[[Any], Any], Callable[[], Any]]] = [
            (
                "AirflowGuard, no header (anonymous opt-in)",
                lambda r: guard.authorize(r, Access.WRITE),
                lambda: _request({}),
            ),
            (
                "AirflowGuard, Bearer consumer key (5 keys)",
                lambda r: guard.authorize(r, Access.WRITE),
                lambda: _request({"Authorization": f"Bearer {WRITE_SECRET}"}),
            ),
            (
                "AirflowGuard, Bearer Airflow JWT, decision remembered (default)",
                lambda r: guard.authorize(r, Access.WRITE),
                lambda: _request({"Authorization": f"Bearer {token}"}),
            ),
            (
                "AirflowGuard, Bearer Airflow JWT, cache off: whole check",
                lambda r: uncached.authorize(r, Access.WRITE),
                lambda: _request({"Authorization": f"Bearer {token}"}),
            ),
            ("  - get_user_from_token (Airflow's, = its own API's)", from_token, none),
            ("    - JWTValidator.avalidated_claims (signature, claims)", validate, none),
            ("    - RevokedToken.is_revoked (metadata DB query)", revoked, none),
            ("  - is_authorized_asset (SimpleAuthManager), direct", authorized, none),
            ("  - is_authorized_asset through run_in_threadpool", authorized_in_pool, none),
        ]
        for label, call, make in steps:
            rows.append((label, *await _per_call(call, make, iterations)))

    asyncio.run(run())
    return rows


def airflow_profile_in_child(env: dict[str, str], iterations: int) -> list[tuple[str, float, float]]:
    result = subprocess.run(
        [
            sys.executable,
            str(Path(__file__).resolve()),
            "--airflow-guard-profile",
            "--guard-iterations",
            str(iterations),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if result.returncode != 0:
        raise RuntimeError(f"the Airflow guard profile failed:\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}")
    return [tuple(row) for row in json.loads(result.stdout.strip().splitlines()[-1])]


# --- report -------------------------------------------------------------------------------------------


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:,.0f} µs"


def report(cases: list[Case]) -> tuple[str, list[dict[str, Any]]]:
    by_label = {case.label: case for case in cases}
    lines = [
        "| case | walk median | walk p95 | walk vs baseline | ingest median | ingest p95 | ingest vs baseline |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    rows = []
    for case in cases:
        base = by_label[case.baseline]
        cells = [case.label]
        row: dict[str, Any] = {"case": case.label, "baseline": case.baseline}
        for op in ("walk", "ingest"):
            samples, reference = case.samples[op], base.samples[op]
            median, p95 = statistics.median(samples), _p95(samples)
            ref_median = statistics.median(reference)
            round_ratios = [a / b for a, b in zip(case.per_round[op], base.per_round[op], strict=True)]
            row[op] = {
                "median_s": median,
                "p95_s": p95,
                "ratio_of_medians": median / ref_median,
                "p95_ratio": p95 / _p95(reference),
                "delta_s": median - ref_median,
                "round_ratios": round_ratios,
                "round_ratio_median": statistics.median(round_ratios),
                "n": len(samples),
            }
            if case is base:
                versus = "baseline"
            else:
                quartiles = statistics.quantiles(round_ratios, n=4)
                versus = (
                    f"{statistics.median(round_ratios):.3f}x (IQR {quartiles[0]:.2f}-{quartiles[2]:.2f}); "
                    f"{(median - ref_median) * 1e6:+,.0f} µs"
                )
            cells += [_us(median), _us(p95), versus]
        lines.append("| " + " | ".join(cells) + " |")
        rows.append(row)
    return "\n".join(lines), rows


def _guard_table(title: str, rows: list[tuple[str, float, float]]) -> str:
    lines = [f"| {title} | back to back, µs | after {IDLE_S * 1000:g} ms idle, µs |", "|---|---:|---:|"]
    lines += [f"| {label} | {hot:,.1f} | {idle:,.1f} |" for label, hot, idle in rows]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=1000, help="timed requests per case and kind (default 1000)")
    parser.add_argument("--block", type=int, default=10, help="requests per block: one block per case per round")
    parser.add_argument("--warmup", type=int, default=100, help="untimed requests per case and kind first")
    parser.add_argument("--jobs", type=int, default=2000, help="jobs in the walked graph (10 layers; default 2000)")
    parser.add_argument("--guard-iterations", type=int, default=20_000, help="in-process calls per guard figure")
    parser.add_argument("--quick", action="store_true", help="500 jobs, 200 requests, fewer guard calls")
    parser.add_argument("--no-airflow", action="store_true", help="standalone cases only (no Airflow API server)")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "auth_overhead.json")
    parser.add_argument("--airflow-guard-profile", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.airflow_guard_profile:  # the child process of airflow_profile_in_child
        print(json.dumps(airflow_guard_profile(args.guard_iterations)))
        return 0
    if args.quick:
        args.requests, args.warmup, args.jobs = 200, 20, 500
        args.guard_iterations = min(args.guard_iterations, 2000)

    from support.airflow_run import migrate

    started = time.perf_counter()
    work = HERE / "results" / "auth_overhead_work"
    work.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="run-", dir=work))
    store = f"sqlite:///{folder / 'lineage.db'}"
    graph_events = workload(args.jobs)
    ingest_pool = [_in_namespace(e, INGEST_NAMESPACE) for e in workload(INGEST_JOBS, seed=11)]
    env: dict[str, str] | None = None
    migrating: threading.Thread | None = None
    migrate_error: list[BaseException] = []
    if not args.no_airflow:
        env = airflow_environment(folder, store)

        def run_migrate() -> None:
            try:
                migrate(folder / "airflow")
            except BaseException as error:
                migrate_error.append(error)

        migrating = threading.Thread(target=run_migrate)
        migrating.start()

    key_options = [f"--key={k['name']}:{k['scope']}:{k['secret']}" for k in _keys()]
    with ExitStack() as stack:
        anonymous = stack.enter_context(
            serve_standalone(store, folder, "standalone-anonymous", "--allow-anonymous", "admin")
        )
        fill(anonymous, graph_events + ingest_pool)
        keyed = stack.enter_context(serve_standalone(store, folder, "standalone-keys", *key_options))
        bearer = {"Authorization": f"Bearer {WRITE_SECRET}"}
        cases = [
            Case("standalone, anonymous (no keys)", anonymous, {}, "standalone, anonymous (no keys)"),
            Case("standalone, anonymous, A/A", anonymous, {}, "standalone, anonymous (no keys)"),
            Case(f"standalone, write key of {KEY_COUNT}", keyed, bearer, "standalone, anonymous (no keys)"),
        ]
        if migrating is not None:
            assert env is not None  # set with migrating
            migrating.join()
            if migrate_error:
                raise migrate_error[0]
            airflow = stack.enter_context(serve_airflow(folder, env))
            token = airflow_token(airflow)
            mounted = f"{airflow}/lineage"
            base = "Airflow, anonymous opt-in"
            cases += [
                Case(base, mounted, {}, base),
                Case("Airflow, anonymous, A/A", mounted, {}, base),
                Case("Airflow, JWT Bearer (admin)", mounted, {"Authorization": f"Bearer {token}"}, base),
                Case(f"Airflow, consumer write key of {KEY_COUNT}", mounted, bearer, base),
            ]
        walk_params: dict[str, str | int] = {"nodeId": ROOTS[0], "depth": 3}
        nodes = len(requests.get(f"{anonymous}/api/v1/lineage", params=walk_params).json()["graph"])
        print(
            f"store: {len(graph_events)} + {len(ingest_pool)} events of {args.jobs} + {INGEST_JOBS} jobs; "
            f"depth-3 walk from {ROOTS[0]}: {nodes} nodes; set up in {time.perf_counter() - started:.0f} s",
            flush=True,
        )
        rounds = max(1, args.requests // args.block)
        measure(cases, rounds, args.block, args.warmup, FreshEvents(ingest_pool))
        for case in cases:
            case.session.close()

    table, rows = report(cases)
    print(
        f"\n{rounds * args.block} timed requests per case and kind ({rounds} rounds of {args.block}, "
        f"shuffled per round, after {args.warmup} warm-up); sequential client, keep-alive\n"
    )
    print(table)
    keyguard = keyguard_costs(args.guard_iterations)
    print("\nIn process (no HTTP):\n")
    print(_guard_table("KeyGuard.authorize(request, Access.READ)", keyguard))
    airflow_rows: list[tuple[str, float, float]] = []
    if env is not None:
        airflow_rows = airflow_profile_in_child(env, max(500, args.guard_iterations // 4))
        print()
        print(_guard_table("AirflowGuard.authorize(request, Access.WRITE) and its steps (Airflow env)", airflow_rows))
    elapsed = time.perf_counter() - started
    print(f"\ntotal {elapsed:.0f} s; work files in {folder}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "args": {k: str(v) for k, v in vars(args).items()},
                "walk_nodes": nodes,
                "cases": rows,
                "keyguard_us": keyguard,
                "airflow_guard_us": airflow_rows,
                "seconds": elapsed,
            },
            indent=2,
        )
    )
    print(f"results written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
