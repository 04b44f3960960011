"""``LineageMixin``: declared, templated lineage for any operator, emitted by the stock listener.

``class CopyRows(LineageMixin, BaseOperator)`` takes ``lineage_inputs``, ``lineage_outputs`` and
``lineage_connector`` and implements ``get_openlineage_facets_on_start/_on_complete/_on_failure``, so the
stock OpenLineage listener emits the task's own START/COMPLETE/FAIL with these datasets: one event stream,
no second job. Where the listener is not active, the task emits those events itself
(:mod:`.self_emission`), with the run ids the listener would have used.

The lineage arguments are Jinja templates rendered per run with the task's context (``"main/part_{{
ds_nodash }}"``). They are rendered by the mixin, not through ``template_fields``, so a broken template is
logged and drops only the lineage it would have named: it never fails the task.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import IntEnum
from typing import TYPE_CHECKING, Any, cast

from airflow.sdk import BaseOperator
from openlineage.client.event_v2 import RunState as EventType

from airflow_lineage_provider.design.declaration import DECLARATION_FIELD, encode_declaration
from airflow_lineage_provider.name_templates import fill_run_dates
from airflow_lineage_provider.operators.facets_merge import merge_lineage
from airflow_lineage_provider.operators.self_emission import wrap_execute
from airflow_lineage_provider.producer import client
from airflow_lineage_provider.producer.connectors import Connectors, add_schemas, name_datasets
from airflow_lineage_provider.producer.dataset_refs import DatasetRef, to_dataset_refs
from airflow_lineage_provider.producer.emit import input_datasets, output_datasets
from airflow_lineage_provider.reporting import warn_once
from airflow_lineage_provider.task_context import TaskContext

if TYPE_CHECKING:
    import jinja2
    from airflow.providers.openlineage.extractors import OperatorLineage
    from airflow.sdk.definitions.context import Context
    from airflow.sdk.types import RuntimeTaskInstanceProtocol


class Moment(IntEnum):
    """When the stock listener asks an operator for its lineage, in the order its DefaultExtractor falls back
    through (failure → complete → start)."""

    START = 0
    COMPLETE = 1
    FAILURE = 2

    @property
    def method(self) -> str:
        """The operator method the listener calls at this moment."""
        return f"get_openlineage_facets_on_{('start', 'complete', 'failure')[self]}"


def _load_listener_modules() -> None:
    """Import, in the task process, the modules the stock listener's forks build this package's facets with.

    The listener builds START and COMPLETE each in a process it forks; a module first imported there is
    imported again in every fork. Imported once before the listener starts, the forks inherit it."""
    import airflow_lineage_provider.extractors.task_facets  # noqa: F401


class LineageMixin(BaseOperator):
    """Declared lineage for an operator: ``class CopyRows(LineageMixin, BaseOperator)``.

    :param lineage_inputs: datasets the task reads, in any form ``lineage_run`` accepts; strings are Jinja
        templates rendered per run.
    :param lineage_outputs: datasets the task writes, likewise.
    :param lineage_connector: names ``"database/table"`` datasets and looks up their schemas (any form
        ``lineage_run``'s ``connector=`` accepts). When omitted, the operator's own hook is used if it has
        one (``get_db_hook()`` of SQL operators, or a ``hook`` offering a SQLAlchemy engine).

    The operator's own ``get_openlineage_facets_*`` (e.g. a SQL operator's parsed lineage) are kept and
    merged with the declared datasets.
    """

    #: The mixin adds this package's run facets (Egeria, materialization) itself, so the
    #: ``custom_run_facets`` function leaves its tasks alone (the listener would let it override ours).
    lineage_provider_facets = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        wrap_execute(cls)

    def __init__(
        self,
        *,
        lineage_inputs: Any = None,
        lineage_outputs: Any = None,
        lineage_connector: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.lineage_inputs = lineage_inputs
        self.lineage_outputs = lineage_outputs
        self.lineage_connector = lineage_connector

    # -- in the serialized DAG, for design-time publication ----------------------------------------

    @classmethod
    def get_serialized_fields(cls) -> frozenset[str]:
        """Airflow's serialized fields plus :attr:`lineage_declaration`, so that the declared lineage can be
        published from the metadata database without importing the DAG file (docs/design-time-lineage.md)."""
        return frozenset(super().get_serialized_fields() | {DECLARATION_FIELD})

    @property
    def lineage_declaration(self) -> str | None:
        """The declared lineage as written (templates unrendered), as the serialized DAG keeps it."""
        return encode_declaration(self.lineage_inputs, self.lineage_outputs, self.lineage_connector)

    # -- resolved once, in the task process --------------------------------------------------------

    def render_template_fields(self, context: Context, jinja_env: jinja2.Environment | None = None) -> None:
        """Airflow's rendering of the task's templates, then :meth:`_prepare_lineage` (see there)."""
        super().render_template_fields(context, jinja_env)
        self._prepare_lineage(context)

    def render_template(
        self,
        content: Any,
        context: Context,
        jinja_env: jinja2.Environment | None = None,
        seen_oids: set[int] | None = None,
    ) -> Any:
        """Airflow's ``render_template``, given the date macros of a run without a logical date first.

        Every template of the task passes here (its ``template_fields``, a mapped task's expansion too, and the
        declared lineage), so a run without a logical date renders ``ds``, ``ts``... from its ``run_after``
        (:func:`~airflow_lineage_provider.name_templates.fill_run_dates`: once per context, one log line)."""
        fill_run_dates(context)  # type: ignore[arg-type]  # Airflow's Context is a mutable dict at run time
        return super().render_template(content, context, jinja_env, seen_oids)

    def _prepare_lineage(self, context: Any) -> None:
        """Render the declared datasets and resolve their connectors once, right after Airflow renders the
        task's templates and before the listener starts. The listener builds each event in a forked process:
        done here, the forks inherit the result instead of each importing hooks and looking up the Airflow
        connection again.

        Airflow renders a mapped task's expansion through its own non-public method, not the public
        ``render_template_fields`` this hooks into: a mapped task's START is prepared in the listener's fork
        (the same result, some milliseconds later), its COMPLETE in :meth:`post_execute`."""
        try:
            if not client.will_emit():
                return
            _load_listener_modules()
            inputs, outputs = self.declared_lineage(context=dict(context))
            connectors = self.lineage_connectors()
            for ref in inputs + outputs:
                if ref.raw is not None:
                    connectors.source_for(ref.raw)
        except Exception as error:
            warn_once(f"Lineage: declared lineage of task {self.task_id!r} could not be prepared: {error}")

    def post_execute(self, context: Any, result: Any = None) -> None:
        """Look the declared datasets' schemas up here, in the task process, once ``execute`` is done: the
        stock listener builds COMPLETE in a process it forks afterwards, which then finds them (and its own
        connection pool untouched) instead of opening a database connection of its own per event. A failed
        task skips ``post_execute``: its FAIL event looks them up in the fork, as before."""
        super().post_execute(context, result)
        try:
            if not client.will_emit():
                return
            _load_listener_modules()  # a mapped task's first chance (see _prepare_lineage)
            inputs, outputs = self.declared_lineage(context=dict(context))
            add_schemas([ref.copy() for ref in inputs + outputs], self.lineage_connectors(), self._lineage_schemas())
        except Exception as error:
            warn_once(f"Lineage: schemas of task {self.task_id!r} could not be looked up: {error}")

    def _lineage_schemas(self) -> dict[str, Any]:
        """Columns looked up for this task try, by ``"database/table"`` string (see :func:`add_schemas`)."""
        return self.__dict__.setdefault("_lineage_looked_up", {})

    # -- declared datasets --------------------------------------------------------------------------

    def _task_context(self, task_instance: RuntimeTaskInstanceProtocol | None = None) -> TaskContext | None:
        """The context of ``task_instance`` (the one the listener names), else of the task running now."""
        return TaskContext.current() if task_instance is None else TaskContext.of(task_instance)

    def _render_lineage(self, value: Any, field: str, context: Mapping[str, Any] | None) -> Any:
        """Render each declared dataset on its own, so one broken template drops only that dataset."""
        if value is None or context is None:
            return value
        items = list(value) if isinstance(value, list | tuple) else [value]
        rendered = []
        for item in items:
            try:
                rendered.append(self.render_template(item, cast("Context", context), self.get_template_env()))
            except Exception as error:
                warn_once(
                    f"Lineage: {field} entry {item!r} of task {self.task_id!r} could not be rendered "
                    f"({type(error).__name__}: {error}); that dataset is left out and the task runs on."
                )
        return rendered

    def declared_lineage(
        self, task_instance: RuntimeTaskInstanceProtocol | None = None, context: Mapping[str, Any] | None = None
    ) -> tuple[list[DatasetRef], list[DatasetRef]]:
        """The rendered, normalised declared inputs and outputs (cached for the task try). ``context``: the
        Airflow context to render them with, when the caller has it."""
        cached = self.__dict__.get("_lineage_declared")
        if cached is not None:
            return cached
        if context is None:
            task = self._task_context(task_instance)
            context = task.template_context if task is not None else None
        inputs = to_dataset_refs(self._render_lineage(self.lineage_inputs, "lineage_inputs", context), "lineage_inputs")
        outputs = to_dataset_refs(
            self._render_lineage(self.lineage_outputs, "lineage_outputs", context), "lineage_outputs"
        )
        declared = (inputs, outputs)
        if context is not None:  # rendered for this run: reuse on COMPLETE/FAIL
            self.__dict__["_lineage_declared"] = declared
        return declared

    def lineage_connectors(self) -> Connectors:
        """The connectors of this task try: ``lineage_connector``, else the operator's own hook."""
        connectors = self.__dict__.get("_lineage_connectors")
        if connectors is None:
            connectors = Connectors(self.lineage_connector if self.lineage_connector is not None else self._own_hook())
            self.__dict__["_lineage_connectors"] = connectors
        return connectors

    def _own_hook(self) -> Any:
        for name in ("get_db_hook", "hook"):
            try:
                candidate = getattr(self, name, None)
                hook = candidate() if name == "get_db_hook" and callable(candidate) else candidate
            except Exception as error:
                warn_once(f"Lineage: {name} of task {self.task_id!r} failed ({error}); no schema lookup.")
                continue
            if hook is not None and callable(getattr(hook, "get_sqlalchemy_engine", None)):
                return hook
        return None

    def _declared_operator_lineage(
        self, task_instance: RuntimeTaskInstanceProtocol | None, *, enrich: bool
    ) -> OperatorLineage:
        from airflow.providers.openlineage.extractors import OperatorLineage

        inputs, outputs = self.declared_lineage(task_instance)
        inputs = [ref.copy() for ref in inputs]
        outputs = [ref.copy() for ref in outputs]
        connectors = self.lineage_connectors()
        name_datasets(inputs + outputs, connectors)
        if enrich:
            add_schemas(inputs + outputs, connectors, self._lineage_schemas())
        return OperatorLineage(inputs=input_datasets(inputs), outputs=output_datasets(outputs))

    # -- the stock listener's protocol --------------------------------------------------------------

    def _own_operator_lineage(
        self, moment: Moment, task_instance: RuntimeTaskInstanceProtocol | None
    ) -> OperatorLineage | None:
        """The lineage of the operator's own ``get_openlineage_facets_*``, falling back like the stock
        DefaultExtractor does (failure → complete → start)."""
        for earlier in sorted((m for m in Moment if m <= moment), reverse=True):
            method = getattr(super(), earlier.method, None)
            if callable(method):
                try:
                    own: OperatorLineage | None = method() if earlier is Moment.START else method(task_instance)
                    return own
                except Exception as error:
                    warn_once(f"Lineage: {earlier.method} of task {self.task_id!r} failed: {error}")
                    return None
        return None

    def _lineage(self, moment: Moment, context: TaskContext | None, *, skipped: bool = False) -> OperatorLineage:
        task_instance = context.task_instance if context is not None else None
        try:
            declared = self._declared_operator_lineage(task_instance, enrich=moment is not Moment.START)
        except Exception as error:
            warn_once(f"Lineage: declared lineage of task {self.task_id!r} could not be built: {error}")
            declared = None
        lineage = merge_lineage(self._own_operator_lineage(moment, task_instance), declared)
        if context is not None:
            # A skipped run's COMPLETE carries no materialization facet: the run materialized nothing.
            complete = moment is Moment.COMPLETE and not (skipped or context.skipped)
            lineage.run_facets = {**self._package_run_facets(context, complete, lineage), **lineage.run_facets}
        else:
            warn_once(f"Lineage: task {self.task_id!r} is not running; its events carry no run facets of this package.")
        return lineage

    def _package_run_facets(self, context: TaskContext, complete: bool, lineage: OperatorLineage) -> dict[str, Any]:
        """Egeria facets on every event; the materialization facet on a success's COMPLETE with outputs."""
        # Imported here, not at DAG parse: the extractors package loads the stock provider's extractors (~0.6 s).
        # In a task the module is already loaded (_load_listener_modules), so the listener's forks find it.
        from airflow_lineage_provider.extractors.task_facets import task_run_facets

        return task_run_facets(context, complete=complete, outputs=lineage.outputs)

    def event_lineage(self, event_type: EventType, context: TaskContext, *, skipped: bool = False) -> OperatorLineage:
        """The lineage of the task's own ``event_type`` event (START, COMPLETE or FAIL), for a task emitting its
        events itself (:mod:`.self_emission`); COMPLETE of a run that skipped itself when ``skipped``."""
        moment = {EventType.START: Moment.START, EventType.FAIL: Moment.FAILURE}.get(event_type, Moment.COMPLETE)
        return self._lineage(moment, context, skipped=skipped)

    def get_openlineage_facets_on_start(self) -> OperatorLineage:
        """START: the declared datasets, named, without schemas; merged with the operator's own."""
        return self._lineage(Moment.START, self._task_context())

    def get_openlineage_facets_on_complete(self, task_instance: RuntimeTaskInstanceProtocol) -> OperatorLineage:
        """COMPLETE: the declared datasets with schemas from the connector; merged with the operator's own. The
        COMPLETE of a skipped task (the listener reports skips so) has no materialization facet."""
        return self._lineage(Moment.COMPLETE, self._task_context(task_instance))

    def get_openlineage_facets_on_failure(self, task_instance: RuntimeTaskInstanceProtocol) -> OperatorLineage:
        """FAIL: like COMPLETE — the declared datasets are kept, with schemas where they can be read."""
        return self._lineage(Moment.FAILURE, self._task_context(task_instance))
