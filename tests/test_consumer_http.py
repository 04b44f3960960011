"""The consumer over real HTTP (uvicorn on 127.0.0.1): concurrent clients, openlineage-python's own HTTP
transport as a producer, and the ``airflow-lineage serve`` command."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests
from openlineage.client import OpenLineageClient
from openlineage.client.event_v2 import Job, Run, RunEvent, RunState
from openlineage.client.transport.http import HttpConfig, HttpTransport
from support.consumer_helpers import LiveServer, at, dataset, free_port, graph_ids, run_event
from support.waiting import wait_until

from airflow_lineage_provider.consumer import create_app
from airflow_lineage_provider.consumer.security.access import Access

pytest_plugins = ("support.consumer_fixtures",)

CLIENTS = 8


def test_concurrent_clients_store_every_event_exactly_once(store_url: str) -> None:
    runs = [str(uuid.uuid4()) for _ in range(30)]
    shared = []
    for i, run_id in enumerate(runs):
        ins, outs = [dataset(f"in_{i % 5}")], [dataset(f"out_{i}", fields=["a"])]
        shared += [
            run_event("START", f"job_{i}", run_id, time=i, inputs=ins, outputs=outs),
            run_event("COMPLETE", f"job_{i}", run_id, time=i + 60, inputs=ins, outputs=outs),
        ]

    def client_work(seed: int) -> list[int]:
        rng = random.Random(seed)
        mine = shared[:] + [run_event("OTHER", f"solo_{seed}_{k}") for k in range(5)]
        rng.shuffle(mine)  # every client sends every shared event, in its own order
        codes = []
        with requests.Session() as session:
            for start in range(0, len(mine), 7):
                chunk = mine[start : start + 7]
                if rng.random() < 0.5:
                    codes.append(session.post(f"{server.url}/api/v1/lineage/batch", json=chunk, timeout=60).status_code)
                else:
                    codes += [
                        session.post(f"{server.url}/api/v1/lineage", json=e, timeout=60).status_code for e in chunk
                    ]
        return codes

    app = create_app(store_url=store_url, anonymous=Access.ADMIN)
    with LiveServer(app) as server, ThreadPoolExecutor(CLIENTS) as pool:
        codes = [code for result in pool.map(client_work, range(CLIENTS)) for code in result]
        assert set(codes) <= {200, 201}, codes
        events = requests.get(f"{server.url}/api/v1/events", params={"limit": 1}, timeout=30).json()
        assert events["totalCount"] == len(shared) + CLIENTS * 5
        for run_id in runs:
            run = requests.get(f"{server.url}/api/v1/runs/{run_id}", timeout=30).json()
            assert run["state"] == "COMPLETED"
            assert run["startedAt"] is not None and run["endedAt"] is not None
        jobs = requests.get(f"{server.url}/api/v1/jobs", params={"limit": 1}, timeout=30).json()
        assert jobs["totalCount"] == len(runs) + CLIENTS * 5
    app.state.store.dispose()


def test_openlineage_python_http_transport_ships_to_the_consumer(tmp_path: Path) -> None:
    app = create_app(store_url=f"sqlite:///{tmp_path / 'lineage.db'}", api_key="s3cret-key")
    with LiveServer(app) as server:
        config = HttpConfig.from_dict(
            {
                "url": server.url,
                "endpoint": "api/v1/lineage",
                "auth": {"type": "api_key", "apiKey": "s3cret-key"},
                "compression": "gzip",
            }
        )
        client = OpenLineageClient(transport=HttpTransport(config))
        run = Run(runId=str(uuid.uuid4()))
        for state, seconds in ((RunState.START, 0), (RunState.COMPLETE, 5)):
            client.emit(
                RunEvent(
                    eventType=state,
                    eventTime=at(seconds),
                    run=run,
                    job=Job(namespace="ol", name="emit"),
                    producer="tests",
                )
            )
        key = {"X-API-Key": "s3cret-key"}
        stored = requests.get(f"{server.url}/api/v1/runs/{run.runId}", headers=key, timeout=10).json()
        assert stored["state"] == "COMPLETED"
        refused = requests.post(f"{server.url}/api/v1/lineage", json=run_event("START", "x"), timeout=10)
        assert refused.status_code == 401


KEY = {"X-API-Key": "k3y-for-serve"}


def test_the_serve_command_serves_and_stops(tmp_path: Path) -> None:
    port = free_port()
    store = f"sqlite:///{tmp_path / 'served.db'}"
    command = [
        str(Path(sys.executable).parent / "airflow-lineage"),
        "serve",
        "--store",
        store,
        "--port",
        str(port),
        "--api-key",
        "k3y-for-serve",
    ]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        url = f"http://127.0.0.1:{port}"

        def serving() -> bool:
            assert process.poll() is None, process.stdout.read() if process.stdout else ""
            try:
                return requests.get(f"{url}/openapi.json", timeout=2).status_code == 200
            except requests.ConnectionError:
                return False

        wait_until(serving, "the served consumer never answered", timeout=60, interval=0.2)
        event = run_event("COMPLETE", "served", inputs=[dataset("a")], outputs=[dataset("b")])
        assert requests.post(f"{url}/api/v1/lineage", json=event, headers=KEY, timeout=10).status_code == 201
        params = {"nodeId": "dataset:warehouse:b", "depth": 1}
        graph = requests.get(f"{url}/api/v1/lineage", params=params, headers=KEY, timeout=10)
        assert graph_ids(graph.json()) == {"dataset:warehouse:a", "job:pipelines:served", "dataset:warehouse:b"}
        docs = requests.get(f"{url}/docs", timeout=10)
        assert docs.status_code == 200 and "swagger" in docs.text.lower()
        ui = requests.get(f"{url}/ui", timeout=10)
        assert ui.status_code == 200 and "<html" in ui.text.lower()
        rebound = requests.get(f"{url}/api/v1/jobs", headers={**KEY, "Host": f"rebound.example:{port}"}, timeout=10)
        assert rebound.status_code == 400 and "--allowed-host rebound.example" in rebound.json()["detail"]
    finally:
        os.kill(process.pid, signal.SIGTERM)
        process.wait(timeout=30)
    output = process.stdout.read() if process.stdout else ""
    assert f"page at {url}/ui" in output
    assert "Access: keys: api-key (write); requests without a key: refused (401)" in output
    assert "Host names answered: localhost, 127.0.0.1, ::1" in output
    assert "k3y-for-serve" not in output  # the secret is never printed
    assert "lineage audit: ingest by key 'api-key': 1 received, 1 stored" in output


def test_the_serve_command_fails_in_one_line_on_a_bad_store(tmp_path: Path) -> None:
    command = [
        str(Path(sys.executable).parent / "airflow-lineage"),
        "serve",
        "--store",
        "postgresql+psycopg2://x@127.0.0.1:9/none",
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr.startswith("airflow-lineage: error: cannot open the lineage store")
    assert "Traceback" not in result.stderr


def test_the_serve_command_refuses_a_negative_graph_cache_in_one_line(tmp_path: Path) -> None:
    command = [
        str(Path(sys.executable).parent / "airflow-lineage"),
        "serve",
        "--store",
        f"sqlite:///{tmp_path / 'lineage.db'}",
        "--graph-cache-nodes",
        "-5",
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr.strip() == ("airflow-lineage: error: graph_cache_nodes must be 0 (no cache) or more, got -5")


def test_the_export_dags_client_settles_each_event_of_a_partial_batch(tmp_path: Path) -> None:
    from airflow_lineage_provider.outbox.consumer_client import DEAD, DELIVERED, ConsumerClient, ConsumerConfig

    app = create_app(store_url=f"sqlite:///{tmp_path / 'lineage.db'}", api_key="k3y-for-dag")
    good = [run_event("START", f"job_{i}") for i in range(3)]
    bad = {**run_event("START", "bad"), "run": {"runId": "nope"}}
    payloads = [json.dumps(e) for e in (good[0], bad, good[1], good[2])]
    with LiveServer(app) as server:
        client = ConsumerClient(ConsumerConfig(url=server.url, api_key="k3y-for-dag"))
        try:
            outcomes = client.deliver(payloads)
            again = client.deliver(payloads[:1])  # a re-sent event is a harmless duplicate
        finally:
            client.close()
    assert [o.kind for o in outcomes] == [DELIVERED, DEAD, DELIVERED, DELIVERED]
    assert "run.runId" in outcomes[1].detail
    assert [o.kind for o in again] == [DELIVERED]
