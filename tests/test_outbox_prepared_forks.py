"""An outbox opened ahead of tasks (``OutboxTransport.prepare``, as the task-emission plugin does in Airflow's
jobs): processes forked afterwards — task processes, the stock listener's children — append through the engine
they inherited with a connection of their own, without checking the schema again; a replaced SQLite file is
still found and recreated. On SQLite and PostgreSQL.

Each child is a real ``os.fork()`` of the test process; what it saw comes back as JSON through a pipe.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from support.outbox_helpers import pg_url, run_event, sqlite_url

from airflow_lineage_provider.outbox import migrations
from airflow_lineage_provider.outbox.database import dispose_engines, outbox_engine
from airflow_lineage_provider.outbox.tables import events
from airflow_lineage_provider.outbox.transport import OutboxConfig, OutboxTransport

TYPE = "airflow_lineage_provider.outbox.OutboxTransport"


@pytest.fixture(autouse=True)
def _fresh_engines() -> Iterator[None]:
    dispose_engines()
    yield
    dispose_engines()


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return sqlite_url(tmp_path) if request.param == "sqlite" else pg_url(request.getfixturevalue("pg_engine"))


def in_child(work: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Run ``work`` in a forked child; its answer."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: answer, then leave without running the parent's clean-up
        try:
            answer = json.dumps(work())
        except BaseException as error:
            answer = json.dumps({"error": f"{type(error).__name__}: {error}"})
        with os.fdopen(write, "w") as out:
            out.write(answer)
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as answer_in:
        answer = json.loads(answer_in.read())
    os.waitpid(pid, 0)
    return dict(answer)


def emit_counting_schema_checks(url: str) -> Callable[[], dict[str, Any]]:
    def work() -> dict[str, Any]:
        checks = []
        migrate = migrations.migrate

        def counted(*args: Any, **kwargs: Any) -> int:
            checks.append(1)
            return migrate(*args, **kwargs)

        migrations.migrate = counted  # type: ignore[assignment]  # the child's own copy of the module
        transport = OutboxTransport(OutboxConfig.from_dict({"type": TYPE, "url": url}))
        event = run_event()
        transport.emit(event)
        return {"checks": len(checks), "run_id": str(event.run.runId), "spilled": transport.writer.spill.has_events()}

    return work


def stored_run_ids(url: str) -> list[str]:
    with outbox_engine(url).connect() as conn:
        return [str(run_id) for (run_id,) in conn.execute(sa.select(events.c.run_id))]


def test_a_process_forked_after_prepare_appends_without_checking_the_schema(url: str) -> None:
    OutboxTransport.prepare({"type": TYPE, "url": url})
    child = in_child(emit_counting_schema_checks(url))
    assert child.get("checks") == 0, child
    assert child["spilled"] is False
    assert child["run_id"] in stored_run_ids(url)


def test_without_prepare_a_forked_process_checks_the_schema_itself(url: str) -> None:
    child = in_child(emit_counting_schema_checks(url))
    assert child.get("checks") == 1, child
    assert child["run_id"] in stored_run_ids(url)


def test_a_sqlite_file_replaced_after_prepare_is_recreated_by_the_forked_process(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path)
    OutboxTransport.prepare({"type": TYPE, "url": url})
    (tmp_path / "outbox.db").rename(tmp_path / "moved-away.db")
    child = in_child(emit_counting_schema_checks(url))
    assert child.get("checks") == 1, child
    dispose_engines()
    assert child["run_id"] in stored_run_ids(url)


def test_prepare_leaves_no_connection_open_for_a_fork_to_inherit(url: str) -> None:
    OutboxTransport.prepare({"type": TYPE, "url": url})
    assert outbox_engine(url).pool.checkedin() == 0
