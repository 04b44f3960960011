"""``@task.lineage``: a TaskFlow ``@task`` with declared lineage (the ``LineageMixin``).

Registered through the provider's ``task-decorators``, so once the package is installed::

    from airflow.sdk import task

    @task.lineage(inputs=["main/orders"], outputs=["main/order_totals"], connector="warehouse")
    def totals():
        ...

Everything else is ``@task``: XCom, ``multiple_outputs``, retries, ``.expand()``, ``.override()``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from airflow.providers.standard.decorators.python import _PythonDecoratedOperator
from airflow.sdk.bases.decorator import task_decorator_factory

from airflow_lineage_provider.operators.mixin import LineageMixin


class _LineageDecoratedOperator(LineageMixin, _PythonDecoratedOperator):
    """The operator behind ``@task.lineage``: a ``@task`` operator with ``LineageMixin``.

    Its own class name keeps the stock listener from picking the PythonOperator extractor by name: the
    task is served by the DefaultExtractor, which reads the mixin's ``get_openlineage_facets_*``.
    """

    custom_operator_name: str = "@task.lineage"


def lineage_task(
    python_callable: Callable[..., Any] | None = None,
    multiple_outputs: bool | None = None,
    *,
    inputs: Any = None,
    outputs: Any = None,
    connector: Any = None,
    **kwargs: Any,
) -> Any:
    """Wrap a function into a task whose OpenLineage events carry the declared datasets.

    :param inputs: datasets the function reads (any form ``lineage_run`` accepts; strings are templates).
    :param outputs: datasets it writes.
    :param connector: names ``"database/table"`` datasets and supplies their schemas on COMPLETE/FAIL.
    :param kwargs: any ``@task`` argument (``retries``, ``task_id``, ``multiple_outputs``, ...).
    """
    return task_decorator_factory(
        python_callable=python_callable,
        multiple_outputs=multiple_outputs,
        decorated_operator_class=_LineageDecoratedOperator,
        lineage_inputs=inputs,
        lineage_outputs=outputs,
        lineage_connector=connector,
        **kwargs,
    )
