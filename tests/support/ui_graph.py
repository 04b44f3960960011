"""Known lineage graphs for the lineage page's tests, posted as real OpenLineage events to the ingest API.

``sales_events()`` is a small pipeline whose every node, edge, field, facet and run the tests check::

    s3://lake raw/orders:2026-03 → load_orders → postgres://pg.example:5432 shop.public.orders ─┐
                                                postgres://pg.example:5432 shop.public.customers ┴→ enrich_orders
    enrich_orders → warehouse analytics.orders_enriched → daily_revenue → warehouse analytics.daily_revenue
    warehouse analytics.daily_revenue → publish_dashboard → warehouse reports.revenue_dashboard
    postgres://pg.example:5432 shop.public.orders → audit_orders (namespace audit) → audit orders_audit_log
    warehouse events.clicks → dedupe_clicks → warehouse events.clicks (a job rewriting its input: a cycle)

Jobs live in ``airflow://prod`` (``audit_orders`` in ``audit``): namespaces with ``/`` and ``:``, and a
dataset name with both. Run ids are fixed, so the screenshot is the same on every run.

``layered_events(layers, width)`` is a big synthetic graph: ``layers`` layers of ``width`` jobs, each job
reading up to four datasets of the layer before and writing one.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

import httpx
from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.facet_v2 import (
    column_lineage_dataset,
    documentation_dataset,
    error_message_run,
    schema_dataset,
)
from openlineage.client.serde import Serde

from airflow_lineage_provider.facets.egeria import EgeriaGovernanceActionRunFacet, EgeriaInformationSupplyChainRunFacet
from support.olschema import assert_valid_event, shared_available

PRODUCER = "https://github.com/acme/airflow-lineage-provider/tests/ui"
T0 = datetime(2026, 3, 1, 6, 0, tzinfo=timezone.utc)
PG = "postgres://pg.example:5432"
LAKE = "s3://lake"
WAREHOUSE = "warehouse"
JOBS = "airflow://prod"
SUPPLY_CHAIN = "InformationSupplyChain::sales-orders"
GOVERNANCE = {"governanceEngineName": "AssetGovernance", "requestType": "nightly-load", "processName": "SalesOrders"}

#: (namespace, name) → [(field, type, description)]
SCHEMAS: dict[tuple[str, str], list[tuple[str, str, str]]] = {
    (LAKE, "raw/orders:2026-03"): [("order_id", "BIGINT", ""), ("customer_id", "BIGINT", ""), ("cents", "BIGINT", "")],
    (PG, "shop.public.orders"): [
        ("id", "INTEGER", "Order number"),
        ("customer_id", "INTEGER", "Who ordered"),
        ("amount", "NUMERIC(10,2)", "Order total in EUR"),
    ],
    (PG, "shop.public.customers"): [("id", "INTEGER", ""), ("name", "VARCHAR(80)", ""), ("country", "CHAR(2)", "")],
    (WAREHOUSE, "analytics.orders_enriched"): [
        ("order_id", "INTEGER", ""),
        ("customer_name", "VARCHAR(80)", ""),
        ("country", "CHAR(2)", ""),
        ("amount", "NUMERIC(10,2)", ""),
    ],
    (WAREHOUSE, "analytics.daily_revenue"): [
        ("day", "DATE", ""),
        ("country", "CHAR(2)", ""),
        ("revenue", "NUMERIC", ""),
    ],
    (WAREHOUSE, "reports.revenue_dashboard"): [("country", "CHAR(2)", ""), ("revenue", "NUMERIC", "")],
    ("audit", "orders_audit_log"): [("order_id", "INTEGER", ""), ("checked_at", "TIMESTAMP", "")],
}

#: (namespace, name) → {target field: [(source namespace, source name, source field, type, subtype)]}
COLUMNS: dict[tuple[str, str], dict[str, list[tuple[str, str, str, str, str]]]] = {
    (PG, "shop.public.orders"): {
        "id": [(LAKE, "raw/orders:2026-03", "order_id", "DIRECT", "IDENTITY")],
        "customer_id": [(LAKE, "raw/orders:2026-03", "customer_id", "DIRECT", "IDENTITY")],
        "amount": [(LAKE, "raw/orders:2026-03", "cents", "DIRECT", "TRANSFORMATION")],
    },
    (WAREHOUSE, "analytics.orders_enriched"): {
        "order_id": [(PG, "shop.public.orders", "id", "DIRECT", "IDENTITY")],
        "customer_name": [(PG, "shop.public.customers", "name", "DIRECT", "IDENTITY")],
        "country": [(PG, "shop.public.customers", "country", "DIRECT", "IDENTITY")],
        "amount": [(PG, "shop.public.orders", "amount", "DIRECT", "IDENTITY")],
    },
    (WAREHOUSE, "analytics.daily_revenue"): {
        "country": [(WAREHOUSE, "analytics.orders_enriched", "country", "DIRECT", "IDENTITY")],
        "revenue": [(WAREHOUSE, "analytics.orders_enriched", "amount", "DIRECT", "AGGREGATION")],
    },
    (WAREHOUSE, "reports.revenue_dashboard"): {
        "revenue": [(WAREHOUSE, "analytics.daily_revenue", "revenue", "DIRECT", "IDENTITY")],
    },
}

DOCUMENTATION = {(WAREHOUSE, "analytics.orders_enriched"): "Orders joined with their customers, one row per order."}


def run_id(name: str) -> str:
    """A fixed run id per name (UUID 5), so screenshots and assertions are stable."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"{PRODUCER}/{name}"))


def _dataset_facets(key: tuple[str, str]) -> dict[str, Any]:
    facets: dict[str, Any] = {}
    if key in SCHEMAS:
        facets["schema"] = schema_dataset.SchemaDatasetFacet(
            fields=[
                schema_dataset.SchemaDatasetFacetFields(name=n, type=t, description=d or None)
                for n, t, d in SCHEMAS[key]
            ]
        )
    if key in COLUMNS:
        facets["columnLineage"] = column_lineage_dataset.ColumnLineageDatasetFacet(
            fields={
                target: column_lineage_dataset.Fields(
                    inputFields=[
                        column_lineage_dataset.InputField(
                            namespace=ns,
                            name=name,
                            field=field,
                            transformations=[column_lineage_dataset.Transformation(type=kind, subtype=subtype)],
                        )
                        for ns, name, field, kind, subtype in sources
                    ]
                )
                for target, sources in COLUMNS[key].items()
            }
        )
    if key in DOCUMENTATION:
        facets["documentation"] = documentation_dataset.DocumentationDatasetFacet(description=DOCUMENTATION[key])
    return facets


def _event(
    state: str,
    job: str,
    run: str,
    seconds: float,
    inputs: list[tuple[str, str]],
    outputs: list[tuple[str, str]],
    namespace: str = JOBS,
    run_facets: dict[str, Any] | None = None,
) -> dict[str, Any]:
    event = RunEvent(
        eventType=RunState[state],
        eventTime=(T0 + timedelta(seconds=seconds)).isoformat(),
        run=Run(runId=run_id(run), facets=run_facets or {}),
        job=Job(namespace=namespace, name=job),
        producer=PRODUCER,
        inputs=[InputDataset(namespace=ns, name=n, facets=_dataset_facets((ns, n))) for ns, n in inputs],
        outputs=[OutputDataset(namespace=ns, name=n, facets=_dataset_facets((ns, n))) for ns, n in outputs],
    )
    data = json.loads(Serde.to_json(event))
    if shared_available():
        assert_valid_event(data)
    return data


def _egeria() -> dict[str, Any]:
    return {
        "egeria_informationSupplyChain": EgeriaInformationSupplyChainRunFacet(
            iscQualifiedName=SUPPLY_CHAIN, producer=PRODUCER
        ),
        "egeria_governanceAction": EgeriaGovernanceActionRunFacet(**GOVERNANCE, producer=PRODUCER),
    }


def sales_events() -> list[dict[str, Any]]:
    """The small pipeline of the module docstring, as START/COMPLETE/FAIL events in time order."""
    raw, orders, customers = (LAKE, "raw/orders:2026-03"), (PG, "shop.public.orders"), (PG, "shop.public.customers")
    enriched, revenue = (WAREHOUSE, "analytics.orders_enriched"), (WAREHOUSE, "analytics.daily_revenue")
    dashboard, audit_log = (WAREHOUSE, "reports.revenue_dashboard"), ("audit", "orders_audit_log")
    clicks = (WAREHOUSE, "events.clicks")
    day = 86400
    failure = {
        "errorMessage": error_message_run.ErrorMessageRunFacet(message="division by zero", programmingLanguage="python")
    }
    return [
        _event("START", "load_orders", "load-1", 0, [raw], [orders]),
        _event("COMPLETE", "load_orders", "load-1", 65, [raw], [orders]),
        _event("START", "enrich_orders", "enrich-1", 100, [orders, customers], [enriched], run_facets=_egeria()),
        _event("COMPLETE", "enrich_orders", "enrich-1", 225, [orders, customers], [enriched], run_facets=_egeria()),
        _event("START", "daily_revenue", "revenue-1", 300, [enriched], [revenue], run_facets=_egeria()),
        _event("COMPLETE", "daily_revenue", "revenue-1", 330, [enriched], [revenue], run_facets=_egeria()),
        _event("START", "audit_orders", "audit-1", 400, [orders], [audit_log], namespace="audit"),
        _event("COMPLETE", "audit_orders", "audit-1", 412, [orders], [audit_log], namespace="audit"),
        _event("START", "enrich_orders", "enrich-2", day + 100, [orders, customers], [enriched], run_facets=_egeria()),
        _event(
            "FAIL",
            "enrich_orders",
            "enrich-2",
            day + 142,
            [orders, customers],
            [enriched],
            run_facets={**_egeria(), **failure},
        ),
        _event("START", "publish_dashboard", "publish-1", day + 500, [revenue], [dashboard]),
        _event("COMPLETE", "dedupe_clicks", "dedupe-1", day + 600, [clicks], [clicks]),  # a cycle
    ]


def post_events(
    base_url: str, events: list[dict[str, Any]], chunk: int = 500, headers: dict[str, str] | None = None
) -> None:
    """Send events to the consumer's batch ingest endpoint, checking every one is stored."""
    with httpx.Client(timeout=120, headers=headers) as client:
        for start in range(0, len(events), chunk):
            batch = events[start : start + chunk]
            answer = client.post(f"{base_url}/api/v1/lineage/batch", json=batch)
            assert answer.status_code == 200, answer.text[:2000]
            assert answer.json()["successful"] == len(batch), answer.text[:2000]


def layered_events(layers: int, width: int) -> list[dict[str, Any]]:
    """COMPLETE events of ``layers`` times ``width`` jobs: job ``L.i`` reads ``ds.(L-1).i``, ``ds.(L-1).(i+1)``,
    ``ds.(L-1).(2i)`` and ``ds.(L-1).(2i+1)`` (modulo ``width``) and writes ``ds.L.i``, all in namespace ``big``:
    about ``2 * layers * width`` nodes, and a walk from the middle reaches most of them within a few layers."""
    found = []
    for layer in range(1, layers + 1):
        for i in range(width):
            event = RunEvent(
                eventType=RunState.COMPLETE,
                eventTime=(T0 + timedelta(seconds=layer)).isoformat(),
                run=Run(runId=str(uuid.uuid4())),
                job=Job(namespace="big", name=f"job.{layer}.{i}"),
                producer=PRODUCER,
                inputs=[
                    InputDataset(namespace="big", name=f"ds.{layer - 1}.{k}")
                    for k in sorted({i, (i + 1) % width, 2 * i % width, (2 * i + 1) % width})
                ],
                outputs=[OutputDataset(namespace="big", name=f"ds.{layer}.{i}")],
            )
            found.append(json.loads(Serde.to_json(event)))
    return found


#: Node ids of the sales pipeline, as the API and the page name them.
ENRICHED = f"dataset:{WAREHOUSE}:analytics.orders_enriched"
ORDERS = f"dataset:{PG}:shop.public.orders"
CUSTOMERS = f"dataset:{PG}:shop.public.customers"
RAW = f"dataset:{LAKE}:raw/orders:2026-03"
REVENUE = f"dataset:{WAREHOUSE}:analytics.daily_revenue"
DASHBOARD = f"dataset:{WAREHOUSE}:reports.revenue_dashboard"
AUDIT_LOG = "dataset:audit:orders_audit_log"
LOAD = f"job:{JOBS}:load_orders"
ENRICH = f"job:{JOBS}:enrich_orders"
DAILY = f"job:{JOBS}:daily_revenue"
PUBLISH = f"job:{JOBS}:publish_dashboard"
AUDIT = "job:audit:audit_orders"
CLICKS = f"dataset:{WAREHOUSE}:events.clicks"
DEDUPE = f"job:{JOBS}:dedupe_clicks"
