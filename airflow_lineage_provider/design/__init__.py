"""Design-time lineage: every DAG's declared lineage published as OpenLineage ``JobEvent``s, without running it.

Read from Airflow's serialized DAGs in the metadata database (never by importing DAG files), built with
openlineage-python's ``event_v2.JobEvent`` and appended to the outbox with a record of the serialized
version published, so that only changed DAGs are published again (docs/design-time-lineage.md).

Modules, one job each: :mod:`.declaration` (a ``LineageMixin`` task's declarations in the serialized DAG),
:mod:`.task_lineage` (a serialized task's datasets; templated names: :mod:`airflow_lineage_provider.name_templates`),
:mod:`.job_events` (the events of one DAG), :mod:`.egeria_settings` (Egeria settings of a serialized DAG),
:mod:`.serialized_dags` (reading the metadata database), :mod:`.publications` (what was published) and
:mod:`.publisher` (a publication pass). Egeria's facets on the stock DAG-run events are added by
:mod:`.dag_run_transformer` (a transport wrapping the configured one), or, without it, sent on an extra RUNNING
event by :mod:`airflow_lineage_provider.plugins.dag_run_facets`.

Importing this package stays cheap: the ``LineageMixin`` imports :mod:`.declaration` while DAGs are parsed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_lineage_provider.design.publisher import PublicationReport, publish_dags

__all__ = ["PublicationReport", "publish_dags"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from airflow_lineage_provider.design import publisher

        return getattr(publisher, name)
    raise AttributeError(f"module 'airflow_lineage_provider.design' has no attribute {name!r}")
