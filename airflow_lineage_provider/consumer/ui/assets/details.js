// The details panel of one job or dataset: schema fields, facets (Egeria's supply chain and governance
// action shown first), latest runs with state and duration, and the column lineage of a chosen field.

import { ApiError, columnLineage, findNode, runs } from "./api.js";
import { durationBetween, formatDuration, formatTime, h, kindBadge, stateClass } from "./dom.js";
import { egeriaSummary, facetList, GOVERNANCE_ACTION, SUPPLY_CHAIN } from "./facets.js";
import { documentationElement } from "./markdown.js";

function message(error) {
  return error instanceof ApiError ? error.message : String(error);
}

/** Type names meaning "not known": a schema field without a type, or the placeholder some producers send. */
const UNKNOWN_TYPES = new Set(["", "NULL", "NULLTYPE"]);

/** A schema field's type cell: the type, or "unknown" (muted) when the producer did not know it. */
function typeCell(type) {
  const text = type === undefined || type === null ? "" : String(type).trim();
  return UNKNOWN_TYPES.has(text.toUpperCase())
    ? h("td", { class: "type unknown muted", title: text ? `The producer sent ${text}` : null }, "unknown")
    : h("td", { class: "type" }, text);
}

function describeTransformation(transformations) {
  if (!transformations) return "";
  const list = Array.isArray(transformations)
    ? transformations
    : [{ type: transformations.transformationType, description: transformations.transformationDescription }];
  return list
    .map(
      (t) =>
        [t.type, t.subtype].filter(Boolean).join("/") +
        (t.description ? ` (${t.description})` : "") +
        (t.masking ? " masked" : ""),
    )
    .filter(Boolean)
    .join(", ");
}

export class DetailsPanel {
  /**
   * @param {HTMLElement} element
   * @param {{onRecenter: (id: string) => void, depth: () => number,
   *          onHighlight: (datasetIds: Set<string>, pairs: [string, string][]) => void,
   *          link: (params: object, attrs: object, ...children: any) => HTMLAnchorElement}} callbacks
   *   ``link`` makes a link to another view of the page (app.js), e.g. a run's own view.
   */
  constructor(element, { onRecenter, onHighlight, depth, link }) {
    this.el = element;
    this.onRecenter = onRecenter;
    this.onHighlight = onHighlight;
    this.depth = depth;
    this.link = link;
    this.controller = null;
    this.initial = [...element.childNodes].map((node) => node.cloneNode(true));
  }

  clear() {
    this.controller?.abort();
    this.el.replaceChildren(...this.initial.map((node) => node.cloneNode(true)));
  }

  /** Show a graph node (see graph-model.js); ``isRoot`` hides the "show lineage from here" action. */
  show(node, isRoot) {
    this.controller?.abort();
    this.controller = new AbortController();
    const signal = this.controller.signal;
    this.node = node;
    const actions = h("div", { class: "actions" });
    if (!isRoot)
      actions.append(
        h(
          "button",
          { type: "button", id: "recenter", onclick: () => this.onRecenter(node.id) },
          "Show lineage from here",
        ),
      );
    const facets = h(
      "section",
      { id: "details-facets" },
      h("h3", {}, "Facets"),
      h("p", { class: "muted" }, "Loading…"),
    );
    const body = node.kind === "dataset" ? this.datasetSections(node) : this.jobSections(node, signal);
    this.el.replaceChildren(
      h("p", {}, kindBadge(node.kind)),
      h("h2", { id: "details-title" }, node.name),
      h("p", { class: "ns" }, "Namespace: ", h("span", { class: "namespace" }, node.namespace)),
      h("p", { class: "id" }, node.id),
      ...(node.declaredOnly
        ? [
            h(
              "p",
              { class: "declared-only-note", id: "details-declared-only" },
              h("strong", {}, "Declared only"),
              ": a JobEvent declared it, no run has named it yet.",
            ),
          ]
        : []),
      actions,
      ...body,
      facets,
    );
    this.loadFacets(node, facets, signal);
  }

  datasetSections(node) {
    const fields = node.data.fields ?? [];
    const schema = h("section", { id: "details-schema" }, h("h3", {}, `Schema (${fields.length} fields)`));
    if (!fields.length) schema.append(h("p", { class: "muted" }, "No schema received for this dataset."));
    else {
      schema.append(
        h(
          "table",
          {},
          h(
            "thead",
            {},
            h(
              "tr",
              {},
              h("th", { scope: "col" }, "Field"),
              h("th", { scope: "col" }, "Type"),
              h("th", { scope: "col" }, "Description"),
            ),
          ),
          h(
            "tbody",
            {},
            fields.map((field) =>
              h(
                "tr",
                {},
                h(
                  "td",
                  {},
                  h(
                    "button",
                    {
                      type: "button",
                      class: "field-button",
                      "data-field": field.name,
                      "aria-label": `Column lineage of ${field.name}`,
                      onclick: () => this.showColumnLineage(node, field.name),
                    },
                    field.name,
                  ),
                ),
                typeCell(field.type),
                h("td", {}, field.description ?? ""),
              ),
            ),
          ),
        ),
        h("p", { class: "muted" }, "Choose a field to see its column lineage."),
      );
    }
    this.columnRegion = h("section", { id: "column-lineage", class: "column-lineage", "aria-live": "polite" });
    return [schema, this.columnRegion];
  }

  jobSections(node, signal) {
    const run = node.data.latestRun;
    const runsSection = h(
      "section",
      { id: "details-runs" },
      h("h3", {}, "Latest runs"),
      run
        ? h("ul", { class: "runs" }, h("li", { class: "run", "data-run-id": run.id }, this.runSummary(run)))
        : h("p", { class: "muted" }, "No run received for this job."),
    );
    const historyLink = h(
      "p",
      { class: "history-link" },
      this.link(
        { view: "runs", jobNamespace: node.namespace, jobName: node.name },
        { id: "details-history-link" },
        "Run history",
      ),
    );
    runsSection.append(historyLink);
    const io = h(
      "section",
      { id: "details-io" },
      h("h3", {}, "Inputs and outputs"),
      h("p", { class: "muted" }, "Loading…"),
    );
    this.loadRuns(node, runsSection, historyLink, signal);
    this.io = io;
    return [runsSection, io];
  }

  runSummary(run) {
    const duration = run.durationMs ?? durationBetween(run.startedAt, run.endedAt);
    return h(
      "dl",
      { class: "run-summary" },
      h("dt", {}, "State"),
      h("dd", {}, h("span", { class: `state ${stateClass(run.state)}` }, run.state)),
      h("dt", {}, "Started"),
      h("dd", {}, formatTime(run.startedAt)),
      h("dt", {}, "Ended"),
      h("dd", {}, formatTime(run.endedAt)),
      h("dt", {}, "Duration"),
      h("dd", { class: "duration" }, run.endedAt ? formatDuration(duration) : "still running"),
      h("dt", {}, "Run id"),
      h("dd", { class: "id" }, this.link({ view: "run", runId: run.id }, { class: "run-link" }, run.id)),
    );
  }

  async loadRuns(node, section, historyLink, signal) {
    try {
      const answer = await runs(node.namespace, node.name, 5, signal);
      const items = answer.runs.map((run) => {
        const others = Object.fromEntries(
          Object.entries(run.facets ?? {}).filter(([name]) => ![SUPPLY_CHAIN, GOVERNANCE_ACTION].includes(name)),
        );
        const error = run.facets?.errorMessage?.message;
        return h(
          "li",
          { class: "run", "data-run-id": run.id },
          this.runSummary(run),
          error ? h("p", { class: "run-error" }, h("strong", {}, "Error: "), error) : null,
          egeriaSummary(run.facets),
          Object.keys(others).length
            ? h("details", {}, h("summary", {}, `Run facets (${Object.keys(others).length})`), facetList(others, ""))
            : null,
        );
      });
      section.replaceChildren(
        h("h3", {}, `Latest runs (${answer.runs.length} of ${answer.totalCount})`),
        items.length ? h("ul", { class: "runs" }, items) : h("p", { class: "muted" }, "No runs."),
        historyLink,
      );
    } catch (error) {
      if (error.name !== "AbortError")
        section.replaceChildren(
          h("h3", {}, "Latest runs"),
          h("p", { class: "muted" }, `Could not load the runs: ${message(error)}`),
          historyLink,
        );
    }
  }

  async loadFacets(node, section, signal) {
    try {
      const found = await findNode(node.kind, node.namespace, node.name, signal);
      const facets = found?.facets ?? {};
      section.replaceChildren(
        h("h3", {}, "Facets"),
        ...egeriaSummary(facets),
        facetList(facets, `No ${node.kind} facets received.`),
      );
      const documentation = documentationElement(facets.documentation);
      if (documentation) this.el.querySelector(".id")?.after(documentation);
      if (node.kind === "job" && this.io) {
        const list = (items) =>
          items?.length
            ? h(
                "ul",
                {},
                items.map((d) => h("li", {}, `${d.namespace} : ${d.name}`)),
              )
            : h("p", { class: "muted" }, "None.");
        this.io.replaceChildren(
          h("h3", {}, "Inputs"),
          list(found?.inputs),
          h("h3", {}, "Outputs"),
          list(found?.outputs),
        );
      }
    } catch (error) {
      if (error.name !== "AbortError")
        section.replaceChildren(
          h("h3", {}, "Facets"),
          h("p", { class: "muted" }, `Could not load the facets: ${message(error)}`),
        );
    }
  }

  /** Fields this field comes from and flows into, listed here and highlighted in the graph. */
  async showColumnLineage(dataset, field) {
    const region = this.columnRegion;
    const signal = this.controller.signal;
    const rootId = `datasetField:${dataset.namespace}:${dataset.name}:${field}`;
    region.replaceChildren(h("h3", {}, `Column lineage of ${field}`), h("p", { class: "muted" }, "Loading…"));
    let answer;
    try {
      answer = await columnLineage(rootId, Math.max(1, this.depth()) * 2, signal);
    } catch (error) {
      if (error.name === "AbortError") return;
      const text =
        error instanceof ApiError && error.status === 404
          ? `No column lineage recorded for ${field}.`
          : `Could not load the column lineage: ${message(error)}`;
      region.replaceChildren(h("h3", {}, `Column lineage of ${field}`), h("p", { class: "muted" }, text));
      this.onHighlight(new Set(), []);
      return;
    }
    const byId = new Map(answer.graph.map((n) => [n.id, n]));
    const walk = (next) => {
      const hops = new Map([[rootId, 0]]);
      const queue = [rootId];
      for (let i = 0; i < queue.length; i++) {
        for (const id of next(byId.get(queue[i]) ?? {})) {
          if (!hops.has(id) && byId.has(id)) {
            hops.set(id, hops.get(queue[i]) + 1);
            queue.push(id);
          }
        }
      }
      hops.delete(rootId);
      return hops;
    };
    const upstream = walk((n) => (n.inEdges ?? []).map((e) => e.origin));
    const downstream = walk((n) => (n.outEdges ?? []).map((e) => e.destination));
    const root = byId.get(rootId);
    const into = (id) => byId.get(id)?.data?.inputFields ?? [];
    const item = (id, hops, transformation) => {
      const d = byId.get(id).data;
      return h(
        "li",
        { "data-field-id": id },
        h("span", { class: "field-ref" }, `${d.dataset}.${d.field}`),
        " ",
        h("span", { class: "ns" }, d.namespace),
        hops > 1 ? ` · ${hops} hops` : "",
        transformation ? ` · ${transformation}` : "",
      );
    };
    const direct = (list, id) =>
      describeTransformation(
        list.find((f) => `datasetField:${f.namespace}:${f.dataset}:${f.field}` === id)?.transformations,
      );
    const section = (title, hops, transformationOf) =>
      h(
        "div",
        {},
        h("h4", {}, `${title} (${hops.size})`),
        hops.size
          ? h(
              "ul",
              {},
              [...hops].map(([id, n]) => item(id, n, n === 1 ? transformationOf(id) : "")),
            )
          : h("p", { class: "muted" }, "None."),
      );
    region.replaceChildren(
      h("h3", {}, `Column lineage of ${field}`),
      section("Comes from", upstream, (id) => direct(into(rootId), id)),
      section("Flows into", downstream, (id) => direct(into(id), rootId)),
    );
    const datasetOf = (id) => {
      const d = byId.get(id).data;
      return `dataset:${d.namespace}:${d.dataset}`;
    };
    const ids = new Set([
      `dataset:${dataset.namespace}:${dataset.name}`,
      ...[...upstream.keys(), ...downstream.keys()].map(datasetOf),
    ]);
    const pairs = [];
    for (const n of answer.graph)
      for (const e of n.outEdges ?? [])
        if (byId.has(e.origin) && byId.has(e.destination)) pairs.push([datasetOf(e.origin), datasetOf(e.destination)]);
    this.onHighlight(ids, pairs);
    if (!root) region.append(h("p", { class: "muted" }, "The field itself was not in the answer."));
  }
}
