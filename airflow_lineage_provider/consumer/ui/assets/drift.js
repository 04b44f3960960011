// The drift view: per declared job, the edges a JobEvent declared that no run observed in the last N days, and
// the edges runs observed in that window that no JobEvent declared. Read from GET /api/v1/drift (see
// docs/declared-lineage.md); each job links to its graph, each dataset to its own.

import { drift } from "./api.js";
import { formatTime, h, kindBadge } from "./dom.js";
import { pageSizeSelect, pager, previousOffset } from "./pager.js";

export const PAGE_SIZES = [10, 20, 50, 100];
/** The windows offered (any other ``days`` in the address is added to the choices). */
export const DAY_CHOICES = [1, 7, 30, 90, 365];

function edgeItem(edge, className, link) {
  const side = edge.direction === "input" ? "reads" : "writes";
  const when = [
    edge.declaredAt ? `declared ${formatTime(edge.declaredAt)}` : "not declared",
    edge.lastObservedAt ? `last observed ${formatTime(edge.lastObservedAt)}` : "never observed",
  ].join("; ");
  return h(
    "li",
    { class: className, "data-direction": edge.direction, "data-dataset": `${edge.namespace}:${edge.name}` },
    `${side} `,
    link({ nodeId: `dataset:${edge.namespace}:${edge.name}` }, { class: "dataset-link" }, edge.name),
    " ",
    h("span", { class: "ns" }, edge.namespace),
    " ",
    h("span", { class: "muted when" }, `(${when})`),
  );
}

function edgeList(title, edges, className, link) {
  if (!edges.length) return [];
  const items = edges.map((edge) => edgeItem(edge, className, link));
  return [h("h4", {}, `${title} (${edges.length})`), h("ul", { class: `${className}-list` }, items)];
}

/**
 * Show the jobs with drift over the last ``days`` days from ``offset``, ``limit`` of them.
 * @param {HTMLElement} container
 * @param {{days: number, namespace: string, offset: number, limit: number}} where
 * @param {{link: Function, navigate: (params: object) => void, signal: AbortSignal}} page
 * @returns {Promise<{title: string, status: string}>}
 */
export async function showDrift(container, { days, namespace, offset, limit }, { link, navigate, signal }) {
  const answer = await drift({ days, namespace, limit, offset }, signal);
  const total = answer.totalCount ?? answer.jobs.length;
  const here = { view: "drift", days, namespace, limit };
  const last = offset + answer.jobs.length;
  const span = days === 1 ? "the last day" : `the last ${days} days`;
  const range = answer.jobs.length
    ? `Jobs ${offset + 1}–${last} of ${total} with drift over ${span}`
    : total
      ? `No jobs from number ${offset + 1}: ${total} have drift over ${span}.`
      : `No drift over ${span}: every declared job ran as declared.`;
  const jobs = answer.jobs.map(({ job, declaredNotObserved, observedNotDeclared }) =>
    h(
      "section",
      { class: "drift-job", "data-job": `${job.namespace}:${job.name}` },
      h(
        "h3",
        {},
        kindBadge("job"),
        " ",
        link({ nodeId: `job:${job.namespace}:${job.name}` }, { class: "job-link" }, job.name),
        " ",
        h("span", { class: "ns" }, job.namespace),
      ),
      ...edgeList(`Declared, not observed in ${span}`, declaredNotObserved, "declared-not-observed", link),
      ...edgeList("Observed, not declared", observedNotDeclared, "observed-not-declared", link),
    ),
  );
  const choices = DAY_CHOICES.includes(days) ? DAY_CHOICES : [...DAY_CHOICES, days].sort((a, b) => a - b);
  container.replaceChildren(
    h("h2", { id: "page-title", tabindex: "-1" }, "Drift between declared and observed lineage"),
    h(
      "p",
      { class: "muted" },
      "Per job a JobEvent declared: the edges it declared that no run observed, " +
        "and the edges runs observed that its declaration does not name.",
    ),
    h(
      "div",
      { class: "drift-controls" },
      h(
        "label",
        { class: "page-size" },
        "Observed within ",
        h(
          "select",
          {
            id: "drift-days",
            onchange: (event) => navigate({ ...here, days: Number(event.target.value), offset: 0 }),
          },
          choices.map((n) => h("option", { value: n, selected: n === days }, n === 1 ? "1 day" : `${n} days`)),
        ),
      ),
      namespace ? h("span", { class: "muted" }, `Namespace ${namespace} only`) : "",
    ),
    h("p", { id: "drift-range", role: "note" }, range),
    h("div", { id: "drift-jobs" }, ...jobs),
    h(
      "div",
      { class: "pager-bar" },
      pager({
        label: "Pages of jobs with drift",
        range: answer.jobs.length ? `Jobs ${offset + 1}–${last} of ${total}` : "",
        previous: offset > 0 ? { ...here, offset: previousOffset(offset, limit, total) } : null,
        next: last < total ? { ...here, offset: offset + limit } : null,
        link,
      }),
      pageSizeSelect("drift-page-size", "Jobs per page", PAGE_SIZES, limit, (size) =>
        navigate({ ...here, limit: size, offset: Math.floor(offset / size) * size }),
      ),
    ),
  );
  return { title: "Drift", status: range.endsWith(".") ? range : `${range}.` };
}
