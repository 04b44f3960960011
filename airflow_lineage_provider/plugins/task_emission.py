"""Task processes ready for lineage: what a task's first lineage event would import, imported once beforehand.

With LocalExecutor (and any executor whose workers the scheduler forks), every task runs in a process forked
from a worker forked from the scheduler: what the scheduler imported before it started its executor, every task
has for nothing. Left to the first event of each task, the same imports — the transport's modules, the
``custom_run_facets`` functions and extractors named in ``[openlineage]``, this package's facets and naming, the
stock listener's extraction helpers — are paid again by every task, and with the stock listener's default of a
forked process per event, by every event (a forked child's imports die with it). ``docs/benchmarks.md``
(per-task cost) has what they cost.

:class:`TaskEmissionListener` imports them in ``on_starting``, which Airflow calls when it creates a job, before
the scheduler starts its executor; the DAG processor's and the triggerer's jobs cannot be told from the
scheduler's at that point and import them too (once, in a long-lived process). When the transport is the
outbox, it also opens it once, bringing its schema up to date, and closes its connections again: the processes
forked afterwards use that engine without checking the schema again (``outbox.database``), and no connection is
shared across a fork. Only when OpenLineage is enabled; off with
``[lineage_provider] prepare_task_processes = False``. Never raises.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from airflow.listeners import hookimpl
from airflow.plugins_manager import AirflowPlugin

from airflow_lineage_provider.reporting import warn_once

#: Modules a task's first lineage event imports whatever the configuration: the stock listener's extraction and
#: facet helpers, openlineage-python's serialisation, this package's run facets and dataset naming.
TASK_EVENT_MODULES = (
    "airflow.providers.common.compat.lineage.hook",
    "airflow.providers.openlineage.extractors.base",
    "airflow.providers.openlineage.extractors.manager",
    "airflow.providers.openlineage.plugins.adapter",
    "airflow.providers.openlineage.plugins.facets",
    "airflow.providers.openlineage.utils.utils",
    "openlineage.client.event_v2",
    "openlineage.client.facet_v2",
    "openlineage.client.serde",
    "airflow_lineage_provider.extractors",
    "airflow_lineage_provider.facets",
    "airflow_lineage_provider.operators.mixin",
    "airflow_lineage_provider.producer.emit",
    "airflow_lineage_provider.producer.run",
)

#: The class of what Airflow's jobs (scheduler, DAG processor, triggerer) pass to ``on_starting``; a task process
#: passes a marker of its own, and is left alone (what it imports there, its task would pay for).
JOB_CLASS = "Job"


def configured_objects() -> list[str]:
    """The dotted paths ``[openlineage]`` names for task events: the transport's class (``type``, when it is a
    class path), the ``custom_run_facets`` functions and the ``extractors``."""
    from airflow.providers.openlineage import conf as openlineage_conf

    paths: list[str] = []
    for transport in nested_transports(openlineage_conf.transport()):
        paths.extend(str(transport.get(key, "")) for key in ("type", "transformer_class"))
    paths.extend(sorted(openlineage_conf.custom_run_facets()))
    paths.extend(sorted(openlineage_conf.custom_extractors()))
    return [path.strip() for path in paths if "." in path.strip()]


def nested_transports(transport: Any) -> list[Mapping[str, Any]]:
    """``transport`` (a transport's configuration) and every transport inside it: what a ``transform`` transport
    (and a subclass, such as the Egeria DAG-run transport) wraps in ``transport``, a ``composite`` one's
    ``transports`` (a mapping or a list)."""
    found: list[Mapping[str, Any]] = []
    pending = [transport]
    while pending:
        current = pending.pop()
        if not isinstance(current, Mapping):
            continue
        found.append(current)
        pending.append(current.get("transport"))
        inner = current.get("transports")
        pending.extend(inner.values() if isinstance(inner, Mapping) else inner if isinstance(inner, list) else ())
    return found


def _load(path: str) -> None:
    """Import the module of ``path`` and look the object up (a package's lazy names import their module then)."""
    try:
        importlib.import_module(path)
        return
    except ImportError:
        pass
    module, _, name = path.rpartition(".")
    getattr(importlib.import_module(module), name)


def prepare_outbox() -> bool:
    """When ``[openlineage] transport`` is the outbox, or wraps it (a ``transform`` or ``composite`` transport): open
    it here with its schema up to date (see :meth:`OutboxTransport.prepare`), so that task processes forked from
    this one skip the check. ``True`` when one was prepared; a failure is warned about once and left to the tasks,
    as without preparing."""
    from airflow.providers.openlineage import conf as openlineage_conf

    from airflow_lineage_provider.outbox.transport import OutboxTransport

    prepared = False
    for transport in nested_transports(openlineage_conf.transport()):
        path = str(transport.get("type", ""))
        if "." not in path:
            continue
        module, _, name = path.rpartition(".")
        try:
            named = getattr(importlib.import_module(module), name)
        except Exception:
            continue  # reported by prepare_task_processes' imports
        if not (isinstance(named, type) and issubclass(named, OutboxTransport)):
            continue
        try:
            named.prepare(dict(transport))
        except Exception as error:
            warn_once(f"Lineage: could not open the outbox ahead of tasks ({type(error).__name__}: {error})")
            continue
        prepared = True
    return prepared


def prepare_task_processes() -> list[str]:
    """Import what the first task event of a process would, and open the outbox when it is the transport; answer
    the paths that could not be imported (each warned about once). Never raises."""
    failed = []
    try:
        paths = [*TASK_EVENT_MODULES, *configured_objects()]
    except Exception as error:
        warn_once(f"Lineage: could not read [openlineage] to prepare task processes ({error})")
        paths = list(TASK_EVENT_MODULES)
    for path in dict.fromkeys(paths):
        try:
            _load(path)
        except Exception as error:
            failed.append(path)
            warn_once(f"Lineage: could not import {path} ahead of tasks ({type(error).__name__}: {error})")
    try:
        prepare_outbox()
    except Exception as error:
        warn_once(f"Lineage: could not read [openlineage] transport to open the outbox ({error})")
    return failed


def _should_prepare(component: Any) -> bool:
    # Airflow calls on_starting from Job.__init__, before the job runner gives the job its type: every job is
    # prepared, the scheduler among them, before it starts its executor.
    if type(component).__name__ != JOB_CLASS:
        return False
    from airflow.providers.openlineage.conf import is_disabled

    from airflow_lineage_provider import conf

    return conf.prepare_task_processes() and not is_disabled()


class TaskEmissionListener:
    """Prepares the scheduler's future task processes for lineage (see the module's documentation)."""

    @hookimpl
    def on_starting(self, component: Any) -> None:
        """An Airflow job starts: import what task events need. Never raises."""
        try:
            if _should_prepare(component):
                prepare_task_processes()
        except Exception as error:
            warn_once(f"Lineage: could not prepare task processes ({type(error).__name__}: {error})")


class LineageTaskEmissionPlugin(AirflowPlugin):
    """Registers :class:`TaskEmissionListener`."""

    name = "lineage_task_emission"
    listeners = [TaskEmissionListener()]
