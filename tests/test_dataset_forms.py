"""Inputs and outputs mix every accepted form, and are named per the OpenLineage naming spec."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from openlineage.client.event_v2 import Dataset, InputDataset

from airflow_lineage_provider import column_lineage_facet, lineage_run, schema_facet
from airflow_lineage_provider.producer.naming import naming_for_url


def test_every_form_mixes_in_one_list(events):
    from airflow.sdk import Asset

    inputs = [
        "raw/orders",
        {"name": "customers", "namespace": "crm://prod"},
        schema_facet("raw/products", [("sku", "TEXT")]),
        Dataset(namespace="kafka://broker:9092", name="orders-topic"),
        InputDataset(namespace="s3://lake", name="landing/orders.parquet"),
        Asset("s3://exports/daily/orders.csv"),
        "file:///data/fx_rates.csv",
    ]
    with lineage_run("orders.enrich", inputs=inputs):
        pass
    start = events.of_job("orders.enrich")[0]
    assert [(d["namespace"], d["name"]) for d in start["inputs"]] == [
        ("default", "raw/orders"),
        ("crm://prod", "customers"),
        ("default", "raw/products"),
        ("kafka://broker:9092", "orders-topic"),
        ("s3://lake", "landing/orders.parquet"),
        ("s3://exports", "daily/orders.csv"),
        ("file", "/data/fx_rates.csv"),
    ]
    assert start["inputs"][2]["facets"]["schema"]["fields"] == [{"name": "sku", "type": "TEXT"}]


def test_default_namespace_comes_from_config(events, monkeypatch):
    monkeypatch.setenv("AIRFLOW__LINEAGE_PROVIDER__NAMESPACE", "warehouse")
    with lineage_run("orders.load", outputs=["main/orders"]):
        pass
    assert {d["namespace"] for e in events.all() for d in e["outputs"]} == {"warehouse"}


def test_sqlite_connector_names_datasets_by_file_and_schema(events, sqlite_engine):
    with lineage_run("orders.load", inputs=["main/orders"], connector={"main": sqlite_engine}):
        pass
    start = events.of_job("orders.load")[0]
    assert start["inputs"][0]["namespace"] == f"sqlite://{sqlite_engine.url.database}"
    assert start["inputs"][0]["name"] == "main.orders"


@pytest.mark.parametrize(
    ("url", "table", "namespace", "name"),
    [
        ("postgresql://u@db.internal/analytics", "orders", "postgres://db.internal:5432", "analytics.public.orders"),
        ("postgresql+psycopg2://u@db:6432/analytics", "sales.orders", "postgres://db:6432", "analytics.sales.orders"),
        ("mysql+pymysql://u@mysql.internal/shop", "orders", "mysql://mysql.internal:3306", "shop.orders"),
        ("mysql://u@m:3307/shop", "archive.orders", "mysql://m:3307", "archive.orders"),
        ("mssql+pyodbc://u@sql:1433/dw", "orders", "sqlserver://sql:1433", "dw.dbo.orders"),
        ("trino://u@trino:8080/hive", "web.events", "trino://trino:8080", "hive.web.events"),
    ],
)
def test_naming_follows_the_openlineage_spec(url, table, namespace, name):
    naming = naming_for_url(sa.make_url(url))
    assert (naming.namespace, naming.name(table)) == (namespace, name)


def test_column_lineage_sources_are_renamed_with_the_datasets(events, sqlite_engine):
    totals = column_lineage_facet(
        "main/customer_totals",
        {"total": {"source": "main/orders", "field": "amount", "operation": "SUM"}},
    )
    with lineage_run("totals", inputs=["main/orders"], outputs=[totals], connector={"main": sqlite_engine}):
        pass
    complete = events.of_job("totals")[-1]
    (source,) = complete["outputs"][0]["facets"]["columnLineage"]["fields"]["total"]["inputFields"]
    assert (source["namespace"], source["name"]) == (complete["inputs"][0]["namespace"], "main.orders")


def test_prefix_without_connector_keeps_default_naming(events, sqlite_engine):
    with lineage_run("copy", inputs=["main/orders"], outputs=["archive/orders"], connector={"main": sqlite_engine}):
        pass
    complete = events.of_job("copy")[-1]
    assert (complete["outputs"][0]["namespace"], complete["outputs"][0]["name"]) == ("default", "archive/orders")
    assert "schema" not in complete["outputs"][0]["facets"]
    assert complete["inputs"][0]["name"] == "main.orders"
