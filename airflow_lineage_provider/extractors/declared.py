"""``DeclaredLineageExtractor``: lineage from what an operator declares, plus this package's run facets.

For each operator class named in ``[lineage_provider] extractor_operators``:

* inputs and outputs from the operator's ``inlets``/``outlets`` (Assets, openlineage Datasets) and the
  assets it attached to outlet events at run time;
* inputs, outputs and the ``sql`` job facet from its ``sql`` attribute where the stock SQL parser can read
  it, named through the operator's database hook (see :mod:`airflow_lineage_provider.extractors.sql`), with
  table schemas from the database as the stock SQL operators do;
* the Egeria run facets on every event, and the materialization facet on the COMPLETE event of a
  successful run that has outputs.

An operator listed here that does have OpenLineage methods of its own keeps its own lineage; the
declared datasets are used only when its own methods report none, and the facets are added either way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from airflow.providers.openlineage.extractors.base import (
    OL_METHOD_NAME_COMPLETE,
    OL_METHOD_NAME_START,
    BaseExtractor,
    DefaultExtractor,
    OperatorLineage,
)

from airflow_lineage_provider import conf
from airflow_lineage_provider.extractors.declared_lineage import declared_lineage
from airflow_lineage_provider.extractors.task_facets import task_run_facets
from airflow_lineage_provider.task_context import TaskContext

if TYPE_CHECKING:
    from airflow.sdk.types import RuntimeTaskInstanceProtocol

#: When the listener asks: before the run, after a success, after a skip, after a failure.
Moment = Literal["start", "complete", "skipped", "failure"]


class DeclaredLineageExtractor(BaseExtractor):
    """Lineage from inlets/outlets and SQL, plus Egeria and materialization facets, for the operator
    classes named in ``[lineage_provider] extractor_operators``."""

    @classmethod
    def get_operator_classnames(cls) -> list[str]:
        """The operator class names (``task_type``) of ``[lineage_provider] extractor_operators``."""
        return conf.extractor_operators()

    def _execute_extraction(self) -> OperatorLineage | None:
        # The listener may call extract() outside the task's context: then only the operator is known.
        context = TaskContext.current() or TaskContext(task=self.operator)
        return self._lineage(context, "start")

    def extract_on_complete(self, task_instance: RuntimeTaskInstanceProtocol) -> OperatorLineage | None:
        context = TaskContext.of(task_instance) or TaskContext(task=self.operator, task_instance=task_instance)
        return self._lineage(context, "skipped" if context.skipped else "complete")

    def extract_on_failure(self, task_instance: RuntimeTaskInstanceProtocol) -> OperatorLineage | None:
        context = TaskContext.of(task_instance) or TaskContext(task=self.operator, task_instance=task_instance)
        return self._lineage(context, "failure")

    def _own_lineage(self, task_instance: RuntimeTaskInstanceProtocol | None, moment: Moment) -> OperatorLineage | None:
        operator = self.operator
        if not any(callable(getattr(operator, m, None)) for m in (OL_METHOD_NAME_START, OL_METHOD_NAME_COMPLETE)):
            return None
        default = DefaultExtractor(operator)
        if moment == "start":
            return default.extract()
        if moment == "failure":
            return default.extract_on_failure(task_instance)
        return default.extract_on_complete(task_instance)

    def _lineage(self, context: TaskContext, moment: Moment) -> OperatorLineage:
        lineage = self._own_lineage(context.task_instance, moment)
        if lineage is None or not (lineage.inputs or lineage.outputs):
            declared = declared_lineage(self.operator, context.task_instance, use_connection=True)
            lineage = declared if lineage is None else lineage.merge(declared)
        facets = task_run_facets(context, complete=moment == "complete", outputs=lineage.outputs)
        lineage.run_facets = {**(lineage.run_facets or {}), **facets}
        return lineage
