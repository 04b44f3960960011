// The graph the page draws, read from the API's Marquez-shaped answer, and trimmed to a node budget.

import { kindOf } from "./dom.js";

/**
 * Nodes and edges of a {graph: [...]} answer: nodes {id, kind, name, namespace, data, declaredOnly, renderings},
 * edges [from, to, declaredOnly] as node positions (declaredOnly: a JobEvent declared the edge and no run
 * observed it), index id → position. Edges to nodes outside the answer are left out. ``renderings`` is a
 * templated name's {count, latest, expanded} (its renderings drawn as its one node unless expanded), else null;
 * ``parentJob`` the {namespace, name} of the job containing a job (see task-groups.js), ``airflowTask`` the Airflow
 * task instance a job is ({dagId, taskId, runId, mapIndex}), else null.
 */
export function fromResponse(answer) {
  const nodes = answer.graph.map((node) => ({
    id: node.id,
    kind: kindOf(node.type),
    name: node.data?.name ?? node.id,
    namespace: node.data?.namespace ?? "",
    data: node.data ?? {},
    declaredOnly: Boolean(node.declaredOnly ?? node.data?.declaredOnly),
    renderings: node.data?.renderings ?? null,
    parentJob: node.data?.parentJob ?? null,
    airflowTask: node.data?.airflowTask ?? null,
  }));
  const index = new Map(nodes.map((node, i) => [node.id, i]));
  const edges = [];
  const seen = new Set();
  for (const node of answer.graph) {
    for (const edge of node.outEdges ?? []) {
      const from = index.get(edge.origin);
      const to = index.get(edge.destination);
      const key = `${from}>${to}`;
      if (from === undefined || to === undefined || seen.has(key)) continue;
      seen.add(key);
      edges.push([from, to, edge.declared === true && edge.observed === false]);
    }
  }
  return { nodes, edges, index };
}

/** Hops from ``root`` to every node along edges (downstream), against them (upstream), or both. */
export function distances(model, rootId, direction) {
  const count = model.nodes.length;
  const out = Array.from({ length: count }, () => []);
  const inc = Array.from({ length: count }, () => []);
  for (const [from, to] of model.edges) {
    out[from].push(to);
    inc[to].push(from);
  }
  const best = new Float64Array(count).fill(Infinity);
  const root = model.index.get(rootId);
  if (root === undefined) return best;
  const walk = (next) => {
    const hops = new Float64Array(count).fill(Infinity);
    hops[root] = 0;
    const queue = [root];
    for (let head = 0; head < queue.length; head++) {
      const v = queue[head];
      for (const w of next[v]) {
        if (hops[w] === Infinity) {
          hops[w] = hops[v] + 1;
          queue.push(w);
        }
      }
    }
    for (let v = 0; v < count; v++) best[v] = Math.min(best[v], hops[v]);
  };
  if (direction !== "upstream") walk(out);
  if (direction !== "downstream") walk(inc);
  return best;
}

/**
 * The ``limit`` nodes nearest to the root (the server walks breadth first, so those are the ones a walk
 * cut at ``limit`` nodes keeps), with the edges among them.
 */
export function nearest(model, rootId, direction, limit) {
  if (model.nodes.length <= limit) return model;
  const hops = distances(model, rootId, direction);
  const keep = model.nodes
    .map((_, i) => i)
    .sort((a, b) => hops[a] - hops[b] || a - b)
    .slice(0, limit)
    .sort((a, b) => a - b);
  const renumber = new Map(keep.map((old, i) => [old, i]));
  const nodes = keep.map((old) => model.nodes[old]);
  const edges = model.edges
    .filter(([from, to]) => renumber.has(from) && renumber.has(to))
    .map(([from, to, declaredOnly]) => [renumber.get(from), renumber.get(to), declaredOnly]);
  return { nodes, edges, index: new Map(nodes.map((node, i) => [node.id, i])) };
}
