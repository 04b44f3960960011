"""Fixtures for the consumer's tests: lineage stores on real SQLite and PostgreSQL, apps, live servers.

Load them in a test module with ``pytest_plugins = ("support.consumer_fixtures",)``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_lineage_provider.consumer.security.access import Access
from support.environment import postgres_schema_url


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh lineage store URL on SQLite or on PostgreSQL (a private schema, dropped afterwards)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'lineage.db'}"
        return
    with postgres_schema_url() as url:
        yield url


@pytest.fixture
def pg_store_url() -> Iterator[str]:
    """A fresh lineage store URL on PostgreSQL only."""
    with postgres_schema_url() as url:
        yield url


@pytest.fixture
def app(store_url: str) -> Iterator[Any]:
    """A consumer app on ``store_url`` without an API key."""
    from airflow_lineage_provider.consumer import create_app

    application = create_app(store_url=store_url, anonymous=Access.ADMIN)
    yield application
    application.state.store.dispose()


@pytest.fixture
def client(app: Any) -> Iterator[Any]:
    """FastAPI's test client for ``app``."""
    from fastapi.testclient import TestClient

    with TestClient(app) as test_client:
        yield test_client
