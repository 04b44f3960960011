"""The dataset forms ``lineage_run`` and ``emit_lineage`` accept, normalised to :class:`DatasetRef`.

Accepted, freely mixed in one list:

* ``"database/table"`` strings (``"main/orders"``, ``"analytics/public.orders"``): named by the connector
  serving ``database`` when there is one, else ``[lineage_provider] namespace`` + the string as written;
* URIs such as ``"s3://bucket/key"`` or ``"file:///data/x.csv"``: namespace ``scheme://authority``, name the
  path, as the OpenLineage naming spec does for object stores and files;
* dicts with ``name`` and optional ``namespace`` and ``facets`` (what ``schema_facet`` and
  ``column_lineage_facet`` return);
* openlineage-python ``Dataset`` objects (``Dataset``, ``InputDataset``, ``OutputDataset``);
* Airflow ``Asset`` objects, translated with the stock OpenLineage provider's asset converters.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from openlineage.client.event_v2 import Dataset
from openlineage.client.serde import Serde

from airflow_lineage_provider import conf
from airflow_lineage_provider.reporting import report_misuse

ACCEPTED_FORMS = (
    "a 'database/table' string, a URI such as 's3://bucket/key', a dict with 'name' (and optional "
    "'namespace', 'facets'), an openlineage Dataset or an Airflow Asset"
)


@dataclass
class DatasetRef:
    """One dataset as the producer works on it before it becomes an ``InputDataset``/``OutputDataset``.

    ``raw`` is the ``"database/table"`` string the user wrote, kept so that a connector can rename the
    dataset per the OpenLineage naming spec; it is ``None`` for datasets given with an explicit namespace.
    ``facets`` values are facet objects or facet dicts.
    """

    namespace: str
    name: str
    facets: dict[str, Any] = field(default_factory=dict)
    raw: str | None = None

    def copy(self) -> DatasetRef:
        """A copy whose facets can be changed (named, enriched) without touching this one's."""
        return DatasetRef(self.namespace, self.name, copy.deepcopy(self.facets) if self.facets else {}, self.raw)


def _from_uri(uri: str) -> DatasetRef:
    parts = urlsplit(uri)
    if parts.scheme == "file":
        return DatasetRef("file" if not parts.netloc else f"file://{parts.netloc}", parts.path or "/")
    return DatasetRef(f"{parts.scheme}://{parts.netloc}", parts.path.lstrip("/") or "/")


def _from_asset(asset: Any) -> DatasetRef:
    try:
        from airflow.providers.openlineage.utils.utils import translate_airflow_asset

        translated = translate_airflow_asset(asset, None)
    except Exception:  # no converter for this scheme, or an older provider: fall back to the URI
        translated = None
    if translated is not None:
        return DatasetRef(translated.namespace, translated.name, dict(translated.facets or {}))
    return _from_uri(asset.uri) if "://" in asset.uri else DatasetRef(conf.namespace(), asset.uri)


_asset_class: Any = None


def _is_asset(value: Any) -> bool:
    global _asset_class
    if _asset_class is None:  # imported once (an import statement costs a microsecond per dataset)
        try:
            from airflow.sdk import Asset

            _asset_class = Asset
        except ImportError:  # pragma: no cover - Airflow 3 always has the Task SDK
            _asset_class = ()  # isinstance(value, ()) is False
    return isinstance(value, _asset_class)


def to_dataset_ref(value: Any) -> DatasetRef:
    """Normalise one dataset entry. Raises ``TypeError``/``ValueError`` naming the value when it is unusable."""
    if isinstance(value, DatasetRef):
        return value.copy()
    if isinstance(value, str):
        if not value.strip():
            raise ValueError(f"dataset {value!r} is an empty string; pass {ACCEPTED_FORMS}")
        if "://" in value:
            return _from_uri(value)
        return DatasetRef(conf.namespace(), value, raw=value)
    if isinstance(value, Dataset):
        facets = {k: v for k, v in (value.facets or {}).items()}
        return DatasetRef(value.namespace, value.name, facets)
    if isinstance(value, Mapping):
        name = value.get("name")
        if not isinstance(name, str) or not name:
            raise ValueError(f"dataset {dict(value)!r} has no 'name'; pass {ACCEPTED_FORMS}")
        facets = value.get("facets") or {}
        if not isinstance(facets, Mapping):
            raise TypeError(f"dataset {name!r} has facets {facets!r}; 'facets' must map facet names to facets")
        namespace = value.get("namespace")
        if namespace is not None and (not isinstance(namespace, str) or not namespace):
            raise ValueError(f"dataset {name!r} has namespace {namespace!r}; it must be a non-empty string")
        facets = copy.deepcopy(dict(facets))
        if namespace:
            return DatasetRef(namespace, name, facets)
        if "://" in name:
            ref = _from_uri(name)
            ref.facets = facets
            return ref
        return DatasetRef(conf.namespace(), name, facets, raw=name)
    if _is_asset(value):
        return _from_asset(value)
    raise TypeError(f"dataset {value!r} ({type(value).__name__}) is not a supported form; pass {ACCEPTED_FORMS}")


def to_dataset_refs(values: Any, role: str) -> list[DatasetRef]:
    """Normalise a list of dataset entries; a single entry is accepted as a list of one.

    Each unusable entry is reported through :func:`airflow_lineage_provider.reporting.report_misuse`
    (raised in strict mode, otherwise logged and skipped) so one bad entry never drops the others.
    """
    if values is None:
        return []
    if type(values) is not list and (isinstance(values, str | Mapping | Dataset | DatasetRef) or _is_asset(values)):
        values = [values]
    if not isinstance(values, Iterable):
        report_misuse(TypeError(f"{role} {values!r} is not a list of datasets; pass a list of {ACCEPTED_FORMS}"))
        return []
    refs = []
    namespace = None  # [lineage_provider] namespace, read once for all the "database/table" strings
    for value in values:
        if type(value) is str and "://" not in value and value.strip():  # the common form, as to_dataset_ref
            if namespace is None:
                namespace = conf.namespace()
            refs.append(DatasetRef(namespace, value, raw=value))
            continue
        try:
            refs.append(to_dataset_ref(value))
        except (TypeError, ValueError) as error:
            report_misuse(type(error)(f"{role}: {error}"))
    return refs


def facet_dict(facet: Any) -> dict[str, Any]:
    """A facet as a JSON dict, whether it is given as an openlineage facet object or already a dict."""
    return dict(facet) if isinstance(facet, Mapping) else Serde.to_dict(facet)
