"""The durable outbox: ``OutboxTransport`` appends events to SQL; shippers and exporters deliver them.

Modules, one job each: :mod:`.transport` (the openlineage-python transport), :mod:`.writer` (appending,
spilling), :mod:`.spill`, :mod:`.database` (engines), :mod:`.tables` and :mod:`.migrations` (schema),
:mod:`.store` (queries), :mod:`.consumer_client` (HTTP to a consumer), :mod:`.shipper`, :mod:`.export`
(NDJSON files), :mod:`.retention`, :mod:`.dag_factory` (the export DAG).

``OutboxTransport`` and ``OutboxConfig`` are imported lazily, so ``import airflow_lineage_provider.outbox``
stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_lineage_provider.outbox.transport import OutboxConfig, OutboxTransport

__all__ = ["OutboxConfig", "OutboxTransport"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from airflow_lineage_provider.outbox import transport

        return getattr(transport, name)
    raise AttributeError(f"module 'airflow_lineage_provider.outbox' has no attribute {name!r}")
