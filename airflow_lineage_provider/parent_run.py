"""Parent links: the OpenLineage run of the Airflow task (and DAG run) the user's code runs in.

The ids come from the stock provider's macros (``lineage_run_id`` etc.), the very functions its listener
uses, so a consumer nests the custom job under the task's run and the DAG's run.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from openlineage.client.facet_v2 import parent_run

if TYPE_CHECKING:
    from airflow.sdk.types import RuntimeTaskInstanceProtocol


@dataclass(frozen=True)
class RunLink:
    """A run a child run points at: its job namespace and name, its run id, and its own root."""

    namespace: str
    name: str
    run_id: str
    root: RunLink | None = None

    def parent_facet(self, producer: str) -> parent_run.ParentRunFacet:
        """The ``parent`` facet of a child of this run; one object per run and producer, shared by the child's
        events (see :func:`~.emit.job_type_facet` for why sharing is safe)."""
        return _parent_facet(self, producer)


@lru_cache(maxsize=256)
def _parent_facet(link: RunLink, producer: str) -> parent_run.ParentRunFacet:
    root = link.root or link
    return parent_run.ParentRunFacet(
        run=parent_run.Run(runId=link.run_id),
        job=parent_run.Job(namespace=link.namespace, name=link.name),
        root=parent_run.Root(
            run=parent_run.RootRun(runId=root.run_id),
            job=parent_run.RootJob(namespace=root.namespace, name=root.name),
        ),
        producer=producer,
    )


def task_run_link(task_instance: RuntimeTaskInstanceProtocol) -> RunLink:
    """The task's OpenLineage run, with the DAG run as root, exactly as the stock listener names them."""
    from airflow.providers.openlineage.plugins import macros

    root = RunLink(
        namespace=macros.lineage_root_job_namespace(task_instance),
        name=macros.lineage_root_job_name(task_instance),
        run_id=str(macros.lineage_root_run_id(task_instance)),
    )
    return RunLink(
        namespace=macros.lineage_job_namespace(),
        name=macros.lineage_job_name(task_instance),
        run_id=str(macros.lineage_run_id(task_instance)),
        root=root,
    )
