"""Readable nodes and details on the lineage page, in a real headless Chromium over a consumer on SQLite fed real
events: a long Airflow job name keeps its start and its distinguishing end, two tables of one name in two
SQLite databases show their databases, a job's Markdown documentation is rendered without running the HTML in
it, and a field whose type the producer did not know reads "unknown".

The job ``example_task_lineage.build_customer_totals.join`` (namespace ``airflow://prod``) reads ``main.orders``
from two SQLite databases (same name, two namespaces) and writes ``main.customer_totals``, whose schema has a
typed field, a field without a type and one typed ``NULLTYPE`` (what older producers sent)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.facet_v2 import documentation_job, schema_dataset
from openlineage.client.serde import Serde
from support.browser import set_color_scheme
from support.consumer_helpers import LiveServer, at
from support.olschema import assert_valid_event, shared_available
from support.ui_fixtures import serving
from support.ui_page import LineagePage

pytest_plugins = ("support.ui_fixtures",)

PRODUCER = "https://github.com/acme/airflow-lineage-provider/tests/ui"
JOBS = "airflow://prod"
LONG_JOB = "example_task_lineage.build_customer_totals.join"
PLAIN_JOB = "example_task_lineage.notify"
WAREHOUSE = "sqlite:///opt/airflow/data/warehouse.db"
STAGING = "sqlite:///opt/airflow/data/staging.db"
JOIN = f"job:{JOBS}:{LONG_JOB}"
NOTIFY = f"job:{JOBS}:{PLAIN_JOB}"
ORDERS_WAREHOUSE = f"dataset:{WAREHOUSE}:main.orders"
ORDERS_STAGING = f"dataset:{STAGING}:main.orders"
TOTALS = f"dataset:{WAREHOUSE}:main.customer_totals"

DOC_MD = """
    # Customer totals

    Builds **totals** per customer from `main.orders`, *daily*.

    - reads the orders of both databases
    - writes one row per customer
      - nested: keyed by customer_id

    <script>window.injected = "script";</script>
    <img src="x" onerror="window.injected = 'img'">

    See [the runbook](https://example.com/runbook) and [not a link](javascript:window.injected='link').
"""
PLAIN_DOC = "Sends **the** totals.\n<b>as written</b>"


def _event(state: str, job: str, run: str, seconds: float, inputs: Any, outputs: Any, facets: Any) -> dict[str, Any]:
    event = RunEvent(
        eventType=RunState[state],
        eventTime=at(seconds),
        run=Run(runId=str(uuid.uuid5(uuid.NAMESPACE_URL, run))),
        job=Job(namespace=JOBS, name=job, facets=facets),
        producer=PRODUCER,
        inputs=inputs,
        outputs=outputs,
    )
    data = json.loads(Serde.to_json(event))
    if shared_available():
        assert_valid_event(data)
    return data


def readable_events() -> list[dict[str, Any]]:
    """The events of the module docstring, built with openlineage-python and checked against ../shared/spec."""
    totals_schema = schema_dataset.SchemaDatasetFacet(
        fields=[
            schema_dataset.SchemaDatasetFacetFields(name="customer_id", type="INTEGER"),
            schema_dataset.SchemaDatasetFacetFields(name="total"),
            schema_dataset.SchemaDatasetFacetFields(name="legacy", type="NULLTYPE"),
        ]
    )
    inputs = [InputDataset(namespace=ns, name="main.orders") for ns in (WAREHOUSE, STAGING)]
    outputs = [OutputDataset(namespace=WAREHOUSE, name="main.customer_totals", facets={"schema": totals_schema})]
    docs = {"documentation": documentation_job.DocumentationJobFacet(description=DOC_MD, contentType="text/markdown")}
    plain = {"documentation": documentation_job.DocumentationJobFacet(description=PLAIN_DOC, contentType="text/plain")}
    totals = [InputDataset(namespace=WAREHOUSE, name="main.customer_totals")]
    return [
        _event("START", LONG_JOB, "join-1", 0, inputs, outputs, docs),
        _event("COMPLETE", LONG_JOB, "join-1", 30, inputs, outputs, docs),
        _event("COMPLETE", PLAIN_JOB, "notify-1", 60, totals, [], plain),
    ]


@pytest.fixture(scope="module")
def readable_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with serving(tmp_path_factory, "ui-readable-store", readable_events()) as server:
        yield server


@pytest.fixture
def readable_page(browser: Any, readable_server: LiveServer) -> LineagePage:
    set_color_scheme(browser, "light")
    browser.get(f"{readable_server.url}/ui/assets/favicon.svg")  # same origin, to clear the saved theme
    browser.execute_script("window.localStorage.clear(); delete window.injected")
    return LineagePage(browser, readable_server.url)


def _texts(page: LineagePage) -> dict[str, dict[str, Any]]:
    """Per drawn node: its label, its second line, its hover title and whether it is marked colliding."""
    drawn = page.js(
        """return [...document.querySelectorAll('#graph .node')].map(n => ({id: n.dataset.id,
             label: n.querySelector('.label').textContent, sub: n.querySelector('.sub').textContent,
             title: n.querySelector('title').textContent, collides: n.dataset.collides === 'true',
             condensed: n.querySelector('.label').classList.contains('condensed')}))"""
    )
    return {n["id"]: n for n in drawn}


def test_a_long_name_keeps_its_start_and_its_distinguishing_end_and_shows_in_full_on_hover(
    readable_page: LineagePage,
) -> None:
    page = readable_page.open(nodeId=JOIN)
    node = _texts(page)[JOIN]
    assert node["label"] != LONG_JOB and node["label"].count("…") == 1
    head, tail = node["label"].split("…")
    assert LONG_JOB.startswith(head) and LONG_JOB.endswith(tail)
    assert len(head) >= 6, node  # the DAG's start is kept ...
    assert tail.endswith("_totals.join") and len(tail) > len(head), node  # ... and more of the end
    assert node["condensed"], node  # drawn smaller before it was cut
    assert node["title"] == f"job {JOBS} : {LONG_JOB}"  # the full name on hover
    page.click_node(JOIN)
    assert page.details_title() == LONG_JOB


def test_two_names_in_different_namespaces_show_their_namespaces(readable_page: LineagePage) -> None:
    page = readable_page.open(nodeId=JOIN)
    nodes = _texts(page)
    warehouse, staging = nodes[ORDERS_WAREHOUSE], nodes[ORDERS_STAGING]
    assert warehouse["label"] == staging["label"] == "main.orders"
    assert warehouse["collides"] and staging["collides"]
    # The namespace alone, its distinguishing end kept: the two read apart.
    assert warehouse["sub"].endswith("warehouse.db") and staging["sub"].endswith("staging.db")
    assert not warehouse["sub"].startswith("dataset ·")
    assert not nodes[TOTALS]["collides"] and nodes[TOTALS]["sub"].startswith("dataset · ")


def test_markdown_documentation_is_rendered_and_its_html_shown_as_text(readable_page: LineagePage) -> None:
    page = readable_page.open(nodeId=JOIN)
    page.click_node(JOIN)
    page.wait_text("#details-documentation", "Customer totals")
    doc = page.js(
        """const d = document.getElementById('details-documentation');
           return {heading: d.querySelector('h3')?.textContent,
                   items: [...d.querySelectorAll(':scope > ul > li')].map(li => li.firstChild.textContent),
                   nested: [...d.querySelectorAll('ul ul > li')].map(li => li.textContent),
                   strong: d.querySelector('strong')?.textContent, em: d.querySelector('em')?.textContent,
                   code: d.querySelector('code')?.textContent,
                   links: [...d.querySelectorAll('a')].map(a => [a.textContent, a.getAttribute('href')]),
                   elements: [...d.querySelectorAll('*')].map(e => e.tagName.toLowerCase()),
                   text: d.textContent}"""
    )
    assert doc["heading"] == "Customer totals"
    assert doc["items"] == ["reads the orders of both databases", "writes one row per customer"]
    assert doc["nested"] == ["nested: keyed by customer_id"]  # snake_case names are not emphasis
    assert (doc["strong"], doc["em"], doc["code"]) == ("totals", "daily", "main.orders")
    assert doc["links"] == [["the runbook", "https://example.com/runbook"]]  # javascript: is no link
    assert '<script>window.injected = "script";</script>' in doc["text"]
    assert '<img src="x" onerror="window.injected = \'img\'">' in doc["text"]
    assert not {"script", "img", "iframe"} & set(doc["elements"])
    assert page.js("return window.injected === undefined")


def test_documentation_that_is_not_markdown_is_shown_as_written(readable_page: LineagePage) -> None:
    page = readable_page.open(nodeId=NOTIFY)
    page.click_node(NOTIFY)
    page.wait_text("#details-documentation", "Sends")
    assert page.content("#details-documentation") == PLAIN_DOC
    assert page.js("return document.querySelectorAll('#details-documentation *').length") == 0


def test_a_field_without_a_known_type_reads_unknown(readable_page: LineagePage) -> None:
    page = readable_page.open(nodeId=TOTALS)
    page.click_node(TOTALS)
    cells = page.js(
        """return [...document.querySelectorAll('#details-schema tbody tr')].map(r =>
             [r.cells[0].innerText, r.cells[1].innerText, r.cells[1].classList.contains('muted')])"""
    )
    assert cells == [["customer_id", "INTEGER", False], ["total", "unknown", True], ["legacy", "unknown", True]]


HOSTILE_MARKDOWN = [
    "[x](javascript:window.injected='a') [y](JAVASCRIPT:window.injected='b') [z]( data:text/html,<b>)",
    '<a href="javascript:window.injected=1">a</a> <iframe src="https://example.com"></iframe> &lt;b&gt;',
    "<https://example.com/ok> <javascript:window.injected=2> [rel](/relative/path) [ftp](ftp://example.com)",
    "*" * 5000,
    "_" * 5000 + "a",
    "`" * 5000,
    "> " * 200 + "deep quote",
    "".join(f"{'  ' * i}- level {i}\n" for i in range(100)),
    "[" * 3000 + "](https://example.com)" + ")" * 3000,
    "```\n<script>window.injected=3</script>\n",
    "- item\n" + "\n" * 20000 + "  still the item\n" + "x\n" * 50000,
]
#: What the renderer may build: nothing else (no script, no image, no frame, no attribute but those below).
ALLOWED_ELEMENTS = {
    "h3",
    "h4",
    "h5",
    "h6",
    "p",
    "ul",
    "ol",
    "li",
    "strong",
    "em",
    "code",
    "pre",
    "a",
    "blockquote",
    "hr",
    "br",
}
ALLOWED_ATTRIBUTES = {"href", "rel", "target", "start", "data-language"}


def test_the_markdown_renderer_builds_only_safe_elements_from_hostile_text(
    readable_page: LineagePage, readable_server: LiveServer
) -> None:
    page = readable_page.open(nodeId=NOTIFY)
    page.driver.set_script_timeout(30)
    rendered = page.driver.execute_async_script(
        """const [url, inputs, done] = arguments;
           import(url).then(({ renderMarkdown }) => done(inputs.map(text => {
             const box = document.createElement('div');
             box.append(...renderMarkdown(text));
             return {text: box.textContent,
                     elements: [...box.querySelectorAll('*')].map(e => e.tagName.toLowerCase()),
                     attributes: [...box.querySelectorAll('*')].flatMap(e => e.getAttributeNames()),
                     hrefs: [...box.querySelectorAll('a')].map(a => a.getAttribute('href'))};
           }))).catch(error => done(String(error)));""",
        f"{readable_server.url}/ui/assets/markdown.js",
        HOSTILE_MARKDOWN,
    )
    assert isinstance(rendered, list), rendered
    for source, out in zip(HOSTILE_MARKDOWN, rendered, strict=True):
        assert set(out["elements"]) <= ALLOWED_ELEMENTS, (source[:60], out["elements"])
        assert set(out["attributes"]) <= ALLOWED_ATTRIBUTES, (source[:60], out["attributes"])
        assert all(href.startswith(("https://", "http://")) for href in out["hrefs"]), out["hrefs"]
    assert rendered[0]["hrefs"] == [] and rendered[0]["text"].startswith("x y")
    assert '<a href="javascript:window.injected=1">a</a>' in rendered[1]["text"]
    assert rendered[2]["hrefs"] == ["https://example.com/ok"]
    assert "deep quote" in rendered[6]["text"] and "level 99" in rendered[7]["text"]
    assert rendered[9]["elements"] == ["pre", "code"] and "<script>" in rendered[9]["text"]
    assert rendered[10]["elements"][:3] == ["ul", "li", "p"] and "still the item" in rendered[10]["text"]
    assert page.js("return window.injected === undefined")
