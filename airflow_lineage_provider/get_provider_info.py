"""Provider metadata read by Airflow's ``ProvidersManager``.

Airflow imports this entry point while its own configuration is still initialising, so this module
must not import Airflow (or anything that does): it returns plain data only.
"""

from __future__ import annotations

from typing import Any

from airflow_lineage_provider.defaults import GRAPH_CACHE_NODES, LINEAGE_ENDPOINT, MAX_BODY_BYTES
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
    "prepare_task_processes": _option(
        "Import what a task's lineage events need (the transport's modules, the custom run facets and "
        "extractors, openlineage-python's facets) once in the scheduler, before it starts its executor, so that "
        "every task process it forks has them instead of importing them again (docs/deploy.md, task cost).\n",
        "True",
        "False",
        "boolean",
    ),
    "schema_lookup_timeout": _option(
        "Seconds a run's schema lookups (the ``schema`` facets read from connectors when a block or task "
        "ends) may take in all. Past it, the datasets not looked up yet are sent without a schema and a "
        "warning names them: a database that does not answer never holds up the task. 0: no limit.\n",
        "5",
        "2.5",
        "float",
    ),
}
#: Outbox transport, shipping, export DAG and retention (``airflow_lineage_provider.outbox``).
OUTBOX_OPTIONS: dict[str, Any] = {
    "outbox_url": _option(
        "SQLAlchemy URL of the lineage outbox: the database ``OutboxTransport`` appends events to and the "
        "export DAG and ``airflow-lineage`` commands read from. Empty: an SQLite file "
        "``lineage_outbox.db`` under ``$AIRFLOW_HOME``. Use PostgreSQL when several machines run tasks.\n",
        "",
        "postgresql+psycopg2://airflow@db:5432/lineage",
    ),
    "outbox_spill_dir": _option(
        "Folder for events that could not be written to the outbox (database unreachable); they are moved "
        "into the outbox automatically once it is reachable again. Empty: beside the SQLite file, or "
        "``$AIRFLOW_HOME/lineage_outbox_spill/`` for server databases.\n",
        "",
        "/var/lib/airflow/lineage-spill",
    ),
    "retention_days": _option(
        "Days an event is kept in the outbox after it was stored, once every destination has it "
        "(delivered or exported). Pending and dead-lettered events are never pruned.\n",
        "7",
        "30",
        "integer",
    ),
    "export_conn_id": _option(
        "Airflow connection (type ``openlineage``) of the consumer the export DAG ships to: ``schema`` "
        "http/https, ``host``, ``port``, ``password`` = API key, extra ``endpoint``, ``timeout``, "
        "``compress``, ``verify``. Empty: the DAG does not ship.\n",
        "openlineage_default",
        "marquez",
    ),
    "export_path": _option(
        "Folder or object-storage URL (``s3://bucket/lineage``, ``file:///data/lineage``) the export DAG "
        "writes newline-delimited JSON files to, partitioned by event date and hour. Empty: no file export.\n",
        "",
        "s3://my-bucket/openlineage",
    ),
    "export_compress": _option(
        "Gzip the export DAG's files (``.ndjson.gz``).\n",
        "False",
        "True",
        "boolean",
    ),
    "export_schedule": _option(
        "Schedule of the ``openlineage_export`` DAG (a cron expression or preset).\n",
        "*/5 * * * *",
        "@hourly",
    ),
    "export_time_budget": _option(
        "Seconds one export DAG run may spend shipping before it stops and leaves the rest for the next "
        "run; keep it below the schedule interval.\n",
        "240",
        "600",
        "integer",
    ),
    "export_batch_size": _option(
        "Events per request when shipping (the batch endpoint takes them as one array).\n",
        "500",
        "1000",
        "integer",
    ),
    "export_dag_lineage": _option(
        "Let the export DAG's own tasks emit OpenLineage events. Off by default so that shipping lineage "
        "does not feed new events back into the outbox.\n",
        "False",
        "True",
        "boolean",
    ),
}
#: Design-time lineage: JobEvents published from serialized DAGs (``airflow_lineage_provider.design``).
DESIGN_OPTIONS: dict[str, Any] = {
    "publish_dags": _option(
        "Give the ``openlineage_export`` DAG a ``publish_dags`` task that publishes the declared lineage of "
        "every DAG whose serialized version changed since its last publication, as OpenLineage JobEvents, "
        "into the outbox before shipping (docs/design-time-lineage.md).\n",
        "True",
        "False",
        "boolean",
    ),
    "publish_metadata_conn_id": _option(
        "Airflow connection to Airflow's own metadata database (read access suffices) that the ``publish_dags`` "
        "task reads serialized DAGs through: Airflow 3 task processes have no database access of their own. "
        "Empty: the process's ``[database] sql_alchemy_conn`` (set for the CLI and ``airflow dags test``, "
        "not on workers).\n",
        "",
        "airflow_metadata_readonly",
    ),
    "dag_run_egeria_facets": _option(
        "Send the Egeria facets a DAG's params ask for on its DAG runs too. With ``[openlineage] transport`` "
        "wrapped in ``EgeriaDagRunTransport`` (docs/egeria.md), the DAG run's own START, COMPLETE and FAIL carry "
        "``egeria_informationSupplyChain`` / ``egeria_governanceAction``; without it, a RUNNING event of the DAG "
        "run's job and run id carries them when the run starts (the stock provider applies custom run facets to "
        "task events only).\n",
        "True",
        "False",
        "boolean",
    ),
}
#: The lineage consumer and its Airflow plugin (``airflow_lineage_provider.consumer``).
CONSUMER_OPTIONS: dict[str, Any] = {
    "consumer_plugin": _option(
        "Mount the lineage consumer (OpenLineage ingest and graph API) in the Airflow API server under ``/lineage``.\n",
        "True",
        "False",
        "boolean",
    ),
    "consumer_store_url": _option(
        "SQLAlchemy URL of the consumer's lineage store (SQLite in WAL mode, or PostgreSQL for several "
        "API server replicas). Empty: ``sqlite:///$AIRFLOW_HOME/lineage_consumer.db``.\n",
        "",
        "postgresql+psycopg2://lineage:secret@db:5432/lineage",
    ),
    "consumer_api_key": {
        **_option(
            "A consumer API key with scope ``write`` (ingest and reads), named ``api-key`` in the audit log, "
            "sent as ``X-API-Key`` or ``Authorization: Bearer`` by producers that have no Airflow token. Airflow "
            "users need no key: they authenticate with Airflow's own login (docs/security.md).\n",
            "",
            "s3cret",
        ),
        "sensitive": True,
    },
    "consumer_keys_file": _option(
        "JSON file of consumer API keys with scopes and optional namespace limits: "
        '``{"keys": [{"name": ..., "scope": "read|write|admin", "secret": ..., '
        '"namespaces": [patterns]}]}`` (docs/security.md). Empty: no file.\n',
        "",
        "/etc/airflow/lineage-keys.json",
    ),
    "consumer_anonymous_access": _option(
        "Access a request without any credential gets: ``none`` (the default: every route needs an Airflow "
        "login, token or key), or ``read``, ``write``, ``admin`` to opt in to anonymous access.\n",
        "none",
        "read",
    ),
    "consumer_auth_cache_seconds": _option(
        "Seconds the consumer remembers that an Airflow token may (or may not) do something, so each request "
        "does not pay Airflow's ~1 ms token check; a logout or permission change takes effect within this "
        "time, never past the token's expiry. 0: check every request.\n",
        "5",
        "0",
        "float",
    ),
    "consumer_user_namespaces": _option(
        "Namespaces Airflow users may see and write, by user, role or team: entries 'user:NAME = PATTERN, ...', "
        "'role:NAME = ...' or 'team:NAME = ...' by line or ';', namespace patterns as for consumer keys. A user is "
        "limited to the patterns of every entry naming it, its roles or its teams, exactly as a namespace-limited "
        "key; a user no entry names sees every namespace. Empty: no user is limited.\n",
        "",
        "role:Viewer = public*; user:alice = warehouse, s3://lake*",
    ),
    "consumer_max_body_bytes": _option(
        "Largest ingest request body the consumer accepts, in bytes (larger ones get 413).\n",
        str(MAX_BODY_BYTES),
        "67108864",
        "integer",
    ),
    "consumer_strict": _option(
        "Reject events that the OpenLineage JSON schema rejects (needs ``consumer_spec_dir``).\n",
        "False",
        "True",
        "boolean",
    ),
    "consumer_batch_answers": _option(
        "Status codes of POST /api/v1/lineage/batch: 'summary' (200 all stored, 207 some, 400 none) or 'feast' "
        "(Feast's consumer's: 204 all stored, else 200). The body carries the same summary either way.\n",
        "summary",
        "feast",
    ),
    "consumer_spec_dir": _option(
        "Folder with the OpenLineage spec's ``OpenLineage.json`` and ``facets/`` (the ``spec/`` folder of "
        "the OpenLineage repository), read in strict mode.\n",
        "",
        "/opt/openlineage/spec",
    ),
    "consumer_retention_days": _option(
        "Days the consumer keeps raw events and runs; the graph itself is never pruned. Empty or 0: keep "
        "everything (retention off).\n",
        "",
        "90",
        "integer",
    ),
    "consumer_retention_check_interval_hours": _option(
        "How often the consumer prunes when ``consumer_retention_days`` is set, in hours (a timer in the API "
        "server; the interval counts from the store's last scheduled prune, whichever process ran it).\n",
        "24",
        "6",
        "float",
    ),
    "consumer_namespace_aliases": _option(
        "Other spellings of namespaces, as ``alias=canonical`` entries separated by newlines or commas "
        "(exact strings; chains resolve to their end). The consumer shows and walks an alias's jobs and "
        "datasets under the canonical namespace, at read time: stored events are never rewritten.\n",
        "",
        "postgresql://db.internal:5432=postgres://db:5432",
    ),
    "consumer_graph_cache_nodes": _option(
        "Nodes whose graph data the consumer keeps in memory for graph answers, keyed by a version every "
        "event naming the node bumps (never stale); about 1 KB each. 0: read every node from the store.\n",
        str(GRAPH_CACHE_NODES),
        "50000",
        "integer",
    ),
    "consumer_max_batch_events": _option(
        "Most events one ingest request may carry; a larger batch gets 413 before its events are decoded.\n",
        "10000",
        "5000",
        "integer",
    ),
    "consumer_max_clock_skew_hours": _option(
        "How far ahead of the consumer's clock an event's eventTime may be; later events get 400.\n",
        "24",
        "1",
        "float",
    ),
    "consumer_upload_timeout_seconds": _option(
        "Longest an ingest request's body may take to arrive, in seconds; a slower upload gets 408 and its "
        "connection is closed.\n",
        "60",
        "120",
        "float",
    ),
    "consumer_max_concurrent_walks": _option(
        "Graph and column-lineage walks computed at once per API server process; up to 64 more wait, past "
        "that a walk gets 503 with Retry-After.\n",
        "4",
        "8",
        "integer",
    ),
    "consumer_walk_timeout_seconds": _option(
        "Longest a graph or column-lineage walk may take from when it arrives, waiting for a turn included; past it "
        "the walk's statement is cancelled and it is answered 504 (503 with Retry-After when it never got a turn). "
        "A walk whose client disconnects is cancelled at once.\n",
        "30",
        "10",
        "float",
    ),
    "consumer_max_answer_bytes": _option(
        "Most bytes of stored values (raw events, facets, schemas) one page of a listing may show; a larger page of "
        "more than one item is answered 400 naming the limit to ask for. 32 MiB.\n",
        "33554432",
        "8388608",
        "integer",
    ),
    "consumer_ingest_group_wait_ms": _option(
        "Under concurrent single-event ingest (workers posting with the stock HTTP transport), how long the "
        "consumer may wait for the other active senders' requests before it commits a group, in milliseconds: "
        "the group then shares one transaction. A lone sender never waits; 0 turns the wait off.\n",
        "2",
        "0",
        "float",
    ),
    "consumer_ingest_apply": _option(
        "How ingested events reach the lineage graph: inline (applied in the ingest's own transaction), "
        "deferred (committed to an ingest log and answered, then applied in bounded batches by a thread of "
        "the API server; reads wait until what was logged before them is applied), or auto: deferred on "
        "PostgreSQL, inline on SQLite. A 201 means committed either way; deferred is much cheaper per event with "
        "many concurrent single-event senders on PostgreSQL, and no faster on SQLite.\n",
        "auto",
        "deferred",
        "string",
    ),
    "consumer_ingest_log_max_events": _option(
        "With deferred apply, most events the ingest log may hold waiting to be applied: while it holds this "
        "many, ingests are answered 503 with Retry-After (nothing of them stored) until the applier catches up.\n",
        "10000",
        "50000",
        "integer",
    ),
    "consumer_ingest_log_max_bytes": _option(
        "With deferred apply, most bytes of raw events the ingest log may hold waiting to be applied (as "
        "consumer_ingest_log_max_events). 8 MiB.\n",
        "8388608",
        "33554432",
        "integer",
    ),
    "consumer_ingest_apply_timeout_seconds": _option(
        "With deferred apply, longest applying one batch of the ingest log may take; an event that takes longer "
        "alone is set aside (listed and requeued by /api/v1/ingest-log/unapplied) so that the log moves on.\n",
        "10",
        "30",
        "float",
    ),
}
#: Egeria and materialization facets, the extractor (``airflow_lineage_provider.facets``).
FACET_OPTIONS: dict[str, Any] = {
    "information_supply_chain": _option(
        "Qualified name of the Egeria information supply chain given to every task's events (as an "
        "``egeria_informationSupplyChain`` run facet) when neither the task's nor the DAG's params set "
        "``information_supply_chain``. Empty: no default.\n",
        "",
        "InformationSupplyChain::sales-orders",
    ),
    "egeria_governance_action": _option(
        "JSON object of the Egeria governance action given to every task's events (as an "
        "``egeria_governanceAction`` run facet) when neither the task's nor the DAG's params set "
        "``egeria_governance_action``. Keys: iscQualifiedName, engineActionGUID, governanceEngineName, "
        "requestType, governanceActionTypeName, processName, processStepName. Empty: no default.\n",
        "",
        '{"governanceEngineName": "AssetGovernance", "requestType": "nightly-load"}',
    ),
    "extractor_operators": _option(
        "Operator class names (``task_type``, e.g. ``MyCopyOperator``), separated by ``;`` or ``,``, that "
        "the extractor ``airflow_lineage_provider.extractors.DeclaredLineageExtractor`` handles once it is "
        "listed in ``[openlineage] extractors``: lineage from their inlets/outlets and SQL, plus the Egeria "
        "and materialization run facets.\n",
        "",
        "CopyRowsOperator;ExportOperator",
    ),
}

CONFIG: dict[str, Any] = {
    "lineage_provider": {
        "description": "Settings of airflow-lineage-provider: dataset naming, producer identity, how misuse "
        "of the lineage API is reported, the outbox and export, the consumer, and run facets.\n",
        "options": {**PRODUCER_OPTIONS, **OUTBOX_OPTIONS, **DESIGN_OPTIONS, **CONSUMER_OPTIONS, **FACET_OPTIONS},
    }
}

#: Connection types the provider registers (``connection-types`` entries).
CONNECTION_TYPES: list[dict[str, Any]] = [
    {
        "connection-type": "openlineage",
        "hook-class-name": "airflow_lineage_provider.hooks.openlineage.OpenLineageConsumerHook",
        "hook-name": "OpenLineage consumer",
        "conn-fields": {
            "endpoint": {
                "label": "Endpoint",
                "schema": {"type": ["string", "null"], "default": LINEAGE_ENDPOINT},
                "description": "Path of the lineage endpoint; batches go to <endpoint>/batch.",
            },
            "timeout": {"label": "Timeout (seconds)", "schema": {"type": ["number", "null"], "default": 10}},
            "compress": {"label": "Gzip request bodies", "schema": {"type": ["boolean", "null"], "default": False}},
            "verify": {"label": "Verify TLS certificates", "schema": {"type": ["boolean", "null"], "default": True}},
        },
        "ui-field-behaviour": {
            "hidden-fields": ["login"],
            "relabeling": {"schema": "Scheme (http or https)", "password": "API key"},
            "placeholders": {"host": "marquez.example.com", "port": "5000", "schema": "https"},
        },
    }
]
#: Airflow plugins the provider registers (``plugins`` entries: ``name``, ``plugin-class``).
PLUGINS: list[dict[str, Any]] = [
    {"name": "lineage_consumer", "plugin-class": "airflow_lineage_provider.plugins.consumer.LineageConsumerPlugin"},
    {
        "name": "lineage_dag_run_facets",
        "plugin-class": "airflow_lineage_provider.plugins.dag_run_facets.LineageDagRunFacetsPlugin",
    },
    {
        "name": "lineage_task_emission",
        "plugin-class": "airflow_lineage_provider.plugins.task_emission.LineageTaskEmissionPlugin",
    },
]
#: TaskFlow decorators (``task-decorators`` entries: ``name``, ``class-name``).
TASK_DECORATORS: list[dict[str, Any]] = [
    {"name": "lineage", "class-name": "airflow_lineage_provider.decorators.lineage.lineage_task"},
]


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
