"""What the test environment provides and how a test says it needs it: PostgreSQL, ../shared, the test DAGs.

Needed things that are missing skip a test on a developer laptop and fail it under ``CI=true``, where the
machine always has them: :func:`unavailable` is that rule, and every test and helper that needs something calls
it. Tests import these from here (``from support.environment import ...``), never from ``conftest``.
"""

from __future__ import annotations

import os
import socket
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import NoReturn

import pytest

from support.olschema import SKIP_REASON, shared_available

#: The PostgreSQL the machine kind runs (trust auth, database ``test``).
PG_URL = os.environ.get("LINEAGE_TEST_PG_URL", "postgresql+psycopg2://postgres@127.0.0.1:5432/test")
#: Under CI a missing service or ../shared is a failure, not a skip.
IN_CI = os.environ.get("CI", "").lower() == "true"

#: Set to ``1`` to have the browser tests write the screenshots the docs show into ``docs/images``.
UPDATE_DOC_IMAGES = "LINEAGE_UPDATE_DOC_IMAGES"
#: Where the docs' screenshots live.
DOC_IMAGES = Path(__file__).resolve().parents[2] / "docs" / "images"

#: The DAG files the Airflow tests serialize and run.
TEST_DAGS = Path(__file__).resolve().parent.parent / "dags"
#: A copy of the ``airflow_home`` fixture's metadata database as migrated, before any test serialized or ran a
#: DAG in it: for tests that count what is in the database (copy it as ``airflow.db`` into a home of their own).
PRISTINE_DB = "airflow.pristine.db"


def unavailable(reason: str) -> NoReturn:
    """What a test needs is missing (``reason`` says what and how to get it): skip the test on a laptop, fail it
    under ``CI=true``, where the machine always has it."""
    if IN_CI:
        pytest.fail(f"{reason}; under CI=true that is a failure, not a skip")
    pytest.skip(reason)


@cache
def _screenshots_of_this_run() -> Path:
    return Path(tempfile.mkdtemp(prefix="alp-screenshots-"))


def doc_image(name: str) -> Path:
    """Where a test saves the screenshot ``name`` that ``docs/images`` holds: ``docs/images`` itself with
    ``LINEAGE_UPDATE_DOC_IMAGES=1``, otherwise a temporary folder of this test run (the screenshot is still taken
    and checked), so that a test run leaves the docs as they are."""
    if os.environ.get(UPDATE_DOC_IMAGES, "") == "1":
        return DOC_IMAGES / name
    return _screenshots_of_this_run() / name


def require_shared() -> None:
    """Skip without ../shared/spec on a laptop; fail under ``CI=true``."""
    if not shared_available():  # fails by itself under CI=true
        pytest.skip(SKIP_REASON)


def postgres_reachable() -> bool:
    try:
        with socket.create_connection(("127.0.0.1", 5432), timeout=2):
            return True
    except OSError:
        return False


def require_postgres() -> None:
    """Skip without PostgreSQL on a laptop; fail in CI, where the machine always runs it."""
    if not postgres_reachable():
        unavailable("PostgreSQL on 127.0.0.1:5432 is not reachable")


@contextmanager
def postgres_schema_url() -> Iterator[str]:
    """A lineage store URL on PostgreSQL in a private schema, dropped afterwards (fails in CI when down)."""
    require_postgres()
    import sqlalchemy as sa

    schema = f"alp_consumer_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(PG_URL)
    with admin.begin() as conn:
        conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
    try:
        yield f"{PG_URL}?options=-csearch_path%3D{schema}"
    finally:
        with admin.begin() as conn:
            conn.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
        admin.dispose()
