// The lineage page: wires the controls, the URL, the graph, the details panel and the other views (a
// job's run history, a run, the events browser, the drift view) together. The URL holds the state (the
// graph's ?nodeId=...&depth=...&direction=...&maxNodes=...&namespace=...&declared=...&expand=...&collapse=..., or
// ?view=runs|run|events|drift with their own parameters, docs/ui.md), so a view can be bookmarked and shared;
// the page asks the server only for the bounded subgraph or the page of runs, events or jobs it shows.

import { ApiError, lineage, listNodes, namespaces } from "./api.js";
import { DetailsPanel } from "./details.js";
import { h, kindBadge } from "./dom.js";
import { showDrift } from "./drift.js";
import { showEvents } from "./events.js";
import { fromResponse, nearest } from "./graph-model.js";
import { GraphView } from "./graph-view.js";
import { showRun } from "./run.js";
import { showRunHistory } from "./runs.js";
import { SearchBox } from "./search.js";
import { airflowBase, drawnModel } from "./task-groups.js";

const $ = (id) => document.getElementById(id);
const DEFAULTS = {
  view: "",
  nodeId: "",
  depth: 1,
  direction: "both",
  maxNodes: 500,
  namespace: "",
  declared: "include",
  expand: [],
  collapse: [],
  days: 30,
  jobNamespace: "",
  jobName: "",
  runId: "",
  after: "",
  before: "",
  job: "",
  offset: 0,
  limit: 0,
};
/** The address parameters of each view ("": the graph), in the order they are written. */
const VIEW_KEYS = {
  "": ["nodeId", "depth", "direction", "maxNodes", "namespace", "declared", "expand", "collapse"],
  runs: ["view", "jobNamespace", "jobName", "offset", "limit"],
  run: ["view", "runId"],
  events: ["view", "after", "before", "namespace", "job", "offset", "limit"],
  drift: ["view", "days", "namespace", "offset", "limit"],
};
/** The graph's settings, kept while another view is open. */
const KEPT = ["depth", "direction", "maxNodes", "namespace", "declared"];
/** Items per page when the address gives no ``limit``. */
const PAGE_SIZE = { runs: 20, events: 50, drift: 20 };
const MAX_NODE_CHOICES = [...$("max-nodes").options].map((o) => Number(o.value));

const state = { ...DEFAULTS };
let model = null;
/** The answer's graph (cut to maxNodes) before tasks' boxes are collapsed: ``model`` is drawn from it. */
let answerModel = null;
let loadController = null;
let pageController = null;

function readUrl() {
  const params = new URLSearchParams(window.location.search);
  const number = (key, fallback, least = 1, most = Number.MAX_SAFE_INTEGER) => {
    const value = Number.parseInt(params.get(key) ?? "", 10);
    return Number.isFinite(value) && value >= least && value <= most ? value : fallback;
  };
  state.view = Object.hasOwn(VIEW_KEYS, params.get("view") ?? "") ? (params.get("view") ?? "") : "";
  for (const key of ["nodeId", "namespace", "jobNamespace", "jobName", "runId", "after", "before", "job"])
    state[key] = params.get(key) ?? "";
  state.depth = number("depth", DEFAULTS.depth);
  state.direction = ["both", "upstream", "downstream"].includes(params.get("direction"))
    ? params.get("direction")
    : DEFAULTS.direction;
  state.maxNodes = number("maxNodes", DEFAULTS.maxNodes);
  state.declared = params.get("declared") === "exclude" ? "exclude" : DEFAULTS.declared;
  state.expand = params.getAll("expand").filter((id) => id.startsWith("dataset:"));
  state.collapse = params.getAll("collapse").filter((id) => id.startsWith("job:"));
  state.days = number("days", DEFAULTS.days, 1, 36_500);
  state.offset = number("offset", DEFAULTS.offset, 0, 10_000_000);
  state.limit = number("limit", DEFAULTS.limit, 1, 1000);
}

/** The query string of a state: the parameters of its view that differ from the defaults. */
function addressOf(target) {
  const params = new URLSearchParams();
  for (const key of VIEW_KEYS[target.view]) {
    const value = target[key];
    if (Array.isArray(value)) {
      for (const item of value) params.append(key, item);
      continue;
    }
    if (key === "limit" && value === PAGE_SIZE[target.view]) continue;
    if ((value !== DEFAULTS[key] || key === "view") && value !== "") params.set(key, String(value));
  }
  return params.size ? `?${params}` : "";
}

function writeUrl(push) {
  const url = `${window.location.pathname}${addressOf(state)}`;
  if (url !== `${window.location.pathname}${window.location.search}`)
    window.history[push ? "pushState" : "replaceState"]({}, "", url);
}

/** The state ``params`` lead to: the defaults, the graph's settings kept, and ``params``. */
function nextState(params) {
  return { ...DEFAULTS, ...Object.fromEntries(KEPT.map((key) => [key, state[key]])), ...params };
}

/** Open the view ``params`` name (see nextState), as a new entry of the browser's history. */
function navigate(params) {
  Object.assign(state, nextState(params));
  syncControls();
  writeUrl(true);
  render(true);
}

/**
 * A link to another view of the page: an ordinary address (it opens in a new tab as well), followed here
 * without reloading the page.
 */
function link(params, attrs, ...children) {
  const target = nextState(params);
  return h(
    "a",
    {
      ...attrs,
      href: `${window.location.pathname}${addressOf(target)}`,
      onclick: (event) => {
        if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
        event.preventDefault();
        navigate(target);
      },
    },
    ...children,
  );
}

function ensureOption(select, value, label = String(value)) {
  if (![...select.options].some((o) => o.value === String(value))) select.append(h("option", { value }, label));
  select.value = String(value);
}

function syncControls() {
  ensureOption($("depth"), state.depth);
  $("direction").value = state.direction;
  ensureOption($("max-nodes"), state.maxNodes);
  ensureOption($("namespace"), state.namespace, state.namespace || "All namespaces");
  $("declared").value = state.declared;
}

function setStatus(text) {
  $("status").textContent = text;
}

// An answer read behind the consumer's applier (a bulk load) says how far: shown until an answer is up to date.
window.addEventListener("lineage-pending", (event) => {
  const pending = event.detail;
  $("behind-notice").hidden = !pending;
  $("behind-notice").textContent = pending
    ? `The graph is behind: about ${pending.toLocaleString("en")} events received are not applied yet. ` +
      "Reload in a moment for the latest."
    : "";
});

function showError(text) {
  $("error").textContent = text;
  $("error").hidden = !text;
}

function setPageState(value) {
  document.body.dataset.state = value;
}

const details = new DetailsPanel($("details"), {
  onRecenter: (id) => choose(id),
  onHighlight: (ids, pairs) => highlightColumns(ids, pairs),
  depth: () => state.depth,
  link,
});

const view = new GraphView($("graph"), {
  onOpen: (id) => openDetails(id),
  onToggleRenderings: (id) => toggleRenderings(id),
  onToggleTasks: (id) => toggleTasks(id),
  airflowBase: airflowBase(
    document.querySelector('meta[name="lineage-base"]')?.content ?? "",
    document.querySelector('meta[name="lineage-auth"]')?.content ?? "key",
  ),
});

/** Collapse the jobs of the task ``id`` into its node (or expand them back), without asking the server again;
 * focus the task's node, or once expanded its first job when the task's own node is not in the graph. */
function toggleTasks(id) {
  if (!answerModel) return;
  const collapsed = state.collapse.includes(id);
  state.collapse = collapsed ? state.collapse.filter((other) => other !== id) : [...state.collapse, id];
  writeUrl(false);
  const selected = document.body.dataset.selected;
  model = drawnModel(answerModel, new Set(state.collapse));
  const rootId = drawnRoot();
  view.render(model, rootId);
  const group = model.groups.find((shown) => shown.id === id);
  const target = model.index.has(id) ? id : group ? model.nodes[group.members[0]].id : rootId;
  if (selected && model.index.has(selected)) view.select(selected);
  view.focus(target);
}

/** The node drawn for the root: itself, or the task's node its box is collapsed into. */
function drawnRoot() {
  return model.standsFor.get(state.nodeId) ?? state.nodeId;
}

/** What the selected templated name stands for (its latest rendering), with the button expanding its renderings
 * or collapsing them back. */
const renderingsText = h("span", { id: "renderings-latest" });
const renderingsToggle = h("button", { id: "renderings-toggle", type: "button" });
renderingsToggle.addEventListener("click", () => toggleRenderings(renderingsToggle.dataset.id));
const renderingsButton = h("p", { id: "renderings-notice", class: "notice", hidden: true }, renderingsText, " ");
renderingsButton.append(renderingsToggle);
document.querySelector(".notices").append(renderingsButton);

function showRenderingsButton(node) {
  const renderings = node?.renderings;
  renderingsButton.hidden = !renderings;
  if (!renderings) return;
  const { count, latest, expanded } = renderings;
  renderingsText.textContent =
    `${node.name} stands for ${count} rendering${count === 1 ? "" : "s"}` +
    (latest ? `, the latest ${latest.name} (updated ${latest.updatedAt}).` : ".");
  renderingsToggle.dataset.id = node.id;
  renderingsToggle.textContent = expanded
    ? `Collapse the renderings of ${node.name}`
    : `Expand the ${count} renderings`;
}

/** Draw the renderings of the templated name ``id`` each (or collapse them back into it), keeping it selected. */
function toggleRenderings(id) {
  state.expand = state.expand.includes(id) ? state.expand.filter((other) => other !== id) : [...state.expand, id];
  writeUrl(false);
  loadGraph(id);
}

const searchBox = new SearchBox($("search-input"), $("search-results"), {
  onChoose: (nodeId) => choose(nodeId),
  namespace: () => state.namespace,
});

function openDetails(id) {
  const i = model?.index.get(id);
  if (i === undefined) return;
  view.select(id);
  view.highlight(new Set());
  showRenderingsButton(model.nodes[i]);
  details.show(model.nodes[i], id === state.nodeId);
  document.body.dataset.selected = id;
}

/** Highlight the datasets a column's lineage passes through, and the jobs joining them. */
function highlightColumns(datasetIds, pairs) {
  if (!model) return;
  const ids = new Set([...datasetIds].filter((id) => model.index.has(id)));
  const out = new Map();
  for (const [from, to] of model.edges) {
    const key = model.nodes[from].id;
    if (!out.has(key)) out.set(key, []);
    out.get(key).push(model.nodes[to].id);
  }
  for (const [source, target] of pairs) {
    if (!ids.has(source) || !ids.has(target)) continue;
    for (const job of out.get(source) ?? []) if ((out.get(job) ?? []).includes(target)) ids.add(job);
  }
  view.highlight(ids);
}

function choose(nodeId) {
  navigate({ nodeId });
}

/** Show the view the state names: the graph, or one of the pages (run history, run, events). */
function render(focus = false) {
  const graph = !state.view;
  renderingsButton.hidden = true; // shown again once a templated name's node is selected
  document.body.dataset.view = state.view || "graph";
  $("graph-layout").hidden = !graph;
  $("pages").hidden = graph;
  $("skip-link").href = graph ? "#graph-pane" : "#pages";
  $("skip-link").textContent = graph ? "Skip to the graph" : "Skip to the content";
  for (const el of document.querySelectorAll(".graph-only")) el.hidden = !graph;
  const events = $("events-link");
  events.href = `${window.location.pathname}${addressOf(nextState({ view: "events" }))}`;
  if (state.view === "events") events.setAttribute("aria-current", "page");
  else events.removeAttribute("aria-current");
  const driftLink = $("drift-link");
  driftLink.href = `${window.location.pathname}${addressOf(nextState({ view: "drift" }))}`;
  if (state.view === "drift") driftLink.setAttribute("aria-current", "page");
  else driftLink.removeAttribute("aria-current");
  if (graph) {
    pageController?.abort();
    loadGraph();
  } else {
    loadController?.abort();
    loadPage(focus);
  }
}

/** What each page view needs, and the text shown while it loads. */
const PAGES = {
  runs: {
    loading: () => `Loading the runs of ${state.jobName}…`,
    missing: () => (!state.jobNamespace || !state.jobName ? "The run history needs jobNamespace and jobName." : ""),
    show: (pages, context) =>
      showRunHistory(
        pages,
        {
          jobNamespace: state.jobNamespace,
          jobName: state.jobName,
          offset: state.offset,
          limit: state.limit || PAGE_SIZE.runs,
        },
        context,
      ),
    failed: (error) =>
      error instanceof ApiError && error.status === 404
        ? `No job ${state.jobName} in namespace ${state.jobNamespace}: ${error.message}`
        : `The runs could not be loaded: ${error.message}`,
  },
  run: {
    loading: () => `Loading run ${state.runId}…`,
    missing: () => (state.runId ? "" : "The run view needs a runId."),
    show: (pages, context) => showRun(pages, { runId: state.runId }, context),
    failed: (error) =>
      error instanceof ApiError && error.status === 404
        ? `No run ${state.runId} in this lineage store.`
        : `The run could not be loaded: ${error.message}`,
  },
  events: {
    loading: () => "Loading the events…",
    missing: () => "",
    show: (pages, context) =>
      showEvents(
        pages,
        {
          after: state.after,
          before: state.before,
          namespace: state.namespace,
          job: state.job,
          offset: state.offset,
          limit: state.limit || PAGE_SIZE.events,
        },
        context,
      ),
    failed: (error) => `The events could not be loaded: ${error.message}`,
  },
  drift: {
    loading: () => "Loading the drift…",
    missing: () => "",
    show: (pages, context) =>
      showDrift(
        pages,
        {
          days: state.days,
          namespace: state.namespace,
          offset: state.offset,
          limit: state.limit || PAGE_SIZE.drift,
        },
        context,
      ),
    failed: (error) => `The drift could not be loaded: ${error.message}`,
  },
};

async function loadPage(focus) {
  pageController?.abort();
  pageController = new AbortController();
  const signal = pageController.signal;
  const page = PAGES[state.view];
  const pages = $("pages");
  const heading = { runs: "Run history", run: "Run", events: "Events", drift: "Drift" }[state.view];
  const fail = (text) => {
    pages.replaceChildren(h("h2", { id: "page-title", tabindex: "-1" }, heading), h("p", { class: "muted" }, text));
    showError(text);
    setStatus("");
    setPageState("error");
  };
  $("cut-notice").hidden = true;
  showError("");
  document.title = `Lineage: ${heading}`;
  if (page.missing()) fail(page.missing());
  else {
    setPageState("loading");
    setStatus(page.loading());
    pages.replaceChildren(
      h("h2", { id: "page-title", tabindex: "-1" }, heading),
      h("p", { class: "muted" }, "Loading…"),
    );
    try {
      const { title, status } = await page.show(pages, { link, navigate, signal });
      if (signal.aborted) return;
      document.title = `Lineage: ${title}`;
      setStatus(status);
      setPageState("ready");
    } catch (error) {
      if (error.name === "AbortError" || signal.aborted) return;
      fail(page.failed(error));
    }
  }
  if (focus) $("page-title")?.focus();
}

function showCut(shown) {
  const next = MAX_NODE_CHOICES.find((n) => n > state.maxNodes);
  $("cut-text").textContent =
    `The walk was cut at maxNodes = ${state.maxNodes}: showing the ${shown} nearest nodes. ` +
    "Lower the depth or raise the limit to see more.";
  $("cut-more").hidden = next === undefined;
  $("cut-more").textContent = next ? `Show up to ${next}` : "";
  $("cut-more").dataset.next = next ?? "";
  $("cut-notice").hidden = false;
}

/** Load and draw the graph the state names; ``selected``: the node to select and focus once drawn (else the root). */
async function loadGraph(selected = "") {
  loadController?.abort();
  renderingsButton.hidden = true;
  $("cut-notice").hidden = true;
  showError("");
  if (!state.nodeId) {
    model = answerModel = null;
    $("graph").replaceChildren();
    $("graph").setAttribute("aria-label", "No graph yet");
    details.clear();
    setStatus("Search for a job or dataset, or pick one below.");
    await showBrowse();
    setPageState("ready");
    return;
  }
  $("browse").hidden = true;
  setPageState("loading");
  setStatus(`Loading the lineage of ${state.nodeId}…`);
  loadController = new AbortController();
  const request = {
    nodeId: state.nodeId,
    depth: state.depth,
    direction: state.direction,
    maxNodes: state.maxNodes + 1,
    declared: state.declared,
    expand: state.expand,
  };
  let answer;
  try {
    answer = await lineage(request, loadController.signal);
  } catch (error) {
    if (error.name === "AbortError") return;
    model = answerModel = null;
    $("graph").replaceChildren();
    details.clear();
    showError(
      error instanceof ApiError && error.status === 404
        ? `No job or dataset ${state.nodeId} in this lineage store.`
        : `The lineage could not be loaded: ${error.message}`,
    );
    setStatus("");
    setPageState("error");
    return;
  }
  // One node more than the limit was asked for: getting it back means the walk was cut.
  const full = fromResponse(answer);
  const cut = full.nodes.length > state.maxNodes;
  answerModel = cut ? nearest(full, state.nodeId, state.direction, state.maxNodes) : full;
  model = drawnModel(answerModel, new Set(state.collapse));
  const took = view.render(model, drawnRoot());
  $("graph").dataset.renderMs = took.toFixed(0);
  if (cut) showCut(model.nodes.length);
  const root = model.nodes[model.index.get(drawnRoot())];
  const ways = { both: "both ways", upstream: "upstream", downstream: "downstream" }[state.direction];
  const size = `${model.nodes.length} nodes, ${model.edges.length} edges`;
  setStatus(`${root?.name ?? state.nodeId}: ${size}, depth ${state.depth} ${ways}.`);
  document.title = `Lineage: ${root?.name ?? state.nodeId}`;
  if (selected && model.index.has(selected)) {
    openDetails(selected);
    view.focus(selected);
  } else if (root) openDetails(root.id);
  setPageState("ready");
}

async function showBrowse() {
  const fill = async (kind, list) => {
    try {
      const answer = await listNodes(kind, state.namespace, 50);
      const items = answer[kind === "job" ? "jobs" : "datasets"];
      list.replaceChildren(
        ...items.map((item) =>
          h(
            "li",
            {},
            kindBadge(kind),
            " ",
            h(
              "a",
              {
                href: `?nodeId=${encodeURIComponent(item.nodeId)}`,
                onclick: (event) => (event.preventDefault(), choose(item.nodeId)),
              },
              item.name,
            ),
            " ",
            h("span", { class: "ns" }, item.namespace),
          ),
        ),
      );
      if (!items.length) list.replaceChildren(h("li", { class: "muted" }, "None yet."));
    } catch (error) {
      list.replaceChildren(h("li", { class: "muted" }, `Could not load: ${error.message}`));
    }
  };
  $("browse").hidden = false;
  await Promise.all([fill("job", $("browse-jobs")), fill("dataset", $("browse-datasets"))]);
}

async function loadNamespaces() {
  try {
    const answer = await namespaces();
    const select = $("namespace");
    for (const ns of answer.namespaces) ensureOption(select, ns.name);
    select.value = state.namespace;
  } catch (error) {
    showError(`The namespaces could not be loaded: ${error.message}`);
  }
}

function bindControls() {
  const onChange = (key, parse) => (event) => {
    state[key] = parse(event.target.value);
    writeUrl(false);
    if (key === "namespace") {
      searchBox.refresh();
      if (!state.nodeId) showBrowse();
    } else loadGraph();
  };
  $("depth").addEventListener("change", onChange("depth", Number));
  $("direction").addEventListener("change", onChange("direction", String));
  $("max-nodes").addEventListener("change", onChange("maxNodes", Number));
  $("namespace").addEventListener("change", onChange("namespace", String));
  $("declared").addEventListener("change", onChange("declared", String));
  $("cut-more").addEventListener("click", () => {
    state.maxNodes = Number($("cut-more").dataset.next);
    syncControls();
    writeUrl(false);
    loadGraph();
  });
  $("zoom-in").addEventListener("click", () => view.zoom(1.25));
  $("zoom-out").addEventListener("click", () => view.zoom(0.8));
  $("zoom-fit").addEventListener("click", () => view.fit());
  $("home-link").addEventListener("click", (event) => {
    event.preventDefault();
    choose("");
  });
  $("events-link").addEventListener("click", (event) => {
    if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
    event.preventDefault();
    navigate({ view: "events" });
  });
  $("drift-link").addEventListener("click", (event) => {
    if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
    event.preventDefault();
    navigate({ view: "drift" });
  });
  window.addEventListener("popstate", () => {
    readUrl();
    syncControls();
    render(true);
  });
}

function bindTheme() {
  const button = $("theme-toggle");
  const dark = () => {
    const chosen = document.documentElement.dataset.theme;
    return chosen ? chosen === "dark" : window.matchMedia("(prefers-color-scheme: dark)").matches;
  };
  const show = () => {
    button.setAttribute("aria-pressed", String(dark()));
  };
  let saved = null;
  try {
    saved = window.localStorage.getItem("lineage-theme");
  } catch {
    // storage unavailable (sandboxed frame): follow the system
  }
  if (saved === "dark" || saved === "light") document.documentElement.dataset.theme = saved;
  button.addEventListener("click", () => {
    const theme = dark() ? "light" : "dark";
    document.documentElement.dataset.theme = theme;
    try {
      window.localStorage.setItem("lineage-theme", theme);
    } catch {
      // not saved: the choice lasts for this page
    }
    show();
  });
  window.matchMedia("(prefers-color-scheme: dark)").addEventListener("change", show);
  show();
}

readUrl();
syncControls();
bindControls();
bindTheme();
loadNamespaces();
render();
