// The consumer's HTTP API, as the page uses it. Every id and name travels as a query parameter
// (URL-encoded by URLSearchParams), so namespaces such as "postgres://db:5432" need no escaping rules.

const BASE = document.querySelector('meta[name="lineage-base"]')?.content ?? "";

/** An error answer of the API, with the status and the server's own explanation. */
export class ApiError extends Error {
  constructor(status, detail) {
    super(detail);
    this.status = status;
  }
}

async function getJson(path, params = {}, signal = undefined) {
  const url = new URL(BASE + path, window.location.origin);
  for (const [key, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== "") url.searchParams.set(key, String(value));
  }
  const response = await fetch(url, { headers: { Accept: "application/json" }, signal });
  if (!response.ok) {
    let detail = `${response.status} ${response.statusText}`;
    try {
      const body = await response.json();
      if (body && body.detail !== undefined)
        detail = typeof body.detail === "string" ? body.detail : JSON.stringify(body.detail);
    } catch {
      // not JSON: keep the status line
    }
    throw new ApiError(response.status, detail);
  }
  return response.json();
}

/** The graph around a node: Marquez's {graph: [{id, type, data, inEdges, outEdges}]}. */
export function lineage({ nodeId, depth, direction, maxNodes }, signal) {
  return getJson("/api/v1/lineage", { nodeId, depth, direction, maxNodes }, signal);
}

/** Column lineage around one field: {graph: [{id, type: DATASET_FIELD, data, inEdges, outEdges}]}. */
export function columnLineage(nodeId, depth, signal) {
  return getJson("/api/v1/column-lineage", { nodeId, depth, direction: "both" }, signal);
}

/** Jobs and datasets whose name contains ``text``, most recently updated first. */
export function search(text, namespace, limit = 20, signal = undefined) {
  return getJson("/api/v1/search", { q: text, namespace, limit }, signal);
}

export function namespaces() {
  return getJson("/api/v1/namespaces", { limit: 1000 });
}

/** A page of jobs or datasets (kind "job" or "dataset"), optionally of one namespace. */
export function listNodes(kind, namespace, limit = 50) {
  return getJson(kind === "job" ? "/api/v1/jobs" : "/api/v1/datasets", { namespace, limit });
}

/**
 * One job or dataset with its facets (and a job's inputs, outputs and latest run), or null.
 * The listing filters by a name fragment; the exact name is picked from the pages it returns.
 */
export async function findNode(kind, namespace, name, signal) {
  const path = kind === "job" ? "/api/v1/jobs" : "/api/v1/datasets";
  const key = kind === "job" ? "jobs" : "datasets";
  const limit = 1000;
  for (let offset = 0; ; offset += limit) {
    const page = await getJson(path, { namespace, name_contains: name, limit, offset }, signal);
    const found = page[key].find((item) => item.name === name && item.namespace === namespace);
    if (found) return found;
    if (offset + limit >= page.totalCount) return null;
  }
}

/** The latest runs of a job, newest first, with their facets. */
export function runs(namespace, name, limit = 5, signal = undefined) {
  return getJson("/api/v1/runs", { jobNamespace: namespace, jobName: name, limit }, signal);
}
