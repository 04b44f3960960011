"""Connections and variables looked up as Airflow's own command line looks them up.

In Airflow 3 a process finds connections and variables according to what it is:

* a **task process** asks the API server, through its supervisor;
* a **server process** — the scheduler, the API server, and the ``airflow connections get`` /
  ``airflow variables get`` commands, which declare themselves one — reads the configured secrets backends,
  the environment (``AIRFLOW_CONN_*``, ``AIRFLOW_VAR_*``) and the metadata database;
* **any other process** reads only the secrets backends and the environment.

``airflow-lineage publish-dags`` runs where Airflow's CLI runs, beside the metadata database, but was "any
other process": a connection added with ``airflow connections add`` (stored in the metadata database) was not
found — neither ``[lineage_provider] publish_metadata_conn_id`` nor the warehouse connections that name the
datasets, which then kept the default namespace. :func:`as_airflow_cli` makes such a command look them up as
``airflow connections get`` does, through Airflow's public lookups (``airflow.sdk.BaseHook.get_connection``,
``airflow.sdk.Variable.get``).

How a process declares itself a server process is the environment variable ``_AIRFLOW_PROCESS_CONTEXT=server``,
which ``airflow connections get``, the scheduler and the API server set and which the task SDK reads in
Airflow 3.1 to 3.3 alike (``ensure_secrets_backend_loaded``). It is the one underscored name this module
relies on; ``tests/test_publish_dags_connections.py`` checks the lookups end to end, in a real deployment's
CLI, at whichever Airflow the tests run on.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

#: The environment variable through which Airflow's server processes and CLI commands declare what they are.
PROCESS_CONTEXT_VARIABLE = "_AIRFLOW_PROCESS_CONTEXT"


def in_task_process() -> bool:
    """Whether this is an Airflow 3 task process: its lookups go to the API server, whatever is set here.

    Told by the supervisor's channel the task runner holds (``airflow dags test`` runs tasks in its own process
    with one too), or by the ORM session the supervisor blocked."""
    task_runner = sys.modules.get("airflow.sdk.execution_time.task_runner")
    return getattr(task_runner, "SUPERVISOR_COMMS", None) is not None or metadata_database_blocked()


def metadata_database_blocked() -> bool:
    """Whether Airflow 3's task supervisor blocked this process's ORM access to the metadata database (its
    configuration may still name the database, e.g. through an environment variable, but a task is not meant
    to use it). ``airflow dags test`` runs tasks in a process that keeps it."""
    settings = sys.modules.get("airflow.settings")
    return getattr(getattr(settings, "Session", None), "__name__", "") == "BlockedDBSession"


@contextmanager
def as_airflow_cli() -> Iterator[None]:
    """Within the block, look connections and variables up as ``airflow connections get`` does: secrets
    backends, then the environment, then the metadata database. A task process is left as it is (its lookups
    already reach every connection, through the API server)."""
    if in_task_process() or os.environ.get(PROCESS_CONTEXT_VARIABLE):
        yield
        return
    os.environ[PROCESS_CONTEXT_VARIABLE] = "server"
    try:
        yield
    finally:
        os.environ.pop(PROCESS_CONTEXT_VARIABLE, None)


def get_connection(conn_id: str) -> Any:
    """The Airflow Connection ``conn_id``, through the task SDK's ``BaseHook.get_connection``: in a task
    process from the API server; elsewhere within :func:`as_airflow_cli`, as ``airflow connections get`` finds
    it. Raises Airflow's ``AirflowNotFoundException`` when it is defined nowhere."""
    from airflow.sdk import BaseHook

    with as_airflow_cli():
        return BaseHook.get_connection(conn_id)
