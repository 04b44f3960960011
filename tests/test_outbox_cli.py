"""The ``airflow-lineage`` outbox commands, run as a user runs them (the console script, in a subprocess)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.consumer_server import ConsumerServer
from support.outbox_helpers import run_pairs, sqlite_url

from airflow_lineage_provider.outbox import OutboxConfig, OutboxTransport
from airflow_lineage_provider.outbox.database import dispose_engines

CLI = str(Path(sys.executable).parent / "airflow-lineage")


@pytest.fixture(autouse=True)
def _fresh_engines() -> Any:
    yield
    dispose_engines()


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=120, env={**os.environ, **(env or {})})


def fill(url: str, count: int) -> None:
    outbox = OutboxTransport(OutboxConfig.from_dict({"url": url}))
    for event in run_pairs(count):
        outbox.emit(event)


def test_status_ship_export_replay_prune(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path)
    fill(url, 10)
    status = cli("status", "--outbox", url, "--json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout) == {"events": 20, "destinations": {}}

    with ConsumerServer() as consumer:
        consumer.reject = lambda e: e["inputs"][0]["name"].endswith("_4") and e["eventType"] == "START"
        shipped = cli("ship", "--outbox", url, "--url", consumer.url, "--name", "marquez", "--batch-size", "7")
        assert shipped.returncode == 0, shipped.stderr
        assert "marquez: 19 delivered, 1 dead-lettered, 0 to retry, 0 pending" in shipped.stdout
        exported = cli("export", "--outbox", url, "--to", str(tmp_path / "files"), "--compress")
        assert exported.returncode == 0, exported.stderr
        assert "20 events exported" in exported.stdout
        files = f"file://{tmp_path / 'files'}"
        assert json.loads(cli("status", "--outbox", url, "--json").stdout) == {
            "events": 20,
            "destinations": {
                "marquez": {"pending": 0, "delivered": 19, "dead": 1},
                files: {"pending": 0, "delivered": 20, "dead": 0},
            },
        }
        table = cli("status", "--outbox", url)
        assert "marquez" in table.stdout and "20 events" in table.stdout

        consumer.reject = None
        replayed = cli("replay", "--outbox", url, "--name", "marquez")
        assert "1 dead-lettered event(s) pending again" in replayed.stdout
        assert "1 delivered" in cli("ship", "--outbox", url, "--url", consumer.url, "--name", "marquez").stdout
    pruned = cli("prune", "--outbox", url, "--older-than", "0")
    assert pruned.returncode == 0 and "pruned 20 event(s)" in pruned.stdout
    assert json.loads(cli("status", "--outbox", url, "--json").stdout)["events"] == 0


def test_outbox_defaults_to_the_configured_url(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path)
    fill(url, 1)
    status = cli("status", "--json", env={"AIRFLOW__LINEAGE_PROVIDER__OUTBOX_URL": url})
    assert json.loads(status.stdout)["events"] == 2


def test_unreachable_consumer_exits_1_and_keeps_events(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path)
    fill(url, 2)
    down = ConsumerServer()
    down.stop()
    result = cli("ship", "--outbox", url, "--url", down.url)
    assert result.returncode == 1
    assert "the consumer is unreachable" in result.stderr and "events stay pending" in result.stderr
    assert "4 pending" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["status", "--outbox", "nonsense"], "outbox URL 'nonsense' is not a SQLAlchemy URL"),
        (["status", "--outbox", "sqlite:////nowhere/outbox.db"], "no outbox at sqlite:////nowhere/outbox.db"),
        (["status", "--outbox", "postgresql+psycopg2://u@127.0.0.1:1/db"], "cannot reach the outbox"),
        (["ship", "--outbox", "OUTBOX", "--url", "ftp://x"], "consumer URL 'ftp://x' must start with http://"),
        (["replay", "--outbox", "OUTBOX", "--name", "nope"], "no destination named 'nope' (known: none yet)"),
    ],
)
def test_errors_are_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    url = sqlite_url(tmp_path)
    fill(url, 1)
    result = cli(*[url if a == "OUTBOX" else a for a in args])
    assert result.returncode == 2
    assert result.stderr.startswith("airflow-lineage: error: ") and message in result.stderr
    assert result.stderr.count("\n") == 1, result.stderr


def test_bad_arguments_are_refused(tmp_path: Path) -> None:
    result = cli("ship", "--outbox", sqlite_url(tmp_path), "--url", "http://x", "--batch-size", "0")
    assert result.returncode == 2 and "'0' must be at least 1" in result.stderr
    result = cli("prune", "--older-than", "soon")
    assert result.returncode == 2 and "'soon' is not a number of days" in result.stderr


@pytest.mark.skipif(shutil.which("script") is None, reason="needs util-linux `script` for a terminal")
def test_progress_bar_on_a_terminal(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path)
    fill(url, 50)
    with ConsumerServer() as consumer:
        command = f"{CLI} ship --outbox {url} --url {consumer.url} --batch-size 10"
        result = subprocess.run(
            ["script", "-qfec", command, "/dev/null"], capture_output=True, text=True, timeout=120,
            env={**os.environ, "COLUMNS": "120", "TERM": "xterm"},
        )  # fmt: skip
        assert result.returncode == 0, result.stdout
    screen = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", result.stdout)
    assert "shipping to" in screen and "100/100" in screen, screen
    plain = cli("export", "--outbox", url, "--to", str(tmp_path / "files"))
    assert "exporting to" not in plain.stdout + plain.stderr, "no progress bar without a terminal"


def test_status_names_a_spill_folder_it_cannot_read(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path)
    fill(url, 2)
    database = Path(url.removeprefix("sqlite:///"))
    spill = database.with_name(database.name + ".spill")
    shutil.rmtree(spill, ignore_errors=True)
    spill.write_text("not a folder")  # as root, permissions would not stop the listing: a file does
    status = cli("status", "--outbox", url, env={"COLUMNS": "1000"})  # rich wraps at the width: no wraps here
    assert status.returncode == 1, status.stdout + status.stderr
    assert "Traceback" not in status.stderr, status.stderr
    assert "4 events" in status.stdout
    assert f"The spill folder {spill} cannot be read (Not a directory)" in status.stdout
