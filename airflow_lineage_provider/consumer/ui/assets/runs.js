// A job's run history, a page at a time, newest first: the state, start, end and duration of each run,
// each linking to the run's own view. Read from Marquez's GET /api/v1/namespaces/{ns}/jobs/{job}/runs.

import { jobRuns } from "./api.js";
import { formatTime, h, kindBadge, runDuration, stateClass } from "./dom.js";
import { pageSizeSelect, pager, previousOffset } from "./pager.js";

export const PAGE_SIZES = [5, 10, 20, 50, 100];

/**
 * Show the runs of job ``jobName`` in ``jobNamespace`` from ``offset``, ``limit`` of them.
 * @param {HTMLElement} container
 * @param {{jobNamespace: string, jobName: string, offset: number, limit: number}} where
 * @param {{link: Function, navigate: (params: object) => void, signal: AbortSignal}} page
 * @returns {Promise<{title: string, status: string}>}
 */
export async function showRunHistory(container, { jobNamespace, jobName, offset, limit }, { link, navigate, signal }) {
  const answer = await jobRuns(jobNamespace, jobName, limit, offset, signal);
  const total = answer.totalCount ?? answer.runs.length;
  const here = { view: "runs", jobNamespace, jobName, limit };
  const last = offset + answer.runs.length;
  const range = answer.runs.length
    ? `Runs ${offset + 1}–${last} of ${total}, newest first`
    : total
      ? `No runs from number ${offset + 1}: the job has ${total}.`
      : "No runs received for this job.";
  const rows = answer.runs.map((run) =>
    h(
      "tr",
      { "data-run-id": run.id },
      h("td", {}, h("span", { class: `state ${stateClass(run.state)}` }, run.state ?? "—")),
      h("td", { class: "started" }, formatTime(run.startedAt)),
      h("td", { class: "ended" }, formatTime(run.endedAt)),
      h("td", { class: "duration" }, runDuration(run)),
      h("td", { class: "id" }, link({ view: "run", runId: run.id }, { class: "run-link" }, run.id)),
    ),
  );
  const table = rows.length
    ? h(
        "table",
        { id: "runs-table", class: "listing" },
        h("caption", {}, range),
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            ["State", "Started", "Ended", "Duration", "Run"].map((name) => h("th", { scope: "col" }, name)),
          ),
        ),
        h("tbody", {}, rows),
      )
    : h("p", { class: "muted", id: "runs-empty" }, range);
  container.replaceChildren(
    h("p", {}, kindBadge("job")),
    h("h2", { id: "page-title", tabindex: "-1" }, `Run history of ${jobName}`),
    h("p", { class: "ns" }, "Namespace: ", h("span", { class: "namespace" }, jobNamespace)),
    h(
      "p",
      { class: "actions" },
      link({ nodeId: `job:${jobNamespace}:${jobName}` }, { id: "job-lineage-link" }, "Lineage of this job"),
      link({ view: "events", namespace: jobNamespace, job: jobName }, { id: "job-events-link" }, "Events of this job"),
    ),
    table,
    h(
      "div",
      { class: "pager-bar" },
      pager({
        label: "Pages of runs",
        range: answer.runs.length ? `Runs ${offset + 1}–${last} of ${total}` : "",
        previous: offset > 0 ? { ...here, offset: previousOffset(offset, limit, total) } : null,
        next: last < total ? { ...here, offset: offset + limit } : null,
        link,
      }),
      pageSizeSelect("runs-page-size", "Runs per page", PAGE_SIZES, limit, (size) =>
        navigate({ ...here, limit: size, offset: Math.floor(offset / size) * size }),
      ),
    ),
  );
  return {
    title: `Runs of ${jobName}`,
    status: answer.runs.length ? `${jobName}: runs ${offset + 1}–${last} of ${total}.` : `${jobName}: ${range}`,
  };
}
