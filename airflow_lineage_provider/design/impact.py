"""Impact before merge: what a DAG's declared outputs feed downstream, from a consumer's lineage graph.

The declared outputs are computed by the code design-time publication uses (:func:`.job_events.dag_job_events`
on a serialized DAG): from a DAG file not yet deployed (parsed with Airflow's ``DagBag``, that file only, and
serialized in memory) or from the metadata database's serialized DAGs (a DAG id). For each output the consumer
is asked ``GET /api/v1/lineage?nodeId=dataset:<ns>:<name>&depth=N&direction=downstream`` (Marquez's graph);
an output the consumer does not know (404) is *new*: nothing downstream yet.

Templated names (``orders_{{ ds_nodash }}``) are patterns: they are never rendered with a made-up date.
Instead, the consumer's datasets of the output's namespace whose names match the pattern's ``nameRegex``
(the ``airflowLineageProvider_templatedName`` facet) are walked, and what they feed is merged.

The API key goes in the ``X-API-Key`` header only; it is never part of a URL or of a message.

Example::

    outputs = declared_outputs_of_file(Path("dags/orders.py"))
    report = impact(outputs, GraphClient("http://lineage:6580", api_key="..."), depth=3)
    print(report.summary())
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from hashlib import md5
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from airflow_lineage_provider.facets.design_time import DECLARED_LINEAGE_KEY, TEMPLATED_NAME_KEY
from airflow_lineage_provider.name_templates import rendering_regex

#: Renderings of one templated output walked at most (the newest names the consumer lists first are not
#: known: the listing is by name), so that a daily partition with years of history stays one answer.
MAX_RENDERINGS = 50

#: Environment variable holding the consumer's API key when ``--key-file`` is not given.
API_KEY_ENV = "AIRFLOW_LINEAGE_API_KEY"


class ImpactError(RuntimeError):
    """A failure the user can act on (unknown DAG, unreachable consumer, refused key); the message says which."""


@dataclass(frozen=True)
class DeclaredOutput:
    """One dataset a task declares it writes."""

    dag_id: str
    task_id: str | None
    namespace: str
    name: str
    name_regex: str | None = None
    """The anchored regular expression every rendering of a templated name matches; ``None`` when not templated."""

    @property
    def node_id(self) -> str:
        return f"dataset:{self.namespace}:{self.name}"


@dataclass(frozen=True)
class DownstreamNode:
    """A job or dataset downstream of an output, at ``hops`` edges from it (job 1, its outputs 2, ...)."""

    type: str
    namespace: str
    name: str
    hops: int
    declared_only: bool = False


@dataclass
class OutputImpact:
    """What one declared output feeds: ``status`` is ``known``, ``new`` (the consumer does not know it) or
    ``pattern`` (a templated name: ``matched`` lists the renderings the consumer knows, which were walked)."""

    output: DeclaredOutput
    status: str
    jobs: list[DownstreamNode] = field(default_factory=list)
    datasets: list[DownstreamNode] = field(default_factory=list)
    matched: list[str] = field(default_factory=list)
    match_regex: str | None = None
    """For a pattern: the regular expression the consumer's dataset names were matched with."""


@dataclass
class ImpactReport:
    """The impact of every declared output, in task order."""

    consumer: str
    depth: int
    outputs: list[OutputImpact] = field(default_factory=list)
    dags: list[str] = field(default_factory=list)

    def summary(self) -> str:
        """One line: outputs, what they feed, which are new or patterns."""
        jobs = {(n.namespace, n.name) for o in self.outputs for n in o.jobs}
        datasets = {(n.namespace, n.name) for o in self.outputs for n in o.datasets}
        new = sum(o.status == "new" for o in self.outputs)
        patterns = sum(o.status == "pattern" for o in self.outputs)
        tasks = {(o.output.dag_id, o.output.task_id) for o in self.outputs}
        return (
            f"{len(self.outputs)} declared output(s) of {len(tasks)} task(s) in {', '.join(self.dags) or 'no DAG'} "
            f"feed {len(jobs)} job(s) and {len(datasets)} dataset(s) downstream (depth {self.depth}); "
            f"{new} new (nothing downstream yet), {patterns} templated pattern(s)"
        )

    def as_json(self) -> dict[str, Any]:
        """The report as JSON-ready data (``--json``)."""
        return {
            "consumer": self.consumer,
            "depth": self.depth,
            "dags": self.dags,
            "outputs": [
                {
                    "dagId": o.output.dag_id,
                    "taskId": o.output.task_id,
                    "namespace": o.output.namespace,
                    "name": o.output.name,
                    "nameRegex": o.output.name_regex,
                    "status": o.status,
                    "matchRegex": o.match_regex,
                    "matched": o.matched,
                    "jobs": [_node_json(n) for n in o.jobs],
                    "datasets": [_node_json(n) for n in o.datasets],
                }
                for o in self.outputs
            ],
            "summary": self.summary(),
        }


def _node_json(node: DownstreamNode) -> dict[str, Any]:
    data = asdict(node)
    return {"namespace": data["namespace"], "name": data["name"], "hops": node.hops, "declaredOnly": node.declared_only}


# -- declared outputs ------------------------------------------------------------------------------------------


def outputs_of_dags(dags: Iterable[tuple[Any, Any]], task_ids: Sequence[str] | None = None) -> list[DeclaredOutput]:
    """The declared outputs of serialized DAGs (``(SerializedDAG, DagVersionRow)`` pairs), as publication
    computes them, for every task or only ``task_ids``."""
    from airflow_lineage_provider.design.job_events import dag_job_events
    from airflow_lineage_provider.design.task_lineage import ConnectorCache

    cache = ConnectorCache()
    outputs: list[DeclaredOutput] = []
    for dag, row in dags:
        for event in dag_job_events(dag, row, cache):
            declared = (event.job.facets or {}).get(DECLARED_LINEAGE_KEY)
            task_id = getattr(declared, "taskId", None)
            if task_ids and task_id not in task_ids:
                continue
            for dataset in event.outputs or ():
                templated = (dataset.facets or {}).get(TEMPLATED_NAME_KEY)
                regex = getattr(templated, "nameRegex", None) if templated is not None else None
                outputs.append(DeclaredOutput(dag.dag_id, task_id, dataset.namespace, dataset.name, regex))
    return outputs


def dags_of_file(path: Path) -> list[tuple[Any, Any]]:
    """The DAGs of one DAG file, parsed with Airflow's ``DagBag`` (that file only, no metadata database) and
    serialized in memory, with the row publication would read for them."""
    from airflow_lineage_provider.airflow_compat import DagBag, DagSerialization
    from airflow_lineage_provider.design.serialized_dags import DagVersionRow, deserialize_dag

    if not path.is_file():
        raise ImpactError(f"no DAG file {str(path)!r} (not a file; give a DAG file or the id of a deployed DAG)")
    bag = _quiet_dagbag(DagBag, path)
    if bag.import_errors:
        where, error = next(iter(bag.import_errors.items()))
        last = str(error).strip().splitlines()[-1] if str(error).strip() else "import error"
        raise ImpactError(f"the DAG file {str(path)!r} does not load ({Path(where).name}): {last}")
    if not bag.dags:
        raise ImpactError(f"the file {str(path)!r} defines no DAG")
    loaded = []
    for dag_id in sorted(bag.dags):
        document = DagSerialization.to_dict(bag.dags[dag_id])
        dag_hash = md5(repr(document).encode(), usedforsecurity=False).hexdigest()
        dag = deserialize_dag(document)
        loaded.append((dag, DagVersionRow(dag_id, dag_hash, str(path.resolve()), path.name, None, None)))
    return loaded


def _quiet_dagbag(dagbag: Any, path: Path) -> Any:
    """``DagBag`` of one file, its parse messages (Airflow logs them on stdout) sent to stderr instead, so that
    stdout holds only the report."""
    import contextlib
    import logging
    import sys

    logger = logging.getLogger("airflow.dag_processing.dagbag.DagBag")
    level = logger.level
    logger.setLevel(max(level, logging.WARNING))
    try:
        with contextlib.redirect_stdout(sys.stderr):
            return dagbag(dag_folder=str(path.resolve()), safe_mode=False)
    finally:
        logger.setLevel(level)


def dags_of_id(dag_id: str, metadata_db_url: str | None = None) -> list[tuple[Any, Any]]:
    """The latest serialized version of ``dag_id`` in the metadata database, as publish-dags reads it."""
    from airflow_lineage_provider import conf
    from airflow_lineage_provider.design.serialized_dags import (
        latest_versions,
        load_dags,
        metadata_connection,
        metadata_url,
    )

    url = metadata_db_url or metadata_url(conf.publish_metadata_conn_id() or None)
    with metadata_connection(url) as conn:
        rows = latest_versions(conn, [dag_id])
        if not rows:
            raise ImpactError(
                f"no DAG {dag_id!r} in the metadata database (see `airflow dags list`; for a DAG file not yet "
                "deployed, give its path)"
            )
        return [(loaded.dag, loaded.row) for loaded in load_dags(conn, rows)]


# -- the consumer ----------------------------------------------------------------------------------------------


def api_key_from(key_file: Path | None = None, conn_id: str | None = None, env: dict[str, str] | None = None) -> str:
    """The consumer's API key: ``key_file``'s content, else ``$AIRFLOW_LINEAGE_API_KEY``, else the password of
    the Airflow connection ``conn_id`` (an ``openlineage`` connection, as the export DAG ships with); ``""``
    when none is given."""
    import os

    if key_file is not None:
        try:
            return key_file.read_text().strip()
        except OSError as error:
            raise ImpactError(f"cannot read the key file {str(key_file)!r}: {error.strerror or error}") from None
    key = (env if env is not None else os.environ).get(API_KEY_ENV, "").strip()
    if key:
        return key
    if conn_id:
        return consumer_of_connection(conn_id)[1]
    return ""


def consumer_of_connection(conn_id: str) -> tuple[str, str]:
    """``(url, api key)`` of an ``openlineage`` Airflow connection, read as the outbox shipper reads it."""
    from airflow.sdk import BaseHook

    from airflow_lineage_provider.hooks.openlineage import consumer_config_from_connection

    try:
        config = consumer_config_from_connection(BaseHook.get_connection(conn_id))
    except Exception as error:
        raise ImpactError(f"cannot read the Airflow connection {conn_id!r}: {error}") from None
    return config.url, config.api_key or ""


class GraphClient:
    """Reads the lineage graph of a consumer (``airflow-lineage serve``, or Marquez) with a read key."""

    def __init__(self, url: str, api_key: str = "", timeout: float = 30.0) -> None:
        parts = urlsplit(url.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ImpactError(f"consumer URL {url!r} must be http(s)://host[:port]")
        if parts.username or parts.password:
            raise ImpactError(
                f"the consumer URL must not hold credentials; give the key with --key-file, ${API_KEY_ENV} or --conn-id"
            )
        self.url = url.strip().rstrip("/")
        self.api_key = api_key
        self.timeout = timeout
        import requests

        self.session = requests.Session()
        if api_key:
            self.session.headers["X-API-Key"] = api_key

    def close(self) -> None:
        self.session.close()

    def _get(self, path: str, params: dict[str, Any]) -> Any | None:
        """The JSON answer of a GET, ``None`` for a 404; :class:`ImpactError` for anything the user must fix."""
        import requests

        try:
            response = self.session.get(f"{self.url}{path}", params=params, timeout=self.timeout)
        except requests.RequestException as error:
            reason = type(error).__name__
            raise ImpactError(
                f"cannot reach the consumer at {self.url} ({reason}); check --consumer and that the consumer runs "
                "(`airflow-lineage serve`)"
            ) from None
        if response.status_code == 404:
            return None
        if response.status_code == 401:
            given = "the key given was refused" if self.api_key else "no key was given"
            raise ImpactError(
                f"the consumer at {self.url} needs a key with read access (HTTP 401, {given}): give it with "
                f"--key-file FILE, ${API_KEY_ENV} or --conn-id CONN (an openlineage connection whose password is "
                "the key)"
            )
        if response.status_code == 403:
            raise ImpactError(
                f"the consumer at {self.url} refused the key (HTTP 403): give a key with read scope on the "
                f"namespace of {params.get('nodeId') or params.get('namespace') or 'the datasets'}"
            )
        if response.status_code >= 400:
            text = response.text[:300].replace(self.api_key, "***") if self.api_key else response.text[:300]
            raise ImpactError(f"the consumer at {self.url} answered HTTP {response.status_code}: {text}")
        try:
            return response.json()
        except ValueError:
            raise ImpactError(f"{self.url} answered something that is not JSON: is it a lineage consumer?") from None

    def downstream(self, node_id: str, depth: int) -> list[DownstreamNode] | None:
        """The jobs and datasets downstream of ``node_id`` to ``depth`` jobs away; ``None`` when unknown."""
        answer = self._get("/api/v1/lineage", {"nodeId": node_id, "depth": depth, "direction": "downstream"})
        if answer is None:
            return None
        return downstream_nodes(answer.get("graph") or [], node_id)

    def matching_datasets(self, namespace: str, name_regex: str, literal_prefix: str) -> list[str]:
        """Names of the consumer's datasets in ``namespace`` matching ``name_regex`` (at most
        :data:`MAX_RENDERINGS`), listed by ``name_contains=literal_prefix``."""
        pattern = re.compile(name_regex)
        names: list[str] = []
        offset = 0
        while len(names) < MAX_RENDERINGS:
            params: dict[str, Any] = {"namespace": namespace, "limit": 1000, "offset": offset}
            if literal_prefix:
                params["name_contains"] = literal_prefix
            answer = self._get("/api/v1/datasets", params) or {}
            page = answer.get("datasets") or []
            names += [d["name"] for d in page if isinstance(d.get("name"), str) and pattern.fullmatch(d["name"])]
            offset += len(page)
            if not page or offset >= int(answer.get("totalCount") or 0):
                break
        return sorted(names)[:MAX_RENDERINGS]


def downstream_nodes(graph: list[dict[str, Any]], start: str) -> list[DownstreamNode]:
    """Nodes of a Marquez-shaped graph reachable from ``start`` by out-edges, at their shortest distance."""
    nodes = {node.get("id"): node for node in graph if isinstance(node, dict)}
    if start not in nodes:  # a consumer spelling the id otherwise: the dataset with the same namespace and name
        wanted = start.removeprefix("dataset:")
        for node_id, node in nodes.items():
            ident = (node.get("data") or {}).get("id") or {}
            if (
                isinstance(node_id, str)
                and node.get("type") == "DATASET"
                and f"{ident.get('namespace')}:{ident.get('name')}" == wanted
            ):
                start = node_id
                break
    hops = {start: 0}
    queue = deque([start])
    while queue:
        current = queue.popleft()
        for edge in (nodes.get(current) or {}).get("outEdges") or []:
            target = edge.get("destination")
            if target in nodes and target not in hops:
                hops[target] = hops[current] + 1
                queue.append(target)
    found = []
    for node_id, distance in hops.items():
        if node_id == start:
            continue
        node = nodes[node_id]
        data = node.get("data") or {}
        ident = data.get("id") or {}
        found.append(
            DownstreamNode(
                type=str(node.get("type") or ""),
                namespace=str(ident.get("namespace") or data.get("namespace") or ""),
                name=str(ident.get("name") or data.get("name") or ""),
                hops=distance,
                declared_only=bool(node.get("declaredOnly") or data.get("declaredOnly")),
            )
        )
    return sorted(found, key=lambda n: (n.hops, n.namespace, n.name))


def _literal_prefix(template: str) -> str:
    return re.split(r"\{[{%#]", template, maxsplit=1)[0]


def _merge(nodes: Iterable[DownstreamNode]) -> list[DownstreamNode]:
    best: dict[tuple[str, str, str], DownstreamNode] = {}
    for node in nodes:
        key = (node.type, node.namespace, node.name)
        if key not in best or node.hops < best[key].hops:
            best[key] = node
    return sorted(best.values(), key=lambda n: (n.hops, n.namespace, n.name))


def impact(
    outputs: Sequence[DeclaredOutput], client: GraphClient, depth: int, dags: Sequence[str] = ()
) -> ImpactReport:
    """Ask the consumer what each output feeds, ``depth`` jobs away (see the module docstring)."""
    report = ImpactReport(consumer=client.url, depth=depth, dags=list(dags))
    for output in outputs:
        regex = None
        if output.name_regex is not None:
            regex = rendering_regex(output.name) or output.name_regex
            matched = client.matching_datasets(output.namespace, regex, _literal_prefix(output.name))
            found: list[DownstreamNode] = []
            for name in matched:
                found += client.downstream(f"dataset:{output.namespace}:{name}", depth) or []
            merged = _merge(found)
            status, nodes = "pattern", merged
        else:
            downstream = client.downstream(output.node_id, depth)
            status, nodes, matched = ("new", [], []) if downstream is None else ("known", downstream, [])
        report.outputs.append(
            OutputImpact(
                output=output,
                status=status,
                jobs=[n for n in nodes if n.type == "JOB"],
                datasets=[n for n in nodes if n.type == "DATASET"],
                matched=matched,
                match_regex=regex,
            )
        )
    return report
