"""The lineage page on a PostgreSQL consumer whose applier is behind (a bulk load): the graph is drawn from what
is applied, and the page says how many events are not applied yet; once they are, the notice goes — in headless
Chromium, on a real server (``Lineage-Pending-Events``, docs/consumer.md "Deferred apply")."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from support.consumer_helpers import LiveServer, dataset, run_event
from support.ui_graph import CUSTOMERS, DAILY, ENRICH, ENRICHED, ORDERS, REVENUE, post_events, sales_events
from support.ui_page import LineagePage
from support.waiting import wait_until

from airflow_lineage_provider.consumer import create_app
from airflow_lineage_provider.consumer.security.access import Access
from airflow_lineage_provider.consumer.store import LineageStore
from airflow_lineage_provider.consumer.store.schema import tables
from airflow_lineage_provider.consumer.store.write import deferred_apply
from airflow_lineage_provider.consumer.store.write.ingest import log_events
from airflow_lineage_provider.consumer.validation import parse_event

pytest_plugins = ("support.ui_fixtures", "support.consumer_fixtures")

pytestmark = pytest.mark.postgres


def _pending(store: LineageStore) -> int:
    with store.engine.connect() as conn:
        return conn.execute(sa.select(sa.func.count()).select_from(tables.pending_events)).scalar() or 0


def test_the_page_draws_what_is_applied_and_says_how_far_behind(
    browser: Any, pg_store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(deferred_apply, "READ_WAIT_EVENTS", 1)  # a read behind more than one event: a bulk load
    app = create_app(store_url=pg_store_url, anonymous=Access.ADMIN, ingest_apply="deferred")
    store: LineageStore = app.state.store
    holder: sa.Connection | None = None
    try:
        with LiveServer(app) as server:
            post_events(server.url, sales_events())
            wait_until(lambda: _pending(store) == 0, "the sales events to be applied")
            late = [run_event("COMPLETE", f"late_{i}", outputs=[dataset(f"late_{i}_out")]) for i in range(3)]
            with store.write() as conn:
                log_events(conn, [parse_event(event) for event in late])
            holder = store.engine.connect()  # holds the three rows, as another process's applier stuck on them
            holder.execute(sa.select(tables.pending_events.c.seq).with_for_update())

            page = LineagePage(browser, server.url).open(nodeId=ENRICHED)
            page.wait_ready()
            assert page.node_ids() == {ENRICHED, ENRICH, ORDERS, CUSTOMERS, DAILY, REVENUE}
            notice = page.wait_text("#behind-notice", "about 3 events")
            assert "not applied yet" in notice

            holder.rollback()
            holder.close()
            wait_until(lambda: _pending(store) == 0, "the three late events to be applied")
            page.open(nodeId=ENRICHED).wait_ready()
            assert page.js("return document.getElementById('behind-notice').hidden") is True
    finally:
        if holder is not None and not holder.closed:
            holder.close()
        store.dispose()
