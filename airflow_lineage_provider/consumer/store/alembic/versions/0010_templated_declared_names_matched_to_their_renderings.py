"""Version 10: templated declared names matched to their renderings."""

from __future__ import annotations

import json

from alembic import op
from sqlalchemy import Connection, text

from airflow_lineage_provider.consumer.store import tables, templated_names
from airflow_lineage_provider.consumer.store.store_settings import write_setting

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    _templated_names(op.get_bind())


_TEMPLATED_NAME_TABLES = """
CREATE TABLE lineage_name_patterns (
    node_id {bigint} NOT NULL PRIMARY KEY, name_regex TEXT NOT NULL, namespace_regex TEXT
);
CREATE TABLE lineage_pattern_renderings (
    pattern_id {bigint} NOT NULL, dataset_id {bigint} NOT NULL, PRIMARY KEY (pattern_id, dataset_id)
);
CREATE INDEX ix_lineage_pattern_renderings_dataset ON lineage_pattern_renderings (dataset_id, pattern_id)
"""

#: Version 9's declared datasets whose facets may say their name is a template, a page at a time.
_V9_TEMPLATED_DATASETS = (
    "SELECT n.id, n.namespace, n.name, d.facets FROM lineage_nodes n JOIN lineage_datasets d ON d.node_id = n.id"
    " WHERE n.declared_at IS NOT NULL AND d.facets LIKE '%airflowLineageProvider_templatedName%' AND n.id > :after"
    " ORDER BY n.id LIMIT 1000"
)


def _templated_names(conn: Connection) -> None:
    """Version 10: declared templated names (``totals_{{ ds_nodash }}``) matched to their renderings (see
    :mod:`.templated_names`). The patterns are read from the stored facets of declared datasets, then every job's
    observed edges are matched against them."""
    bigint = "BIGINT" if conn.dialect.name == "postgresql" else "INTEGER"
    for ddl in _TEMPLATED_NAME_TABLES.format(bigint=bigint).split(";"):
        conn.exec_driver_sql(ddl)
    after, found = -1, {}
    while rows := conn.execute(text(_V9_TEMPLATED_DATASETS), {"after": after}).all():
        after = rows[-1][0]
        for node_id, namespace, name, facets in rows:
            pattern = templated_names.pattern_of(namespace, name, json.loads(facets))
            if pattern is not None:
                found[node_id] = pattern
    if found:
        templated_names.write_patterns(conn, found)
        write_setting(conn, tables.TEMPLATED_NAMES, "1")
        templated_names.rematch_all(conn)
