"""``airflow_lineage_provider.facets.run_facets`` / ``.task_run_facets``: their former place keeps working.

An ``airflow.cfg`` written for an earlier release says ``custom_run_facets =
airflow_lineage_provider.facets.run_facets``; the stock provider resolves that string with
``try_import_from_string`` and, when it fails, sends every task's events without this package's facets.
"""

from __future__ import annotations

import logging

import pytest
from airflow.providers.openlineage.utils.utils import try_import_from_string

from airflow_lineage_provider import extractors, facets, reporting


@pytest.fixture(autouse=True)
def _fresh() -> None:
    reporting.forget_reported()


@pytest.mark.parametrize("name", ["run_facets", "task_run_facets"])
def test_the_former_name_resolves_to_the_function_and_says_where_it_moved(
    name: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="airflow_lineage_provider")
    found = try_import_from_string(f"airflow_lineage_provider.facets.{name}")
    assert found is getattr(extractors, name)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        f"airflow_lineage_provider.facets.{name} has moved to airflow_lineage_provider.extractors.{name}: "
        "update [openlineage] custom_run_facets (or your import); the old name will be removed in a later release"
    ]


def test_other_missing_names_are_still_missing() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'no_such_function'"):
        _ = facets.no_such_function  # type: ignore[attr-defined]
    assert try_import_from_string("airflow_lineage_provider.facets.no_such_function") is None
