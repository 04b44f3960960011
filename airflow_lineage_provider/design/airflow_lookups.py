"""Connections and variables looked up as Airflow's own command line looks them up.

In Airflow 3 a process finds connections and variables according to what it is:

* a **task process** asks the API server, through its supervisor;
* a **server process** — the scheduler, the API server, and the ``airflow connections get`` /
  ``airflow variables get`` commands, which declare themselves one — reads the configured secrets backends,
  the environment (``AIRFLOW_CONN_*``, ``AIRFLOW_VAR_*``) and the metadata database;
* **any other process** reads only the secrets backends and the environment.

``airflow-lineage publish-dags`` runs where Airflow's CLI runs, beside the metadata database, and must find
the connections added with ``airflow connections add`` (stored there): ``[lineage_provider]
publish_metadata_conn_id`` and the warehouse connections that name the datasets. :func:`as_airflow_cli` makes
such a command look them up as ``airflow connections get`` does, through Airflow's public lookups
(``airflow.sdk.BaseHook.get_connection``, ``airflow.sdk.Variable.get``).

How a process declares itself a server process is the environment variable ``_AIRFLOW_PROCESS_CONTEXT=server``,
which ``airflow connections get``, the scheduler and the API server set and which the task SDK reads in
Airflow 3.1 to 3.3 alike (``ensure_secrets_backend_loaded``). It is the one underscored name this module
relies on; ``tests/test_publish_dags_connections.py`` checks the lookups end to end, in a real deployment's
CLI, at whichever Airflow the tests run on.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

#: The environment variable through which Airflow's server processes and CLI commands declare what they are.
PROCESS_CONTEXT_VARIABLE = "_AIRFLOW_PROCESS_CONTEXT"


@contextmanager
def as_airflow_cli() -> Iterator[None]:
    """Within the block, look connections and variables up as ``airflow connections get`` does: secrets
    backends, then the environment, then the metadata database. For commands run beside Airflow's CLI
    (``publish-dags``, ``impact``), never inside a task: a task's lookups already reach every connection,
    through the API server, and its process has no database access. A context already declared is kept."""
    if os.environ.get(PROCESS_CONTEXT_VARIABLE):
        yield
        return
    os.environ[PROCESS_CONTEXT_VARIABLE] = "server"
    try:
        yield
    finally:
        os.environ.pop(PROCESS_CONTEXT_VARIABLE, None)


def get_connection(conn_id: str) -> Any:
    """The Airflow Connection ``conn_id``, through the task SDK's ``BaseHook.get_connection``: in a task
    process from the API server; within :func:`as_airflow_cli` as ``airflow connections get`` finds it.
    Raises Airflow's ``AirflowNotFoundException`` when it is defined nowhere."""
    from airflow.sdk import BaseHook

    return BaseHook.get_connection(conn_id)
