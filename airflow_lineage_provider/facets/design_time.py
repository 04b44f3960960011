"""The facets of design-time lineage (``JobEvent``s published from serialized DAGs), each with its JSON schema
shipped in the package under ``schemas/1-0-0/`` and an immutable ``_schemaURL``, as the materialization facet.

* ``airflowLineageProvider_templatedName`` (dataset): the dataset's name (or namespace) is a Jinja template,
  published as written; a regular expression matches every rendering of it.
* ``airflowLineageProvider_informationSupplyChain`` (job): the Egeria information supply chain (and
  governance action) the DAG or task params declare. Egeria's own ``egeria_informationSupplyChain`` is a
  *run* facet, and a ``JobEvent`` has no run (docs/design-time-lineage.md).
* ``airflowLineageProvider_declaredLineage`` (job): which DAG, task and serialized DAG version the event
  was published from, whether the job is retired (its task or DAG is gone), and which declarations could not
  be read.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any, ClassVar

import attr
from openlineage.client.facet_v2 import DatasetFacet, JobFacet

from airflow_lineage_provider import conf
from airflow_lineage_provider.facets.materialization import SCHEMA_BASE, SCHEMA_VERSION

#: Facet key of :class:`TemplatedNameDatasetFacet` in a dataset's ``facets``.
TEMPLATED_NAME_KEY = "airflowLineageProvider_templatedName"
#: Facet key of :class:`InformationSupplyChainJobFacet` in ``job.facets``.
SUPPLY_CHAIN_JOB_KEY = "airflowLineageProvider_informationSupplyChain"
#: Facet key of :class:`DeclaredLineageJobFacet` in ``job.facets``.
DECLARED_LINEAGE_KEY = "airflowLineageProvider_declaredLineage"

TEMPLATED_NAME_SCHEMA = "TemplatedNameDatasetFacet"
SUPPLY_CHAIN_JOB_SCHEMA = "InformationSupplyChainJobFacet"
DECLARED_LINEAGE_SCHEMA = "DeclaredLineageJobFacet"


def schema_url(schema_name: str) -> str:
    """The ``_schemaURL`` of one of this module's facets."""
    return f"{SCHEMA_BASE}/{SCHEMA_VERSION}/{schema_name}.json#/$defs/{schema_name}"


def schema_document(schema_name: str) -> dict[str, Any]:
    """A facet's JSON schema as shipped in the package (its ``$id`` is :func:`schema_url` without the fragment)."""
    path = resources.files("airflow_lineage_provider") / "schemas" / SCHEMA_VERSION / f"{schema_name}.json"
    return json.loads(path.read_text(encoding="utf-8"))


@attr.define
class TemplatedNameDatasetFacet(DatasetFacet):
    """The dataset's name is a Jinja template (``orders_{{ ds_nodash }}``), published as written."""

    nameTemplate: str = attr.field()
    """The dataset name as declared, templates included (the dataset's ``name``)."""
    nameRegex: str = attr.field()
    """Anchored regular expression every rendering of the name matches (each template part: any text)."""
    variables: list[str] = attr.field(factory=list)
    """Template context variables the name reads (``ds_nodash``, ``ti``, ...), sorted."""
    namespaceTemplate: str | None = attr.field(default=None)
    """The namespace as declared, when it is templated too."""
    namespaceRegex: str | None = attr.field(default=None)
    """Anchored regular expression every rendering of the namespace matches, when it is templated."""
    templateLanguage: str = attr.field(default="jinja2")
    """The template language: Airflow's Jinja2."""

    _additional_skip_redact: ClassVar[list[str]] = [
        "nameTemplate",
        "nameRegex",
        "variables",
        "namespaceTemplate",
        "namespaceRegex",
        "templateLanguage",
    ]

    @staticmethod
    def _get_schema() -> str:
        return schema_url(TEMPLATED_NAME_SCHEMA)


@attr.define
class InformationSupplyChainJobFacet(JobFacet):
    """The Egeria information supply chain (and governance action) a job is declared to be part of, from its DAG
    or task params. At least one of the two fields is set."""

    iscQualifiedName: str | None = attr.field(default=None)
    """Qualified name of the Egeria information supply chain."""
    governanceAction: dict[str, str] | None = attr.field(default=None)
    """The declared ``egeria_governance_action`` fields (Egeria's ``egeria_governanceAction`` facet fields)."""

    _additional_skip_redact: ClassVar[list[str]] = ["iscQualifiedName", "governanceAction"]

    @staticmethod
    def _get_schema() -> str:
        return schema_url(SUPPLY_CHAIN_JOB_SCHEMA)


@attr.define
class DeclaredLineageJobFacet(JobFacet):
    """Where a design-time ``JobEvent`` comes from: the DAG, task and serialized DAG version it declares."""

    dagId: str = attr.field()
    """The Airflow DAG."""
    taskId: str | None = attr.field(default=None)
    """The task, for a task job; absent for the DAG's own job."""
    dagHash: str | None = attr.field(default=None)
    """Airflow's hash of the serialized DAG version the lineage was read from."""
    retired: bool | None = attr.field(default=None)
    """True when the task or DAG no longer exists: the event then declares no datasets (absent otherwise)."""
    incomplete: list[str] | None = attr.field(default=None)
    """Declarations that exist but could not be read at design time (templated SQL, a connector object)."""

    _additional_skip_redact: ClassVar[list[str]] = ["dagId", "taskId", "dagHash", "retired", "incomplete"]

    @staticmethod
    def _get_schema() -> str:
        return schema_url(DECLARED_LINEAGE_SCHEMA)


def supply_chain_job_facet(
    qualified_name: str | None, governance_action: dict[str, str] | None = None
) -> InformationSupplyChainJobFacet | None:
    """The ``airflowLineageProvider_informationSupplyChain`` facet for validated Egeria settings (``None`` when
    neither is set). Without a supply chain of its own, the governance action's ``iscQualifiedName`` names it,
    as Egeria's cataloguer falls back to it."""
    qualified_name = qualified_name or (governance_action or {}).get("iscQualifiedName")
    if not qualified_name and not governance_action:
        return None
    return InformationSupplyChainJobFacet(
        iscQualifiedName=qualified_name,
        governanceAction=dict(governance_action) if governance_action else None,
        producer=conf.producer(),
    )
