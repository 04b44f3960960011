"""The package's own run facets on one event: Egeria's on every event of a task, the materialization facet on a
successful run's COMPLETE.

:func:`package_run_facets` is the one place they are put together, for every kind of event this package
builds or contributes to: ``lineage_run`` blocks, ``LineageMixin``/``@task.lineage`` tasks (through the stock
listener or their own events), the ``DeclaredLineageExtractor`` and the ``custom_run_facets`` function.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from openlineage.client.facet_v2 import RunFacet

from airflow_lineage_provider.facets.egeria_params import egeria_facets
from airflow_lineage_provider.facets.materialization import MATERIALIZATION_KEY, materialization_facet
from airflow_lineage_provider.reporting import report_misuse, warn_once
from airflow_lineage_provider.task_context import TaskContext

_EGERIA = "egeria_facets"


def task_egeria_facets(context: TaskContext) -> dict[str, RunFacet]:
    """The Egeria facets of the task's events, resolved once per :class:`TaskContext`."""
    facets = context.memo.get(_EGERIA)
    if facets is None:
        facets = context.memo[_EGERIA] = egeria_facets(context.task, context.params)
    return dict(facets)


def package_run_facets(
    context: TaskContext | None,
    *,
    complete: bool,
    outputs: Iterable[Any] = (),
    rows_written: int | None = None,
) -> dict[str, RunFacet]:
    """This package's run facets for one event.

    ``context``: the Airflow task the event belongs to (``None`` outside Airflow). ``complete``: the event is
    the COMPLETE of a successful run — never START, FAIL, ABORT or the COMPLETE of a skipped task. ``outputs``:
    the event's output datasets (``(namespace, name)`` pairs, dicts, openlineage Datasets or anything with
    ``namespace`` and ``name``); ``rows_written``: the rows the run wrote, when known.

    Inside a task: the task's Egeria facets on every event, and with ``complete`` and outputs the
    materialization facet with the DAG run's data interval and logical date. Outside a task the facet is added
    only when ``rows_written`` is known. A malformed ``rows_written`` or output is misuse (logged; raised in
    strict mode); any other problem is logged and leaves the facet out.
    """
    facets = task_egeria_facets(context) if context is not None else {}
    if not complete or (context is None and rows_written is None):
        return facets
    outputs = [(o.namespace, o.name) if hasattr(o, "namespace") and hasattr(o, "name") else o for o in outputs]
    if not outputs:
        return facets
    try:
        facet = materialization_facet(
            outputs, rows_written=rows_written, **(context.run_dates() if context is not None else {})
        )
    except (TypeError, ValueError) as error:
        report_misuse(error)
        facet = None
    except Exception as error:
        task = context.task if context is not None else None
        warn_once(
            f"Lineage: could not build the materialization facet of task {getattr(task, 'task_id', '?')!r} "
            f"in DAG {getattr(task, 'dag_id', '?')!r}: {error}"
        )
        facet = None
    if facet is not None:
        facets[MATERIALIZATION_KEY] = facet
    return facets
