"""The materialization run facet: what a successful task run wrote, and for which data interval.

Key ``airflowLineageProvider_materialization`` (the prefix names this package, as the OpenLineage spec
asks of custom facets). Its JSON schema ships in the package (``schemas/1-0-0/MaterializationRunFacet.json``)
and its ``$id`` is the facet's immutable ``_schemaURL``: a changed facet gets a new version folder and a
new URL, never an edited document.

Rows written come, in this order, from the task's own code (:func:`record_rows_written`, or
``rows_written=`` given by the caller), else from the cursor ``rowcount`` of the SQL statements the
operator's database hook ran (see :func:`airflow_lineage_provider.extractors.sql.cursor_rows_written`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from importlib import resources
from typing import Any, ClassVar

import attr
from openlineage.client.event_v2 import Dataset
from openlineage.client.facet_v2 import RunFacet
from openlineage.client.utils import RedactMixin

from airflow_lineage_provider import conf

#: Facet key of :class:`MaterializationRunFacet` in ``run.facets``.
MATERIALIZATION_KEY = "airflowLineageProvider_materialization"
#: Version folder of the current schema under ``airflow_lineage_provider/schemas``.
SCHEMA_VERSION = "1-0-0"
#: Where this package publishes its facet schemas; each version folder below it is immutable.
SCHEMA_BASE = "https://airflow-lineage-provider.github.io/spec/facets"
SCHEMA_NAME = "MaterializationRunFacet"
#: ``$id`` of the shipped schema document.
SCHEMA_ID = f"{SCHEMA_BASE}/{SCHEMA_VERSION}/{SCHEMA_NAME}.json"
#: The facet's ``_schemaURL``.
SCHEMA_URL = f"{SCHEMA_ID}#/$defs/{SCHEMA_NAME}"


def _check_datetime(_: Any, attribute: attr.Attribute, value: str | None) -> None:
    if value is None:
        return
    from dateutil import parser

    try:
        parsed = "t" in value.lower() and parser.isoparse(value).tzinfo is not None
    except (ValueError, TypeError, OverflowError):
        parsed = False
    if not parsed:
        raise ValueError(f"{attribute.name} {value!r} must be an ISO-8601 date-time with a time and zone")


def _check_rows(_: Any, attribute: attr.Attribute, value: int | None) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise ValueError(f"{attribute.name} {value!r} must be a whole number of rows, 0 or more")


@attr.define
class MaterializedDataset(RedactMixin):
    """One dataset the run wrote, named as in the event's ``outputs``."""

    namespace: str
    """Namespace of the dataset (e.g. ``postgres://db.example.com:5432``)."""
    name: str
    """Name of the dataset within its namespace (e.g. ``analytics.public.orders``)."""

    _skip_redact: ClassVar[list[str]] = ["namespace", "name"]


@attr.define
class MaterializationRunFacet(RunFacet):
    """What a successful run materialized: its output datasets, rows written and the data interval."""

    outputs: list[MaterializedDataset] = attr.field(factory=list)
    """The output datasets the run materialized (at least one)."""
    rowsWritten: int | None = attr.field(default=None, validator=_check_rows)
    """Rows the run wrote (inserted, updated or merged) across its outputs, when known."""
    dataIntervalStart: str | None = attr.field(default=None, validator=_check_datetime)
    """Start (included) of the DAG run's data interval, ISO-8601."""
    dataIntervalEnd: str | None = attr.field(default=None, validator=_check_datetime)
    """End (excluded) of the DAG run's data interval, ISO-8601."""
    logicalDate: str | None = attr.field(default=None, validator=_check_datetime)
    """Logical date of the DAG run, ISO-8601."""

    _additional_skip_redact: ClassVar[list[str]] = [
        "outputs",
        "rowsWritten",
        "dataIntervalStart",
        "dataIntervalEnd",
        "logicalDate",
    ]

    @staticmethod
    def _get_schema() -> str:
        return SCHEMA_URL


def _iso(value: datetime | str | None, argument: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=timezone.utc)).isoformat()
    raise TypeError(f"{argument} {value!r} ({type(value).__name__}) must be a datetime or an ISO-8601 string")


def _materialized(value: Any) -> MaterializedDataset:
    if isinstance(value, Dataset):
        return MaterializedDataset(value.namespace, value.name)
    if isinstance(value, Mapping):
        namespace, name = value.get("namespace"), value.get("name")
    elif isinstance(value, tuple | list) and len(value) == 2:
        namespace, name = value
    else:
        raise TypeError(
            f"output {value!r} ({type(value).__name__}) is not a (namespace, name) pair, a dict with "
            "'namespace' and 'name', or an openlineage Dataset"
        )
    if not isinstance(namespace, str) or not namespace or not isinstance(name, str) or not name:
        raise ValueError(f"output {value!r} needs a non-empty string namespace and name")
    return MaterializedDataset(namespace, name)


def materialization_facet(
    outputs: Iterable[Any],
    *,
    rows_written: int | None = None,
    data_interval_start: datetime | str | None = None,
    data_interval_end: datetime | str | None = None,
    logical_date: datetime | str | None = None,
) -> MaterializationRunFacet | None:
    """The materialization facet of a successful run, or ``None`` when it has no outputs.

    ``outputs`` mixes ``(namespace, name)`` pairs, dicts with ``namespace``/``name`` and openlineage
    ``Dataset`` objects (e.g. an ``OperatorLineage``'s outputs); duplicates are dropped. Dates are
    datetimes (naive ones taken as UTC) or ISO-8601 strings. Raises ``ValueError``/``TypeError`` naming
    the value for a malformed argument (a negative ``rows_written``, an output without a name, ...).

    Example::

        facet = materialization_facet(
            [("postgres://db:5432", "warehouse.public.orders")],
            rows_written=1200,
            data_interval_start=dag_run.data_interval_start,
            data_interval_end=dag_run.data_interval_end,
            logical_date=dag_run.logical_date,
        )
        if facet is not None:
            run_facets[MATERIALIZATION_KEY] = facet
    """
    materialized: list[MaterializedDataset] = []
    for value in outputs or ():
        dataset = _materialized(value)
        if dataset not in materialized:
            materialized.append(dataset)
    if not materialized:
        return None
    return MaterializationRunFacet(
        outputs=materialized,
        rowsWritten=rows_written,
        dataIntervalStart=_iso(data_interval_start, "data_interval_start"),
        dataIntervalEnd=_iso(data_interval_end, "data_interval_end"),
        logicalDate=_iso(logical_date, "logical_date"),
        producer=conf.producer(),
    )


def schema_document() -> dict[str, Any]:
    """The facet's JSON schema as shipped in the package (its ``$id`` is :data:`SCHEMA_ID`)."""
    path = resources.files("airflow_lineage_provider") / "schemas" / SCHEMA_VERSION / f"{SCHEMA_NAME}.json"
    return json.loads(path.read_text(encoding="utf-8"))
