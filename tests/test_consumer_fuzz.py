"""Property-based fuzzing of the ingest and query endpoints: no input ever gets a 5xx.

Runs on SQLite and PostgreSQL (PostgreSQL refuses NUL characters and invalid Unicode that SQLite keeps,
so both must be covered). Anything accepted must be stored and readable back.
"""

from __future__ import annotations

import uuid

import httpx
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.consumer_helpers import dataset, run_event

FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))

scalars = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=30)
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)
names = st.text(min_size=0, max_size=40) | st.sampled_from(["a:b", "s3://bucket/x:y", "ns/with/slash", "x" * 5000])
times = st.sampled_from(
    [
        "2026-01-01T00:00:00Z",
        "2026-01-01T00:00:00",
        "0001-01-01T00:00:00+14:00",
        "9999-12-31T23:59:59-12:00",
        "2026-13-01T00:00:00Z",
    ]
) | st.text(max_size=30)
run_ids = st.uuids().map(str) | st.text(max_size=40) | st.integers()
event_types = st.sampled_from(["START", "RUNNING", "COMPLETE", "ABORT", "FAIL", "OTHER", "start", ""]) | json_values
datasets = st.fixed_dictionaries(
    {"namespace": names, "name": names},
    optional={
        "facets": st.fixed_dictionaries(
            {},
            optional={
                "schema": st.fixed_dictionaries(
                    {
                        "fields": st.lists(
                            st.fixed_dictionaries({"name": names}, optional={"type": json_values}), max_size=3
                        )
                        | json_values
                    }
                ),
                "columnLineage": st.fixed_dictionaries(
                    {
                        "fields": st.dictionaries(
                            names,
                            st.fixed_dictionaries(
                                {
                                    "inputFields": st.lists(
                                        st.fixed_dictionaries({"namespace": names, "name": names, "field": names}),
                                        max_size=2,
                                    )
                                    | json_values
                                }
                            ),
                            max_size=2,
                        )
                        | json_values
                    }
                ),
                "symlinks": st.fixed_dictionaries(
                    {
                        "identifiers": st.lists(
                            st.fixed_dictionaries({"namespace": names, "name": names, "type": json_values}), max_size=2
                        )
                    }
                ),
            },
        )
        | json_values
    },
)
events = st.fixed_dictionaries(
    {},
    optional={
        "eventType": event_types,
        "eventTime": times,
        "producer": st.text(max_size=20) | json_values,
        "schemaURL": st.just("https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"),
        "run": st.fixed_dictionaries(
            {"runId": run_ids},
            optional={
                "facets": st.fixed_dictionaries(
                    {},
                    optional={"parent": json_values, "nominalTime": st.fixed_dictionaries({"nominalStartTime": times})},
                )
                | json_values
            },
        )
        | json_values,
        "job": st.fixed_dictionaries({"namespace": names, "name": names}, optional={"facets": json_values})
        | json_values,
        "inputs": st.lists(datasets, max_size=3) | json_values,
        "outputs": st.lists(datasets, max_size=3) | json_values,
        "dataset": datasets | json_values,
    },
)

pytest_plugins = ("support.consumer_fixtures",)


@FUZZ
@given(body=json_values)
def test_any_json_body_gets_no_5xx(client: TestClient, body: object) -> None:
    for endpoint in ("/api/v1/lineage", "/api/v1/lineage/batch"):
        assert client.post(endpoint, json=body).status_code < 500


@FUZZ
@given(event=events)
def test_any_event_shape_gets_no_5xx_and_what_is_accepted_is_stored(client: TestClient, event: dict) -> None:
    response = client.post("/api/v1/lineage", json=event)
    assert response.status_code in (201, 400), response.text
    if response.status_code == 201 and isinstance(event.get("run"), dict):
        run_id = str(event["run"]["runId"]).lower()
        assert client.get(f"/api/v1/runs/{run_id}").status_code == 200


@FUZZ
@given(batch=st.lists(events, max_size=6))
def test_any_batch_gets_no_5xx_and_counts_add_up(client: TestClient, batch: list) -> None:
    response = client.post("/api/v1/lineage/batch", json=batch)
    assert response.status_code in (200, 207, 400), response.text
    body = response.json()
    assert body["received"] == len(batch)
    assert body["successful"] + body["failed"] == len(batch)
    assert [e["index"] for e in body["errors"]] == sorted(e["index"] for e in body["errors"])


@FUZZ
@given(
    node_id=st.text(max_size=60)
    | st.builds(lambda k, r: f"{k}:{r}", st.sampled_from(["dataset", "job", "datasetField"]), st.text(max_size=40)),
    depth=st.integers(min_value=-3, max_value=200) | st.text(max_size=5),
    max_nodes=st.integers(min_value=-3, max_value=200_000),
    direction=st.sampled_from(["upstream", "downstream", "both", "sideways"]),
)
def test_any_graph_query_gets_no_5xx(
    client: TestClient, node_id: str, depth: object, max_nodes: int, direction: str
) -> None:
    params = {"nodeId": node_id, "depth": depth, "maxNodes": max_nodes, "direction": direction}
    for path in ("/api/v1/lineage", "/api/v1/column-lineage"):
        assert client.get(path, params=params).status_code in (200, 400, 404)


def test_fuzzed_names_with_separators_round_trip(client: TestClient) -> None:
    name = "weird:name/with%chars"
    event = run_event("COMPLETE", name, run_id=str(uuid.uuid4()), outputs=[dataset("t:1/2", namespace="s3://b:k/p")])
    assert client.post("/api/v1/lineage", json=event).status_code == 201
    graph = client.get("/api/v1/lineage", params={"nodeId": "dataset:s3://b:k/p:t:1/2", "depth": 1}).json()["graph"]
    assert {node["id"] for node in graph} == {"dataset:s3://b:k/p:t:1/2", f"job:pipelines:{name}"}


def test_nan_and_infinity_literals_answer_400(client: TestClient) -> None:
    event = run_event("START", "load")
    text = (
        '{"eventTime": "2026-01-01T00:00:00Z", "run": {"runId": "%s"}, "job": {"namespace": "n", "name": "j"}, '
        '"x": NaN}'
    )
    response = client.post("/api/v1/lineage", content=(text % event["run"]["runId"]).encode())
    assert response.status_code == 400
    assert "NaN" in response.json()["detail"]


def test_nul_characters_are_kept_where_json_can_hold_them_and_refused_in_names(client: TestClient) -> None:
    """NUL in free facet content is kept (stored escaped); in a name, a namespace or a field name (schema,
    column lineage) the event is refused, naming where: those become rows the stores look up by value."""
    template = (
        '{"eventType": "COMPLETE", "eventTime": "2026-01-01T00:00:00Z", '
        '"run": {"runId": "%s", "facets": {"x\\u0000": 1}}, '
        '"job": {"namespace": "n", "name": "%s"}, "outputs": [{"namespace": "n", "name": "t", "facets": '
        '{"schema": {"fields": [{"name": "%s", "type": "INT", "description": "d\\u0000"}]}, '
        '"symlinks": {"identifiers": [{"namespace": "\\u0000", "name": "s", "type": "T"}]}, '
        '"columnLineage": {"fields": {"a": {"inputFields": [{"namespace": "n", "name": "u", "field": "%s"}]}}}}}]}'
    )

    def post(job: str, field: str = "a", source: str = "b") -> httpx.Response:
        return client.post("/api/v1/lineage", content=(template % (uuid.uuid4(), job, field, source)).encode())

    accepted = post("fine")
    assert accepted.status_code == 201, accepted.text
    for args, where in (
        (("bad\\u0000name",), "job.name"),
        (("j", "a\\u0000"), "outputs[0].facets.schema.fields[0].name"),
        (("j", "a", "\\u0000"), "outputs[0].facets.columnLineage.fields['a'].inputFields[0].field"),
    ):
        refused = post(*args)
        assert refused.status_code == 400
        assert refused.json()["detail"].startswith(where), refused.text
    fields = client.get("/api/v1/datasets", params={"namespace": "n", "name_contains": "t"}).json()["datasets"][0][
        "fields"
    ]
    assert fields[0]["name"] == "a" and fields[0]["description"] == "d\x00"


def test_lone_surrogates_are_refused_anywhere_and_pairs_are_kept(client: TestClient) -> None:
    event = run_event("START", "load")
    for where in (
        '"job": {"namespace": "n", "name": "\\ud800"}',
        '"job": {"namespace": "n", "name": "j", "facets": {"k": "\\udfff"}}',
    ):
        text = '{"eventTime": "2026-01-01T00:00:00Z", "run": {"runId": "' + event["run"]["runId"] + '"}, ' + where + "}"
        response = client.post("/api/v1/lineage", content=text.encode())
        assert response.status_code == 400
        assert "surrogate" in response.json()["detail"]
    emoji = (
        '{"eventTime": "2026-01-01T00:00:00Z", "run": {"runId": "%s"}, '
        '"job": {"namespace": "n", "name": "\\ud83d\\ude00"}}'
    )
    assert client.post("/api/v1/lineage", content=(emoji % uuid.uuid4()).encode()).status_code == 201
    assert client.get("/api/v1/search", params={"q": "\U0001f600"}).json()["totalCount"] == 1
