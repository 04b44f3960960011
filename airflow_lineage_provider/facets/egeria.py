"""Egeria's run facets: the information supply chain a run belongs to and the governance action it is.

Egeria's Open Lineage cataloguer tags every lineage relationship it builds from a run with the supply
chain named in ``egeria_informationSupplyChain`` (falling back to the ``iscQualifiedName`` of
``egeria_governanceAction``). The classes mirror Egeria's published schemas
(``https://egeria-project.org/openlineage/facets/1-0-0/``) the way openlineage-python's generated facets
mirror the OpenLineage spec: attrs classes whose ``_schemaURL`` points at the schema they follow.
"""

from __future__ import annotations

from typing import ClassVar

import attr
from openlineage.client.facet_v2 import RunFacet

from airflow_lineage_provider import conf

EGERIA_SCHEMA_BASE = "https://egeria-project.org/openlineage/facets/1-0-0"

#: Facet key of :class:`EgeriaInformationSupplyChainRunFacet` in ``run.facets``.
INFORMATION_SUPPLY_CHAIN_KEY = "egeria_informationSupplyChain"
#: Facet key of :class:`EgeriaGovernanceActionRunFacet` in ``run.facets``.
GOVERNANCE_ACTION_KEY = "egeria_governanceAction"


def _schema_url(name: str) -> str:
    return f"{EGERIA_SCHEMA_BASE}/{name}.json#/$defs/{name}"


@attr.define
class EgeriaInformationSupplyChainRunFacet(RunFacet):
    """Names the Egeria information supply chain that a run is part of."""

    iscQualifiedName: str = attr.field()
    """Qualified name of the information supply chain that the run is part of."""

    _additional_skip_redact: ClassVar[list[str]] = ["iscQualifiedName"]

    @staticmethod
    def _get_schema() -> str:
        return _schema_url("EgeriaInformationSupplyChainRunFacet")


@attr.define
class EgeriaGovernanceActionRunFacet(RunFacet):
    """Describes the Egeria governance action (engine action) that a run represents. Every field is optional."""

    iscQualifiedName: str | None = attr.field(default=None)
    """Qualified name of the information supply chain that the governance action is part of."""
    engineActionGUID: str | None = attr.field(default=None)
    """Unique identifier of the engine action that describes this run."""
    governanceEngineName: str | None = attr.field(default=None)
    """Name of the governance engine that ran the governance action."""
    requestType: str | None = attr.field(default=None)
    """Request type that selected the governance service."""
    governanceActionTypeName: str | None = attr.field(default=None)
    """Name of the governance action type that the engine action was created from."""
    processName: str | None = attr.field(default=None)
    """Name of the governance action process that the engine action is part of."""
    processStepName: str | None = attr.field(default=None)
    """Name of the governance action process step that the engine action implements."""

    _additional_skip_redact: ClassVar[list[str]] = [
        "iscQualifiedName",
        "engineActionGUID",
        "governanceEngineName",
        "requestType",
        "governanceActionTypeName",
        "processName",
        "processStepName",
    ]

    @staticmethod
    def _get_schema() -> str:
        return _schema_url("EgeriaGovernanceActionRunFacet")


#: The fields ``egeria_governance_action`` settings may hold (all strings, all optional).
GOVERNANCE_ACTION_FIELDS: tuple[str, ...] = tuple(
    a.name for a in attr.fields(EgeriaGovernanceActionRunFacet) if not a.name.startswith("_")
)


def information_supply_chain_facet(qualified_name: str) -> EgeriaInformationSupplyChainRunFacet:
    """The ``egeria_informationSupplyChain`` facet for a supply chain's qualified name."""
    return EgeriaInformationSupplyChainRunFacet(iscQualifiedName=qualified_name, producer=conf.producer())


def governance_action_facet(fields: dict[str, str]) -> EgeriaGovernanceActionRunFacet:
    """The ``egeria_governanceAction`` facet from a dict of :data:`GOVERNANCE_ACTION_FIELDS` (validated beforehand)."""
    return EgeriaGovernanceActionRunFacet(**fields, producer=conf.producer())
