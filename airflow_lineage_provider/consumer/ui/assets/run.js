// A run's own view: its state, times and duration, the datasets it read and wrote (each linking to its
// graph), its error message and stack trace, Egeria's facets, every run and job facet, and its events.
// Read from Marquez's GET /api/v1/jobs/runs/{id}, /jobs/runs/{id}/facets?type=run|job and the job version
// the run made (its inputs and outputs), and the consumer's GET /api/v1/events?runId= for the events.

import { ApiError, jobVersion, runById, runEvents, runFacets } from "./api.js";
import { formatTime, h, runDuration, stateClass } from "./dom.js";
import { eventsTable } from "./events.js";
import { egeriaSummary, errorDetails, facetList } from "./facets.js";

function message(error) {
  return error instanceof ApiError ? error.message : String(error);
}

/** The run's inputs and outputs as [{namespace, name}] lists, from the run itself or its job version. */
async function datasetsOf(run, signal) {
  const ids = (list) =>
    list.map((item) => item.datasetVersionId ?? item).map(({ namespace, name }) => ({ namespace, name }));
  if (Array.isArray(run.inputDatasetVersions) || Array.isArray(run.outputDatasetVersions))
    return { inputs: ids(run.inputDatasetVersions ?? []), outputs: ids(run.outputDatasetVersions ?? []) };
  const version = run.jobVersion;
  if (!version?.version) return null;
  const found = await jobVersion(version.namespace, version.name, version.version, signal);
  return { inputs: found.inputs ?? [], outputs: found.outputs ?? [] };
}

/**
 * Fill ``section`` (heading ``title``) with what ``load`` builds, or say why it could not be loaded; when
 * ``load`` answers null there is nothing to show and the section goes.
 */
async function fill(section, title, load) {
  try {
    const content = await load();
    if (content === null) section.remove();
    else section.replaceChildren(h("h3", {}, title), ...[content].flat());
  } catch (error) {
    if (error.name === "AbortError") throw error;
    section.replaceChildren(h("h3", {}, title), h("p", { class: "muted" }, `Could not load: ${message(error)}`));
  }
}

function section(id, title) {
  return h("section", { id, class: "run-section" }, h("h3", {}, title), h("p", { class: "muted" }, "Loading…"));
}

/**
 * Show run ``runId``.
 * @param {{link: Function, signal: AbortSignal}} page
 * @returns {Promise<{title: string, status: string}>}
 */
export async function showRun(container, { runId }, { link, signal }) {
  const run = await runById(runId, signal);
  const job = run.jobVersion ?? null;
  const summary = h(
    "dl",
    { class: "run-summary", id: "run-summary" },
    h("dt", {}, "State"),
    h("dd", {}, h("span", { class: `state ${stateClass(run.state)}` }, run.state ?? "—")),
    h("dt", {}, "Started"),
    h("dd", { class: "started" }, formatTime(run.startedAt)),
    h("dt", {}, "Ended"),
    h("dd", { class: "ended" }, formatTime(run.endedAt)),
    h("dt", {}, "Duration"),
    h("dd", { class: "duration" }, runDuration(run)),
    run.nominalStartTime ? [h("dt", {}, "Nominal start"), h("dd", {}, formatTime(run.nominalStartTime))] : null,
    run.nominalEndTime ? [h("dt", {}, "Nominal end"), h("dd", {}, formatTime(run.nominalEndTime))] : null,
    job ? [h("dt", {}, "Job version"), h("dd", { class: "id" }, job.version ?? "—")] : null,
    h("dt", {}, "Run id"),
    h("dd", { class: "id" }, run.id ?? runId),
  );
  const actions = job
    ? h(
        "p",
        { class: "actions" },
        link(
          { view: "runs", jobNamespace: job.namespace, jobName: job.name },
          { id: "run-history-link" },
          "Run history of this job",
        ),
        link({ nodeId: `job:${job.namespace}:${job.name}` }, { id: "job-lineage-link" }, "Lineage of this job"),
      )
    : null;
  const problem = section("run-error", "Error");
  const egeria = section("run-egeria", "Egeria");
  const io = section("run-io", "Inputs and outputs");
  const facets = section("run-facets", "Run facets");
  const jobFacets = section("run-job-facets", "Job facets");
  const events = section("run-events", "Events");
  container.replaceChildren(
    h("h2", { id: "page-title", tabindex: "-1" }, job ? `Run of ${job.name}` : `Run ${runId}`),
    job ? h("p", { class: "ns" }, "Namespace: ", h("span", { class: "namespace" }, job.namespace)) : null,
    actions,
    summary,
    problem,
    egeria,
    io,
    facets,
    jobFacets,
    events,
  );

  const datasetList = (items, none) =>
    items.length
      ? h(
          "ul",
          { class: "datasets" },
          items.map((d) =>
            h(
              "li",
              {},
              link({ nodeId: `dataset:${d.namespace}:${d.name}` }, { class: "dataset-link" }, d.name),
              " ",
              h("span", { class: "ns" }, d.namespace),
            ),
          ),
        )
      : h("p", { class: "muted" }, none);
  const merged = runFacets(runId, "run", signal).then((answer) => answer.facets ?? {});
  await Promise.all([
    fill(problem, "Error", async () => {
      const details = errorDetails(await merged.catch(() => run.facets));
      if (details) return details;
      return run.state === "FAILED" ? h("p", { class: "muted" }, "No error message received.") : null;
    }),
    fill(egeria, "Egeria", async () => {
      const parts = egeriaSummary(await merged.catch(() => run.facets));
      return parts.length ? parts : null;
    }),
    fill(io, "Inputs and outputs", async () => {
      const found = await datasetsOf(run, signal);
      if (!found) return h("p", { class: "muted" }, "Not known: the run names no job version.");
      return [
        h("h4", {}, `Inputs (${found.inputs.length})`),
        datasetList(found.inputs, "None."),
        h("h4", {}, `Outputs (${found.outputs.length})`),
        datasetList(found.outputs, "None."),
      ];
    }),
    fill(facets, "Run facets", async () => facetList(await merged, "No run facets received.")),
    fill(jobFacets, "Job facets", async () =>
      facetList((await runFacets(runId, "job", signal)).facets, "No job facets received."),
    ),
    fill(events, "Events", async () => {
      const answer = await runEvents(runId, 100, signal);
      const caption = `${answer.events.length} of ${answer.totalCount} events of this run, newest first`;
      return answer.events.length
        ? eventsTable(answer.events, link, caption, "run-event")
        : h("p", { class: "muted" }, "No events.");
    }),
  ]);
  const title = job ? `Run of ${job.name}` : `Run ${runId}`;
  return { title, status: `${title}: ${run.state ?? "state unknown"}, ${runDuration(run)}.` };
}
