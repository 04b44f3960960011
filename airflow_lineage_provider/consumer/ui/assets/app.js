// The lineage page: wires the controls, the URL, the graph and the details panel together.
// The URL holds the state (?nodeId=...&depth=...&direction=...&maxNodes=...&namespace=...), so a
// view can be bookmarked and shared; the page asks the server only for the bounded subgraph it shows.

import { ApiError, lineage, listNodes, namespaces } from "./api.js";
import { DetailsPanel } from "./details.js";
import { h, kindBadge } from "./dom.js";
import { fromResponse, nearest } from "./graph-model.js";
import { GraphView } from "./graph-view.js";
import { SearchBox } from "./search.js";

const $ = (id) => document.getElementById(id);
const DEFAULTS = { nodeId: "", depth: 1, direction: "both", maxNodes: 500, namespace: "" };
const MAX_NODE_CHOICES = [...$("max-nodes").options].map((o) => Number(o.value));

const state = { ...DEFAULTS };
let model = null;
let loadController = null;

function readUrl() {
  const params = new URLSearchParams(window.location.search);
  const number = (key, fallback) => {
    const value = Number.parseInt(params.get(key) ?? "", 10);
    return Number.isFinite(value) && value > 0 ? value : fallback;
  };
  state.nodeId = params.get("nodeId") ?? "";
  state.depth = number("depth", DEFAULTS.depth);
  state.direction = ["both", "upstream", "downstream"].includes(params.get("direction"))
    ? params.get("direction")
    : DEFAULTS.direction;
  state.maxNodes = number("maxNodes", DEFAULTS.maxNodes);
  state.namespace = params.get("namespace") ?? "";
}

function writeUrl(push) {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(state)) {
    if (value !== DEFAULTS[key] || key === "nodeId") if (value !== "") params.set(key, String(value));
  }
  const url = `${window.location.pathname}${params.size ? `?${params}` : ""}`;
  if (url !== `${window.location.pathname}${window.location.search}`)
    window.history[push ? "pushState" : "replaceState"]({}, "", url);
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
}

function setStatus(text) {
  $("status").textContent = text;
}

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
});

const view = new GraphView($("graph"), {
  onOpen: (id) => openDetails(id),
});

const searchBox = new SearchBox($("search-input"), $("search-results"), {
  onChoose: (nodeId) => choose(nodeId),
  namespace: () => state.namespace,
});

function openDetails(id) {
  const i = model?.index.get(id);
  if (i === undefined) return;
  view.select(id);
  view.highlight(new Set());
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
  state.nodeId = nodeId;
  writeUrl(true);
  loadGraph();
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

async function loadGraph() {
  loadController?.abort();
  $("cut-notice").hidden = true;
  showError("");
  if (!state.nodeId) {
    model = null;
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
  };
  let answer;
  try {
    answer = await lineage(request, loadController.signal);
  } catch (error) {
    if (error.name === "AbortError") return;
    model = null;
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
  model = cut ? nearest(full, state.nodeId, state.direction, state.maxNodes) : full;
  const took = view.render(model, state.nodeId);
  $("graph").dataset.renderMs = took.toFixed(0);
  if (cut) showCut(model.nodes.length);
  const root = model.nodes[model.index.get(state.nodeId)];
  const ways = { both: "both ways", upstream: "upstream", downstream: "downstream" }[state.direction];
  const size = `${model.nodes.length} nodes, ${model.edges.length} edges`;
  setStatus(`${root?.name ?? state.nodeId}: ${size}, depth ${state.depth} ${ways}.`);
  document.title = `Lineage: ${root?.name ?? state.nodeId}`;
  if (root) openDetails(root.id);
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
  window.addEventListener("popstate", () => {
    readUrl();
    syncControls();
    loadGraph();
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
loadGraph();
