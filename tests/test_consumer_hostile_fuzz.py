"""Hostile fuzzing: nesting depth, sizes and every code point (NUL and lone surrogates included)
in any place of an event get no 5xx and never break a listing afterwards — on SQLite and PostgreSQL. What such
requests cost to answer is ``bench/hostile_events.py``."""

from __future__ import annotations

import json
from typing import Any

from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.consumer_helpers import run_event

pytest_plugins = ("support.consumer_fixtures",)

HOSTILE = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))

#: Any code point, surrogates and NUL included (JSON escapes them; the consumer must refuse or keep them).
any_text = st.text(st.characters(exclude_categories=()), max_size=20)
sizes = st.sampled_from([0, 1, 63, 64, 65, 1_000, 5_000])
places = st.sampled_from(["run.facets", "job.facets", "output.facets", "input.facets", "producer", "job.name"])


def _nest(levels: int, leaf: Any) -> Any:
    value = leaf
    for level in range(levels):
        value = {"k": value} if level % 2 else [value]
    return value


def _put(event: dict[str, Any], place: str, value: Any) -> None:
    if place == "run.facets":
        event["run"]["facets"] = {"f": value}
    elif place == "job.facets":
        event["job"]["facets"] = {"f": value}
    elif place in ("output.facets", "input.facets"):
        side = "outputs" if place == "output.facets" else "inputs"
        event[side] = [{"namespace": "w", "name": "t", "facets": {"f": value}}]
    elif place == "producer":
        event["producer"] = value if isinstance(value, str) else json.dumps(value)[:200]
    else:
        event["job"]["name"] = value if isinstance(value, str) and value else "x"


def _answered(client: TestClient, method: str, path: str, **kwargs: Any) -> Any:
    answer = client.request(method, path, **kwargs)
    assert answer.status_code < 500, (path, answer.status_code, answer.text[:300])
    assert "Traceback" not in answer.text
    return answer


@HOSTILE
@given(depth=st.integers(min_value=0, max_value=1_500), text=any_text, place=places, width=sizes)
def test_hostile_events_get_no_5xx_and_every_listing_still_answers(
    client: TestClient, depth: int, text: str, place: str, width: int
) -> None:
    event = run_event("COMPLETE", "fuzzed")
    _put(event, place, _nest(depth, text * max(1, width // max(1, len(text) or 1))))
    body = json.dumps(event, ensure_ascii=True)
    single = _answered(client, "POST", "/api/v1/lineage", content=body, headers={"Content-Type": "application/json"})
    assert single.status_code in (201, 400), single.text[:300]
    batch = "[" + ",".join([body] * 3) + "]"
    answer = _answered(
        client, "POST", "/api/v1/lineage/batch", content=batch, headers={"Content-Type": "application/json"}
    )
    assert answer.status_code in (200, 207, 400)
    assert len(answer.content) < 10_000  # never echoes the event back
    for path in ("/api/v1/events", "/api/v1/jobs", "/api/v1/datasets", "/api/v1/namespaces"):
        _answered(client, "GET", path)
    _answered(client, "GET", "/api/v1/search", params={"q": text[:50].encode("utf-8", "replace").decode() or "x"})


@HOSTILE
@given(inputs=st.integers(min_value=0, max_value=600), outputs=st.integers(min_value=0, max_value=600))
def test_wide_events_are_stored_and_walked(client: TestClient, inputs: int, outputs: int) -> None:
    """What a wide event costs is bench/wide_event_ingest.py."""
    event = run_event("COMPLETE", "wide")
    event["inputs"] = [{"namespace": "w", "name": f"in_{i}"} for i in range(inputs)]
    event["outputs"] = [{"namespace": "w", "name": f"out_{i}"} for i in range(outputs)]
    assert _answered(client, "POST", "/api/v1/lineage", json=event).status_code == 201
    if outputs:
        graph = _answered(client, "GET", "/api/v1/lineage", params={"nodeId": "dataset:w:out_0", "depth": 1})
        assert graph.status_code == 200
