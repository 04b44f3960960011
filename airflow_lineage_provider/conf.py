"""Getters for the ``[lineage_provider]`` configuration section, one per option.

Each reads Airflow's configuration (``airflow.cfg`` or ``AIRFLOW__LINEAGE_PROVIDER__<OPTION>``); a changed
``AIRFLOW__LINEAGE_PROVIDER__*`` variable takes effect at once. Defaults are the ones declared in
:mod:`airflow_lineage_provider.get_provider_info`.
"""

from __future__ import annotations

import os
from functools import lru_cache

from airflow_lineage_provider.get_provider_info import CONFIG
from airflow_lineage_provider.version import __version__

SECTION = "lineage_provider"
DEFAULT_PRODUCER = f"https://pypi.org/project/airflow-lineage-provider/{__version__}/"


def _get(option: str) -> str:
    # Reading Airflow's configuration costs tens of microseconds and options are read for every facet:
    # cache per value of the option's environment variable, so ``AIRFLOW__LINEAGE_PROVIDER__*`` changes
    # still take effect at once (airflow.cfg edits need a new process, as for Airflow itself).
    return _read(option, os.environ.get(f"AIRFLOW__{SECTION.upper()}__{option.upper()}"))


@lru_cache(maxsize=256)
def _read(option: str, env_value: str | None) -> str:
    from airflow.configuration import conf

    default = CONFIG[SECTION]["options"][option]["default"]
    return str(conf.get(SECTION, option, fallback=default))


def namespace() -> str:
    """``[lineage_provider] namespace``: namespace of datasets no connector names (default ``default``)."""
    return _get("namespace") or "default"


def producer() -> str:
    """``[lineage_provider] producer``: the producer URI of events and facets this package builds."""
    return _get("producer") or DEFAULT_PRODUCER


def strict() -> bool:
    """``[lineage_provider] strict``: raise on API misuse instead of logging and skipping."""
    return _get("strict").strip().lower() in ("true", "1", "t", "yes", "on")
