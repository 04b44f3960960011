"""Provider metadata read by Airflow's ``ProvidersManager``.

Airflow imports this entry point while its own configuration is still initialising, so this module
must not import Airflow (or anything that does): it returns plain data only.
"""

from __future__ import annotations

from typing import Any

from airflow_lineage_provider.version import __version__

PACKAGE_NAME = "airflow-lineage-provider"


def _option(description: str, default: str, example: str | None, type_: str = "string") -> dict[str, Any]:
    return {
        "description": description,
        "version_added": None,
        "type": type_,
        "example": example,
        "default": default,
    }


# Options are grouped by the component that reads them; each group is edited by that component's owner.
PRODUCER_OPTIONS: dict[str, Any] = {
    "namespace": _option(
        'Namespace given to datasets that no connector names (plain ``"database/table"`` '
        "strings and dicts without ``namespace``). Datasets served by a connector take the "
        "namespace the OpenLineage naming spec gives their platform instead.\n",
        "default",
        "warehouse",
    ),
    "producer": _option(
        "URI written to the ``producer`` field of every event and the ``_producer`` field of "
        "every facet this package builds. Defaults to this package's project URI and version.\n",
        "",
        "https://github.com/acme/data-platform",
    ),
    "strict": _option(
        "When true, misuse of the lineage API (a run_id that is not a UUID, an unknown event "
        "type, a dataset of an unsupported type) raises ValueError/TypeError before the user's "
        "code runs, instead of being logged and skipped. Meant for users' own tests and CI.\n",
        "False",
        "True",
        "boolean",
    ),
}
#: Outbox transport, shipping, export DAG and retention (``airflow_lineage_provider.outbox``).
OUTBOX_OPTIONS: dict[str, Any] = {}
#: The lineage consumer and its Airflow plugin (``airflow_lineage_provider.consumer``).
CONSUMER_OPTIONS: dict[str, Any] = {}
#: Egeria and materialization facets, the extractor (``airflow_lineage_provider.facets``).
FACET_OPTIONS: dict[str, Any] = {}

CONFIG: dict[str, Any] = {
    "lineage_provider": {
        "description": "Settings of airflow-lineage-provider: dataset naming, producer identity, how misuse "
        "of the lineage API is reported, the outbox and export, the consumer, and run facets.\n",
        "options": {**PRODUCER_OPTIONS, **OUTBOX_OPTIONS, **CONSUMER_OPTIONS, **FACET_OPTIONS},
    }
}

#: Connection types the provider registers (``connection-types`` entries).
CONNECTION_TYPES: list[dict[str, Any]] = []
#: Airflow plugins the provider registers (``plugins`` entries: ``name``, ``plugin-class``).
PLUGINS: list[dict[str, Any]] = []
#: TaskFlow decorators (``task-decorators`` entries: ``name``, ``class-name``).
TASK_DECORATORS: list[dict[str, Any]] = []


def get_provider_info() -> dict[str, Any]:
    """Return the provider description Airflow registers under ``airflow providers list``."""
    return {
        "package-name": PACKAGE_NAME,
        "name": "Airflow Lineage Provider",
        "description": "Complete OpenLineage lineage for custom @task code and custom operators, "
        "with durable delivery to any lineage consumer.\n",
        "versions": [__version__],
        "config": CONFIG,
        "connection-types": CONNECTION_TYPES,
        "plugins": PLUGINS,
        "task-decorators": TASK_DECORATORS,
    }
