// The consumer's HTTP API, as the page uses it. Every id and name travels as a query parameter
// (URL-encoded by URLSearchParams), so namespaces such as "postgres://db:5432" need no escaping rules.

const BASE = document.querySelector('meta[name="lineage-base"]')?.content ?? "";
// How the API calls authenticate (docs/security.md): "key" — standalone, the page asks for a key when
// the server answers 401 and keeps it in this tab's session storage, sent as a header, never in a URL;
// "airflow" — inside Airflow, the session cookie; on 401 the page goes to Airflow's login.
const AUTH = document.querySelector('meta[name="lineage-auth"]')?.content || "key";
const LOGIN = document.querySelector('meta[name="lineage-login"]')?.content || "";
const KEY_ITEM = "lineage-api-key";
let pendingKey = null;

function authHeaders() {
  const key = AUTH === "key" ? sessionStorage.getItem(KEY_ITEM) : null;
  return key ? { "X-API-Key": key } : {};
}

/** Ask for a key once, however many requests were refused meanwhile; resolves when one is entered. */
function askForKey(reason) {
  if (pendingKey) return pendingKey;
  const dialog = document.getElementById("key-dialog");
  const form = document.getElementById("key-form");
  const input = document.getElementById("key-input");
  document.getElementById("key-reason").textContent = reason;
  input.value = "";
  pendingKey = new Promise((resolve) => {
    const submitted = (event) => {
      event.preventDefault();
      if (!input.value.trim()) return;
      sessionStorage.setItem(KEY_ITEM, input.value.trim());
      form.removeEventListener("submit", submitted);
      dialog.close();
      pendingKey = null;
      resolve();
    };
    form.addEventListener("submit", submitted);
  });
  dialog.showModal();
  input.focus();
  return pendingKey;
}

/** Forget the key of this tab (the "Key" button), so the next request asks again. */
export function forgetKey() {
  sessionStorage.removeItem(KEY_ITEM);
}

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
    if (Array.isArray(value)) for (const item of value) url.searchParams.append(key, String(item));
    else if (value !== undefined && value !== null && value !== "") url.searchParams.set(key, String(value));
  }
  let response = await fetch(url, { headers: { Accept: "application/json", ...authHeaders() }, signal });
  while (response.status === 401 && AUTH === "key") {
    const refused = sessionStorage.getItem(KEY_ITEM) !== null;
    sessionStorage.removeItem(KEY_ITEM);
    await askForKey(refused ? "That key was refused: enter another one." : "This lineage server needs a key to read.");
    response = await fetch(url, { headers: { Accept: "application/json", ...authHeaders() }, signal });
  }
  if (response.status === 401 && AUTH === "airflow" && LOGIN) {
    window.location.assign(LOGIN); // the Airflow session has ended: log in again, then come back here
  }
  if (!response.ok) {
    let detail = `${response.status} ${response.statusText}`;
    try {
      const body = await response.json();
      if (body && body.detail !== undefined)
        detail = typeof body.detail === "string" ? body.detail : JSON.stringify(body.detail);
      else if (body && typeof body.message === "string") detail = body.message; // Marquez's {code, message}
    } catch {
      // not JSON: keep the status line
    }
    throw new ApiError(response.status, detail);
  }
  // Answered from the graph as applied while events logged before the request were not yet (a bulk load):
  // the server says about how many; listeners (app.js) tell the reader.
  const pending = Number(response.headers.get("Lineage-Pending-Events") || 0);
  window.dispatchEvent(new CustomEvent("lineage-pending", { detail: pending }));
  return response.json();
}

/**
 * The graph around a node: Marquez's {graph: [{id, type, data, inEdges, outEdges}]}, the renderings of templated
 * names drawn as their pattern's node except those of the patterns ``expand`` lists (node ids).
 */
export function lineage({ nodeId, depth, direction, maxNodes, declared, expand = [] }, signal) {
  // ``declared``: "include" (the server's default, left out of the address) or "exclude" the edges only declared
  const leave = declared && declared !== "include" ? declared : undefined;
  return getJson("/api/v1/lineage", { nodeId, depth, direction, maxNodes, declared: leave, expand }, signal);
}

/**
 * Per declared job, where declared and observed lineage differ in the last ``days`` days: {jobs: [{job:
 * {namespace, name}, declaredNotObserved: [edge], observedNotDeclared: [edge]}], totalCount}, each edge
 * {direction, namespace, name, declaredAt, lastObservedAt} (docs/declared-lineage.md).
 */
export function drift({ days, namespace, limit, offset }, signal = undefined) {
  return getJson("/api/v1/drift", { days, namespace, limit, offset }, signal);
}

/** Column lineage around one field: {graph: [{id, type: DATASET_FIELD, data, inEdges, outEdges}]}. */
export function columnLineage(nodeId, depth, signal) {
  return getJson("/api/v1/column-lineage", { nodeId, depth, direction: "both" }, signal);
}

/**
 * Jobs and datasets whose name contains ``text`` (as typed: the search's wildcards % and _ and its escape
 * character \ are escaped), most recently updated first: Marquez's {totalCount, results: [{type, name,
 * namespace, updatedAt, nodeId}]}.
 */
export function search(text, namespace, limit = 20, signal = undefined) {
  const literal = text.replace(/[\\%_]/g, (char) => `\\${char}`);
  return getJson("/api/v1/search", { q: literal, namespace, limit, sort: "UPDATE_AT" }, signal);
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

// Marquez's paths (docs/ui.md, "Runs and events"): namespaces and names are percent-encoded path segments.
const segment = (text) => encodeURIComponent(text);

/** A page of a job's runs, newest first: Marquez's RunList {runs, totalCount}. */
export function jobRuns(namespace, name, limit, offset, signal = undefined) {
  const path = `/api/v1/namespaces/${segment(namespace)}/jobs/${segment(name)}/runs`;
  return getJson(path, { limit, offset }, signal);
}

/** One run: Marquez's Run (state, times, durationMs, jobVersion {namespace, name, version}, facets). */
export function runById(runId, signal = undefined) {
  return getJson(`/api/v1/jobs/runs/${segment(runId)}`, {}, signal);
}

/** A run's ``run`` or ``job`` facets, merged over all its events: Marquez's FacetsResult {runId, facets}. */
export function runFacets(runId, type, signal = undefined) {
  return getJson(`/api/v1/jobs/runs/${segment(runId)}/facets`, { type }, signal);
}

/** One version of a job (what one run read, wrote and said): Marquez's JobVersion with inputs and outputs. */
export function jobVersion(namespace, name, version, signal = undefined) {
  const path = `/api/v1/namespaces/${segment(namespace)}/jobs/${segment(name)}/versions/${segment(version)}`;
  return getJson(path, {}, signal);
}

/**
 * A page of the run events received, newest first (``sortDirection`` "asc": oldest first), with
 * ``after <= eventTime < before``: Marquez's LineageEventList {events, totalCount}.
 */
export function lineageEvents({ after, before, limit, offset, sortDirection }, signal = undefined) {
  return getJson("/api/v1/events/lineage", { after, before, limit, offset, sortDirection }, signal);
}

/** The events of one run as received, newest first (the consumer's own listing, which filters by run). */
export function runEvents(runId, limit = 100, signal = undefined) {
  return getJson("/api/v1/events", { runId, limit }, signal);
}
