"""ForePaaS's cross-database pattern: a connector dict of ``get_table_schema`` objects, each prefix its own dataset.

Two real SQLite files stand behind the two connectors; every event is validated against the spec on read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from airflow_lineage_provider import lineage_run


class SqliteSchemas:
    """A ForePaaS-style connector: ``get_table_schema`` over one SQLite file, telling nothing else."""

    def __init__(self, path: Path) -> None:
        self.engine_url = f"sqlite:///{path}"
        self._engine = sa.create_engine(self.engine_url)

    def get_table_schema(self, table: str) -> dict[str, str]:
        with self._engine.connect() as conn:
            return {c["name"]: str(c["type"]) for c in sa.inspect(conn).get_columns(table)}


class SqliteSchemasWithUrl(SqliteSchemas):
    """The same connector, exposing its database URL."""

    @property
    def url(self) -> str:
        return self.engine_url


def _database(path: Path, ddl: str) -> Path:
    engine = sa.create_engine(f"sqlite:///{path}")
    with engine.begin() as conn:
        conn.exec_driver_sql(ddl)
    engine.dispose()
    return path


@pytest.fixture
def two_databases(tmp_path: Path) -> tuple[Path, Path]:
    return (
        _database(tmp_path / "db1.sqlite", "CREATE TABLE orders (id INTEGER, amount NUMERIC)"),
        _database(tmp_path / "db2.sqlite", "CREATE TABLE orders (id INTEGER, amount NUMERIC, copied_at TEXT)"),
    )


def _identity(dataset: dict[str, Any]) -> tuple[str, str]:
    return dataset["namespace"], dataset["name"]


def test_two_prefixes_without_a_namespace_stay_two_datasets(events, two_databases):
    db1, db2 = two_databases
    connectors = {"db1": SqliteSchemas(db1), "db2": SqliteSchemas(db2)}
    with lineage_run("orders.copy", inputs=["db1/orders"], outputs=["db2/orders"], connector=connectors):
        pass
    for event in events.of_job("orders.copy"):
        (source,), (target,) = event["inputs"], event["outputs"]
        assert _identity(source) == ("default", "db1.orders")
        assert _identity(target) == ("default", "db2.orders")
        assert _identity(source) != _identity(target)  # no self-loop
    complete = events.of_job("orders.copy")[-1]
    assert [f["name"] for f in complete["inputs"][0]["facets"]["schema"]["fields"]] == ["id", "amount"]
    assert [f["name"] for f in complete["outputs"][0]["facets"]["schema"]["fields"]] == ["id", "amount", "copied_at"]


def test_a_connector_exposing_its_url_names_its_datasets_by_it(events, two_databases):
    db1, db2 = two_databases
    connectors = {"db1": SqliteSchemasWithUrl(db1), "db2": SqliteSchemasWithUrl(db2)}
    with lineage_run("orders.copy", inputs=["db1/orders"], outputs=["db2/orders"], connector=connectors):
        pass
    complete = events.of_job("orders.copy")[-1]
    # The same names an Engine on these files gives (producer/naming.py): the file in the namespace.
    assert _identity(complete["inputs"][0]) == (f"sqlite://{db1}", "main.orders")
    assert _identity(complete["outputs"][0]) == (f"sqlite://{db2}", "main.orders")
    assert complete["outputs"][0]["facets"]["schema"]["fields"][2]["name"] == "copied_at"


def test_one_connector_for_every_prefix_keeps_each_prefix(events, two_databases):
    db1, _ = two_databases
    with lineage_run("orders.copy", inputs=["db1/orders"], outputs=["db2/orders"], connector=SqliteSchemas(db1)):
        pass
    complete = events.of_job("orders.copy")[-1]
    assert _identity(complete["inputs"][0]) == ("default", "db1.orders")
    assert _identity(complete["outputs"][0]) == ("default", "db2.orders")


def test_forepaas_positional_order_puts_the_connector_in_its_place(events, two_databases):
    db1, db2 = two_databases
    run_id = "01932d4c-6f5e-7a2b-8c3d-4e5f60718293"
    connectors = {"db1": SqliteSchemas(db1), "db2": SqliteSchemas(db2)}
    job_facets = {"documentation": {"description": "copy orders"}}
    with lineage_run("orders.copy", ["db1/orders"], ["db2/orders"], run_id, job_facets, connectors) as run:
        assert run.run_id == run_id
    complete = events.of_job("orders.copy")[-1]
    assert complete["run"]["runId"] == run_id
    assert complete["job"]["facets"]["documentation"]["description"] == "copy orders"
    assert _identity(complete["inputs"][0]) == ("default", "db1.orders")
    assert "schema" in complete["outputs"][0]["facets"]  # the connector served: it was not taken as run facets


def test_parameters_beyond_forepaas_six_are_keyword_only():
    with pytest.raises(TypeError):
        lineage_run("orders.copy", None, None, None, None, None, {"note": {"text": "x"}})  # type: ignore[misc]
