"""``@task.lineage``: a TaskFlow ``@task`` with declared lineage (the ``LineageMixin``).

Registered through the provider's ``task-decorators``, so once the package is installed::

    from airflow.sdk import task

    @task.lineage(inputs=["main/orders"], outputs=["main/order_totals"], connector="warehouse")
    def totals():
        ...

Everything else is ``@task``: XCom, ``multiple_outputs``, retries, ``.expand()``, ``.override()``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk.bases.decorator import DecoratedOperator, task_decorator_factory

from airflow_lineage_provider.operators.mixin import LineageMixin


class _LineageDecoratedOperator(LineageMixin, DecoratedOperator, PythonOperator):
    """The operator behind ``@task.lineage``: a ``@task`` operator with ``LineageMixin``.

    Built from the public classes ``@task``'s own operator is made of (``DecoratedOperator`` and
    ``PythonOperator``, with the same templated fields and arguments), not from that operator itself, which
    the standard provider keeps private. Its own class name keeps the stock listener from picking the
    PythonOperator extractor by name: the task is served by the DefaultExtractor, which reads the mixin's
    ``get_openlineage_facets_*``.
    """

    template_fields: Sequence[str] = ("templates_dict", "op_args", "op_kwargs")
    template_fields_renderers = {"templates_dict": "json", "op_args": "py", "op_kwargs": "py"}
    custom_operator_name: str = "@task.lineage"

    def __init__(self, *, python_callable: Callable[..., Any], op_args: Any, op_kwargs: Any, **kwargs: Any) -> None:
        super().__init__(
            kwargs_to_upstream={"python_callable": python_callable, "op_args": op_args, "op_kwargs": op_kwargs},
            python_callable=python_callable,
            op_args=op_args,
            op_kwargs=op_kwargs,
            **kwargs,
        )


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
