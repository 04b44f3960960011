"""OpenLineage dataset names for tables of a database, from its SQLAlchemy URL.

Follows the OpenLineage naming spec (``openlineage.client.naming.dataset`` where it has a class for the
platform), so datasets declared here meet those emitted by Spark, dbt and the stock SQL operators:

============  ==================================  =============================
platform      namespace                           name
============  ==================================  =============================
PostgreSQL    ``postgres://{host}:{port}``        ``{database}.{schema}.{table}``
MySQL/MariaDB ``mysql://{host}:{port}``           ``{database}.{table}``
SQL Server    ``sqlserver://{host}:{port}``       ``{database}.{schema}.{table}``
Oracle        ``oracle://{host}:{port}``          ``{service}.{schema}.{table}``
Trino         ``trino://{host}:{port}``           ``{catalog}.{schema}.{table}``
SQLite        ``sqlite://{absolute file path}``   ``{schema}.{table}`` (schema ``main``)
other         ``{dialect}://{host}:{port}``       ``{database}.{schema}.{table}``
============  ==================================  =============================

The spec has no SQLite entry; the form above keeps the file in the namespace (one SQLite file is one
database server) and the schema in the name, like the server databases.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from openlineage.client.naming import dataset as ol_naming
from sqlalchemy.engine import URL

DEFAULT_PORTS = {"postgresql": 5432, "mysql": 3306, "mariadb": 3306, "mssql": 1433, "oracle": 1521, "trino": 8080}
DEFAULT_SCHEMAS = {"postgresql": "public", "mssql": "dbo", "sqlite": "main", "trino": "default"}


def split_table(table: str) -> tuple[str | None, str]:
    """``"public.orders"`` → ``("public", "orders")``; ``"orders"`` → ``(None, "orders")``."""
    schema, _, name = table.rpartition(".")
    return (schema or None), name


@dataclass(frozen=True)
class TableNaming:
    """How the tables of one database are named: the namespace, and a name per table."""

    backend: str
    namespace: str
    database: str | None
    default_schema: str | None

    def name(self, table: str) -> str:
        """The dataset name of ``table`` (``"orders"`` or ``"schema.orders"``) in this database."""
        schema, bare = split_table(table)
        if self.backend in ("mysql", "mariadb"):
            host, port = self.namespace.removeprefix("mysql://").rsplit(":", 1)
            return ol_naming.MySQL(host=host, port=port, database=schema or self.database or "", table=bare).get_name()
        schema = schema or self.default_schema
        if self.backend == "postgresql" and self.database and schema:
            host, port = self.namespace.removeprefix("postgres://").rsplit(":", 1)
            return ol_naming.Postgres(
                host=host, port=port, database=self.database, schema=schema, table=bare
            ).get_name()
        return ".".join(part for part in (self.database, schema, bare) if part)

    def with_database_info(self, scheme: str, authority: str | None, database: str | None) -> TableNaming:
        """This naming with the namespace and database an Airflow hook reports for OpenLineage."""
        namespace = f"{scheme}://{authority}" if authority else f"{scheme}://"
        return TableNaming(self.backend, namespace, database or self.database, self.default_schema)


def naming_for_url(url: URL) -> TableNaming:
    """The naming of the database a SQLAlchemy URL points at (no connection is made)."""
    backend = url.get_backend_name()
    if backend == "sqlite":
        database = url.database or ":memory:"
        if database == ":memory:" or database.startswith("file:"):
            path = database
        else:  # Airflow's sqlite connections may yield "//abs/path": one file, one name
            path = os.path.abspath("/" + database.lstrip("/") if database.startswith("/") else database)
        return TableNaming(backend, f"sqlite://{path}", None, "main")
    host = url.host or "localhost"
    port = url.port or DEFAULT_PORTS.get(backend)
    authority = f"{host}:{port}" if port else host
    if backend == "postgresql":
        namespace = ol_naming.Postgres(host=host, port=str(port), database="d", schema="s", table="t").get_namespace()
    elif backend in ("mysql", "mariadb"):
        namespace = ol_naming.MySQL(host=host, port=str(port), database="d", table="t").get_namespace()
    elif backend == "mssql":
        namespace = f"sqlserver://{authority}"
    else:
        namespace = f"{backend}://{authority}"
    return TableNaming(backend, namespace, url.database, DEFAULT_SCHEMAS.get(backend))
