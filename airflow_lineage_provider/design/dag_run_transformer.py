"""Egeria's facets on the stock listener's own DAG-run events, through openlineage-python's transform transport.

The stock OpenLineage provider builds a DAG run's ``START``/``COMPLETE``/``FAIL`` events with fixed run facets and
no hook to add one. openlineage-python's public ``transform`` transport hands events to an ``EventTransformer``
before the transport it wraps sends them; :class:`EgeriaDagRunTransformer` is that transformer, and
:class:`EgeriaDagRunTransport` the transform transport with it, for DAG-run events only. Configured around the
user's own transport::

    [openlineage]
    transport = {"type": "airflow_lineage_provider.design.dag_run_transformer.EgeriaDagRunTransport",
                 "transport": {"type": "http", "url": "http://marquez:5000"}}

it adds ``egeria_informationSupplyChain`` / ``egeria_governanceAction`` to every event of a DAG run (the events
carrying the stock ``airflowDagRun`` facet) as the DAG's params, overridden by the run's ``conf``, or the
``[lineage_provider]`` defaults ask — the settings :mod:`airflow_lineage_provider.plugins.dag_run_facets`
applies. The DAG's params come from its serialized form in Airflow's metadata database (the version
``airflowDagRun`` names, else the latest), read once per version and process: DAG-run events are sent by the
scheduler (and ``airflow dags test``), which reach that database. Every other event passes unchanged.

Never loses an event: any failure is logged once and the event goes on as it came.
"""

from __future__ import annotations

import json
import threading
import zlib
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import attr
from openlineage.client.transport.transform import EventTransformer, TransformConfig, TransformTransport
from openlineage.client.utils import get_only_specified_fields

from airflow_lineage_provider.reporting import warn_once

#: The ``type`` of openlineage-python's transform transport in a transport configuration.
TRANSFORM_TYPE = "transform"
#: The stock listener's run facet on every DAG-run event (none on task events).
DAG_RUN_FACET = "airflowDagRun"
#: DAG versions (by number or hash) whose params a process keeps (a scheduler meets new versions for ever).
CACHED_VERSIONS = 1024


@dataclass(frozen=True)
class DagParams:
    """What the Egeria settings of a DAG run read of its DAG: the id and the params' plain values."""

    dag_id: str
    params: dict[str, Any] = field(hash=False)


_versions: OrderedDict[tuple[str, int | str], DagParams] = OrderedDict()
_versions_lock = threading.Lock()


class EgeriaDagRunTransformer(EventTransformer):
    """Adds the Egeria facets a DAG run's settings ask for to the stock listener's events of that run.

    ``transformer_properties`` are not read. Returns every event (never ``None``): one it cannot add facets to
    goes on unchanged.
    """

    def transform(self, event: Any) -> Any:
        try:
            facets = dag_run_event_facets(event)
            if facets:
                event.run.facets = {**(event.run.facets or {}), **facets}
        except Exception as error:
            job = getattr(getattr(event, "job", None), "name", "?")
            warn_once(f"Lineage: the Egeria facets of DAG run {job!r} were not added to its event: {error}")
        return event


#: The dotted path of :class:`EgeriaDagRunTransformer`, as a transport configuration names it.
TRANSFORMER_PATH = f"{__name__}.EgeriaDagRunTransformer"


def is_dag_run_event(event: Any) -> bool:
    """``event`` is one of the stock listener's DAG-run events (it carries the ``airflowDagRun`` run facet)."""
    return DAG_RUN_FACET in (getattr(getattr(event, "run", None), "facets", None) or {})


@attr.define
class EgeriaDagRunConfig(TransformConfig):
    """:class:`EgeriaDagRunTransport`'s configuration: the wrapped ``transport``; the transformer is
    :class:`EgeriaDagRunTransformer` unless ``transformer_class`` names another."""

    transformer_class: str = attr.field(default=TRANSFORMER_PATH)

    @classmethod
    def from_dict(cls, params: dict[str, Any]) -> EgeriaDagRunConfig:
        if "transport" not in params:
            raise RuntimeError("'transport' (the transport to wrap) not passed to EgeriaDagRunTransport")
        return cls(**get_only_specified_fields(cls, params))


class EgeriaDagRunTransport(TransformTransport):
    """openlineage-python's transform transport with :class:`EgeriaDagRunTransformer`, for DAG-run events only.

    The transform transport copies every event and encodes it to JSON for its debug log before transforming
    it; this one hands every other event (every task's) to the wrapped transport as it came, so only the few
    events of DAG runs pay for the transformer.
    """

    config_class: type[TransformConfig] = EgeriaDagRunConfig

    def emit(self, event: Any) -> Any:
        if not is_dag_run_event(event):
            return self.transport.emit(event)
        return super().emit(event)


def dag_run_event_facets(event: Any) -> dict[str, Any]:
    """The Egeria run facets for ``event`` when it is one of a DAG run's events that lacks them, else ``{}``.

    Raises when the DAG's params cannot be read (the caller decides what a failure means).
    """
    from airflow_lineage_provider.facets.egeria import GOVERNANCE_ACTION_KEY, INFORMATION_SUPPLY_CHAIN_KEY

    run_facets = getattr(getattr(event, "run", None), "facets", None) or {}
    dag_run_facet = run_facets.get(DAG_RUN_FACET)
    if dag_run_facet is None or INFORMATION_SUPPLY_CHAIN_KEY in run_facets or GOVERNANCE_ACTION_KEY in run_facets:
        return {}
    from airflow_lineage_provider import conf

    if not conf.dag_run_egeria_facets():
        return {}
    dag_run = _as_mapping(getattr(dag_run_facet, "dagRun", None))
    dag_id = dag_run.get("dag_id") or _as_mapping(getattr(dag_run_facet, "dag", None)).get("dag_id")
    if not dag_id:
        return {}
    from airflow_lineage_provider.design.egeria_settings import dag_run_egeria_facets

    run_conf = dag_run.get("conf")
    dag = dag_params(str(dag_id), _version_number(dag_run.get("dag_version_number")))
    return dict(dag_run_egeria_facets(dag, run_conf if isinstance(run_conf, Mapping) else None))


def _as_mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _version_number(value: Any) -> int | None:
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def dag_params(dag_id: str, version_number: int | None) -> DagParams:
    """The params of ``dag_id`` in its serialized version ``version_number`` (the latest when ``None``), from
    Airflow's metadata database. Kept per version (its serialized form no longer changes once it has a run) and
    per latest hash: the DAG itself is read again only when it changed."""
    if version_number is None:
        return _latest_params(dag_id)
    return _kept((dag_id, version_number), lambda: _versioned_dag(dag_id, version_number))


def _kept(key: tuple[str, int | str], load: Callable[[], Any]) -> DagParams:
    from airflow_lineage_provider.design.egeria_settings import plain_params

    with _versions_lock:
        if key in _versions:
            _versions.move_to_end(key)
            return _versions[key]
    found = DagParams(key[0], plain_params(load().params))
    with _versions_lock:
        _versions[key] = found
        while len(_versions) > CACHED_VERSIONS:
            _versions.popitem(last=False)
    return found


def _latest_params(dag_id: str) -> DagParams:
    """The params of the latest serialized version: its hash read each time, the DAG only when the hash is new."""
    from airflow_lineage_provider.design.serialized_dags import (
        latest_versions,
        load_dags,
        metadata_connection,
        metadata_url,
    )

    with metadata_connection(metadata_url()) as conn:
        rows = latest_versions(conn, [dag_id])
        if not rows:
            raise LookupError(f"DAG {dag_id!r} has no serialized version in Airflow's metadata database")
        return _kept((dag_id, rows[0].dag_hash), lambda: next(load_dags(conn, rows)).dag)


def _versioned_dag(dag_id: str, version_number: int) -> Any:
    from sqlalchemy import MetaData, Table, and_, select

    from airflow_lineage_provider.design.serialized_dags import deserialize_dag, metadata_connection, metadata_url

    with metadata_connection(metadata_url()) as conn:
        metadata = MetaData()
        serialized = Table(
            "serialized_dag",
            metadata,
            autoload_with=conn,
            include_columns=["dag_version_id", "data", "data_compressed"],
            resolve_fks=False,
        )
        versions = Table(
            "dag_version",
            metadata,
            autoload_with=conn,
            include_columns=["id", "dag_id", "version_number"],
            resolve_fks=False,
        )
        row = conn.execute(
            select(serialized.c.data, serialized.c.data_compressed)
            .join(versions, serialized.c.dag_version_id == versions.c.id)
            .where(and_(versions.c.dag_id == dag_id, versions.c.version_number == version_number))
        ).first()
    if row is None:
        raise LookupError(f"DAG {dag_id!r} has no serialized version {version_number} in Airflow's metadata database")
    data, compressed = row
    document = json.loads(zlib.decompress(compressed)) if compressed else data
    return deserialize_dag(json.loads(document) if isinstance(document, str | bytes) else document)


def forget_dag_versions() -> None:
    """Drop the DAG versions' params this process keeps (for tests)."""
    with _versions_lock:
        _versions.clear()


def transformer_configured(config: Mapping[str, Any] | None) -> bool:
    """Whether an OpenLineage client configuration (``{"transport": ...}``) passes events through
    :class:`EgeriaDagRunTransformer`: an :class:`EgeriaDagRunTransport`, or a ``transform`` transport naming the
    transformer (or a subclass of either), at any depth of ``transform`` and ``composite`` transports."""
    pending = [(config or {}).get("transport")]
    while pending:
        transport = pending.pop()
        if not isinstance(transport, Mapping):
            continue
        kind = str(transport.get("type", "")).strip()
        if kind.lower() == "composite":
            inner = transport.get("transports")
            pending.extend(inner.values() if isinstance(inner, Mapping) else inner if isinstance(inner, list) else [])
            continue
        if kind.lower() == TRANSFORM_TYPE:
            if _is_subclass(transport.get("transformer_class"), EgeriaDagRunTransformer):
                return True
        elif "." in kind:
            if _is_subclass(kind, EgeriaDagRunTransport):
                return True
            if not _is_subclass(kind, TransformTransport):
                continue
        else:
            continue
        pending.append(transport.get("transport"))
    return False


def _is_subclass(path: Any, base: type) -> bool:
    """``path`` names ``base`` or a subclass of it (``False`` when it names nothing importable)."""
    from openlineage.client.utils import import_from_string

    try:
        named = import_from_string(str(path).strip()) if path else None
    except Exception:
        return False
    return isinstance(named, type) and issubclass(named, base)
