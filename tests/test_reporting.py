"""``warn_once``: a message at WARNING once, then at DEBUG; memory bounded however many distinct messages come."""

from __future__ import annotations

import logging

import pytest

from airflow_lineage_provider import reporting


@pytest.fixture(autouse=True)
def _fresh() -> None:
    reporting.forget_reported()


def _levels(caplog: pytest.LogCaptureFixture, message: str) -> list[int]:
    return [record.levelno for record in caplog.records if record.getMessage() == message]


def test_a_message_is_a_warning_once_then_debug(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="airflow_lineage_provider")
    for _ in range(3):
        reporting.warn_once("the connector 'x' is unknown")
    assert _levels(caplog, "the connector 'x' is unknown") == [logging.WARNING, logging.DEBUG, logging.DEBUG]


def test_distinct_messages_are_remembered_up_to_the_bound(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reporting, "REMEMBERED_MESSAGES", 100)
    caplog.set_level(logging.DEBUG, logger="airflow_lineage_provider")
    reporting.warn_once("first")
    for index in range(1_000):  # a long-lived process meeting new values for ever
        reporting.warn_once(f"dataset number {index} is not a dataset")
        reporting.warn_once("first")  # seen again and again: kept, stays at DEBUG
    assert len(reporting._seen) == 100
    assert _levels(caplog, "first").count(logging.WARNING) == 1
    reporting.warn_once("dataset number 0 is not a dataset")  # forgotten long ago: a warning again
    assert _levels(caplog, "dataset number 0 is not a dataset") == [logging.WARNING, logging.WARNING]
