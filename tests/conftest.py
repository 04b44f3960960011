"""Shared fixtures: an isolated AIRFLOW_HOME, event capture through the real file transport, schema
validation of every captured event, and real SQLite / PostgreSQL databases."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# Airflow reads AIRFLOW_HOME when first imported: isolate it before any test imports Airflow.
_HOME = Path(tempfile.mkdtemp(prefix="alp-airflow-home-"))
os.environ["AIRFLOW_HOME"] = str(_HOME)
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
os.environ.setdefault("AIRFLOW__CORE__UNIT_TEST_MODE", "False")
for _key in [k for k in os.environ if k.startswith("OPENLINEAGE")]:
    del os.environ[_key]

sys.path.insert(0, str(Path(__file__).parent))

from support.capture import file_transport_env, read_events  # noqa: E402
from support.environment import (  # noqa: E402
    PG_URL,
    PRISTINE_DB,
    require_postgres,
    require_shared,
)
from support.olschema import assert_valid_event  # noqa: E402

#: Facets the stock provider adds to events it sends (their schemas are not in ../shared/spec).
STOCK_FACETS = {"tags"}


class CapturedEvents:
    """Events written by the real openlineage-python file transport, each validated on read."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def all(
        self, validate: bool = True, ignore_facets: set[str] | frozenset[str] = frozenset()
    ) -> list[dict[str, Any]]:
        events = read_events(self.path)
        if validate:
            require_shared()
            for event in events:
                assert_valid_event(event, ignore=STOCK_FACETS | set(ignore_facets))
        return events

    def of_job(self, job_name: str) -> list[dict[str, Any]]:
        return [e for e in self.all() if e["job"]["name"] == job_name]

    def types(self, job_name: str) -> list[str]:
        return [e["eventType"] for e in self.of_job(job_name)]


@pytest.fixture
def lineage_client_reset() -> Iterator[None]:
    from airflow_lineage_provider.producer import client
    from airflow_lineage_provider.reporting import forget_reported

    client.reset()
    forget_reported()
    yield
    client.reset()
    forget_reported()


@pytest.fixture
def events(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lineage_client_reset: None) -> CapturedEvents:
    """Route this process's events to a file transport and read them back, validated."""
    path = tmp_path / "events.ndjson"
    for key, value in file_transport_env(path).items():
        monkeypatch.setenv(key, value)
    return CapturedEvents(path)


@pytest.fixture
def strict(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__LINEAGE_PROVIDER__STRICT", "True")


@pytest.fixture
def sqlite_engine(tmp_path: Path) -> Any:
    import sqlalchemy as sa

    engine = sa.create_engine(f"sqlite:///{tmp_path / 'warehouse.db'}")
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER, amount NUMERIC(10, 2))")
        conn.exec_driver_sql("CREATE TABLE customers (id INTEGER PRIMARY KEY, name VARCHAR(80) NOT NULL)")
    yield engine
    engine.dispose()


@pytest.fixture
def pg_engine() -> Iterator[Any]:
    """A real PostgreSQL engine on the ``test`` database, with a private schema dropped afterwards."""
    require_postgres()
    import uuid

    import sqlalchemy as sa

    engine = sa.create_engine(PG_URL)
    schema = f"alp_{uuid.uuid4().hex[:10]}"
    with engine.begin() as conn:
        conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
    engine.test_schema = schema  # type: ignore[attr-defined]
    yield engine
    with engine.begin() as conn:
        conn.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
    engine.dispose()


@pytest.fixture(scope="session")
def airflow_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated AIRFLOW_HOME (SQLite metadata DB) for ``airflow dags test`` subprocesses."""
    from support.airflow_run import migrate

    home = tmp_path_factory.mktemp("airflow-home")
    migrate(home)
    shutil.copy(home / "airflow.db", home / PRISTINE_DB)
    return home
