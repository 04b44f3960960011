"""Runs and events for the lineage page's run history, run view and events browser, posted as real OpenLineage
events to the ingest API.

``runs_events()``: job ``nightly_load`` (namespace ``airflow://prod``) runs once a day for 12 days from
``T0`` (2026-04-01 02:00 UTC): run ``i`` starts at ``T0 + i days`` and ends ``60 + 7 i`` seconds later in the
state ``STATES[i]`` (the newest, run 11, is still running). Every run reads ``shop.public.orders`` and writes
``staging.orders``; failed run 10 also reads ``shop.public.refunds``. Failed runs carry an ``errorMessage``
facet with a stack trace (text that looks like HTML, which the page must show as text) and Egeria's facets.
Job ``check_orders`` (namespace ``audit``) runs three times, at ``T0 + 4 k days + 1 h``, reading
``staging.orders`` and writing ``audit`` ``orders_checked``.

The fixtures serving them are in :mod:`support.ui_runs_fixtures`.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Any

from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.facet_v2 import error_message_run
from openlineage.client.serde import Serde

from airflow_lineage_provider.facets.egeria import EgeriaGovernanceActionRunFacet, EgeriaInformationSupplyChainRunFacet
from support.olschema import assert_valid_event, shared_available
from support.ui_graph import JOBS, PG, PRODUCER, WAREHOUSE, run_id

T0 = datetime(2026, 4, 1, 2, 0, tzinfo=timezone.utc)
DAY = timedelta(days=1)
NIGHTLY = "nightly_load"
CHECK = "check_orders"
AUDIT = "audit"
ORDERS = (PG, "shop.public.orders")
REFUNDS = (PG, "shop.public.refunds")
STAGING = (WAREHOUSE, "staging.orders")
CHECKED = (AUDIT, "orders_checked")
#: The final event of run ``i`` of nightly_load (START only: still running).
STATES = ["COMPLETE", "COMPLETE", "FAIL", "COMPLETE", "ABORT", "COMPLETE", "FAIL", "COMPLETE"]
STATES += ["COMPLETE", "COMPLETE", "FAIL", "START"]
#: Marquez's run state for each final event type.
MARQUEZ_STATE = {"COMPLETE": "COMPLETED", "FAIL": "FAILED", "ABORT": "ABORTED", "START": "RUNNING"}
SUPPLY_CHAIN = "InformationSupplyChain::nightly-orders"
GOVERNANCE = {"governanceEngineName": "AssetGovernance", "requestType": "reload", "processName": "NightlyOrders"}


def nightly_run(i: int) -> str:
    """The run id of run ``i`` of nightly_load."""
    return run_id(f"nightly-{i}")


def check_run(k: int) -> str:
    """The run id of run ``k`` of check_orders."""
    return run_id(f"check-{k}")


def duration(i: int) -> int:
    """Seconds run ``i`` of nightly_load took."""
    return 60 + 7 * i


def error_text(i: int) -> tuple[str, str]:
    """The error message and stack trace of failed run ``i`` (HTML-looking on purpose)."""
    message = f"<b>load {i}</b> failed: disk full & <script>alert(1)</script>"
    trace = (
        "Traceback (most recent call last):\n"
        f'  File "/opt/dags/nightly.py", line {40 + i}, in load\n'
        "    writer.write(batch)\n"
        "OSError: [Errno 28] No space left on device: '<tmp>'"
    )
    return message, trace


def _event(
    state: str,
    job: str,
    namespace: str,
    run: str,
    when: datetime,
    inputs: list[tuple[str, str]],
    outputs: list[tuple[str, str]],
    run_facets: dict[str, Any] | None = None,
) -> dict[str, Any]:
    event = RunEvent(
        eventType=RunState[state],
        eventTime=when.isoformat(),
        run=Run(runId=run, facets=run_facets or {}),
        job=Job(namespace=namespace, name=job),
        producer=PRODUCER,
        inputs=[InputDataset(namespace=ns, name=n) for ns, n in inputs],
        outputs=[OutputDataset(namespace=ns, name=n) for ns, n in outputs],
    )
    data = json.loads(Serde.to_json(event))
    if shared_available():
        assert_valid_event(data)
    return data


def _failure_facets(i: int) -> dict[str, Any]:
    message, trace = error_text(i)
    return {
        "errorMessage": error_message_run.ErrorMessageRunFacet(
            message=message, programmingLanguage="python", stackTrace=trace
        ),
        "egeria_informationSupplyChain": EgeriaInformationSupplyChainRunFacet(
            iscQualifiedName=SUPPLY_CHAIN, producer=PRODUCER
        ),
        "egeria_governanceAction": EgeriaGovernanceActionRunFacet(**GOVERNANCE, producer=PRODUCER),
    }


def runs_events() -> list[dict[str, Any]]:
    """The events of the module docstring, in time order."""
    timed: list[tuple[datetime, dict[str, Any]]] = []
    for i, final in enumerate(STATES):
        start = T0 + i * DAY
        inputs = [ORDERS, REFUNDS] if i == 10 else [ORDERS]
        run = nightly_run(i)
        timed.append((start, _event("START", NIGHTLY, JOBS, run, start, inputs, [STAGING])))
        if final != "START":
            facets = _failure_facets(i) if final == "FAIL" else None
            end = start + timedelta(seconds=duration(i))
            timed.append((end, _event(final, NIGHTLY, JOBS, run, end, inputs, [STAGING], facets)))
    for k in range(3):
        start = T0 + 4 * k * DAY + timedelta(hours=1)
        run = check_run(k)
        timed.append((start, _event("START", CHECK, AUDIT, run, start, [STAGING], [CHECKED])))
        end = start + timedelta(seconds=30)
        timed.append((end, _event("COMPLETE", CHECK, AUDIT, run, end, [STAGING], [CHECKED])))
    return [event for _, event in sorted(timed, key=lambda item: item[0])]


def utc_text(when: datetime) -> str:
    """A time as the page writes it: ``2026-04-01 02:00:00 UTC``."""
    return when.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def start_of(i: int) -> datetime:
    return T0 + i * DAY


def end_of(i: int) -> datetime | None:
    return None if STATES[i] == "START" else T0 + i * DAY + timedelta(seconds=duration(i))
