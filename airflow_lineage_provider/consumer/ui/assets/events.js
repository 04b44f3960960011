// The events browser: the run events received in a time range, newest first, a page at a time, each with
// its raw JSON on demand. Read from Marquez's GET /api/v1/events/lineage, which filters by time only: the
// namespace and job filters are applied here, looking through the events a chunk at a time (see scan()).

import { lineageEvents, namespaces } from "./api.js";
import { formatTime, h } from "./dom.js";
import { pageSizeSelect, pager, previousOffset } from "./pager.js";

export const PAGE_SIZES = [10, 20, 50, 100];
/** Events asked for per request while filtering here, and the most looked through for one page. */
export const SCAN_CHUNK = 200;
export const SCAN_MAX = 2000;

/**
 * A time as typed in the filter (a ``datetime-local`` value, UTC) or given in the address, as the ISO time
 * the API reads (``2026-03-01T06:00:00+00:00``); null when it is not a time. Without a zone it is UTC.
 */
export function utcTime(text) {
  const value = String(text ?? "").trim();
  if (!value) return null;
  const zoned = /([zZ]|[+-]\d\d:?\d\d)$/.test(value) ? value : `${value}Z`;
  const date = new Date(zoned);
  if (Number.isNaN(date.getTime())) return null;
  const iso = date.toISOString();
  return `${iso.endsWith(".000Z") ? iso.slice(0, 19) : iso.slice(0, 23)}+00:00`;
}

/** The value of a ``datetime-local`` input (UTC, to the second) for an address time, or "". */
function inputTime(text) {
  const iso = utcTime(text);
  return iso ? iso.slice(0, 19) : "";
}

/** Whether an event names ``namespace`` (its job's, or one of its datasets') and its job's name contains ``job``. */
export function eventMatcher(namespace, job) {
  const part = String(job ?? "")
    .trim()
    .toLowerCase();
  if (!namespace && !part) return null;
  return (event) => {
    const datasets = [...(event.inputs ?? []), ...(event.outputs ?? [])];
    const named = [event.job?.namespace, ...datasets.map((d) => d?.namespace)];
    return (
      (!namespace || named.includes(namespace)) &&
      (!part ||
        String(event.job?.name ?? "")
          .toLowerCase()
          .includes(part))
    );
  };
}

/**
 * Matching events from server position ``start`` on (``step`` 1, newest first) or before it (``step`` -1),
 * up to ``limit`` of them, looking through at most SCAN_MAX events. Answers the events (newest first),
 * the positions of the first and after the last event looked through, and the total.
 */
async function scan(query, start, step, limit, match, signal) {
  const found = [];
  let low = start;
  let high = start;
  let total = 0;
  while (found.length < limit && high - low < SCAN_MAX) {
    const offset = step > 0 ? high : Math.max(0, low - SCAN_CHUNK);
    const size = step > 0 ? SCAN_CHUNK : low - offset;
    if (size <= 0) break;
    const page = await lineageEvents({ ...query, limit: size, offset }, signal);
    total = page.totalCount ?? 0;
    const events = page.events.map((event, i) => [offset + i, event]);
    if (step < 0) events.reverse();
    for (const [at, event] of events) {
      if (step > 0) high = at + 1;
      else low = at;
      if (match(event)) found.push(event);
      if (found.length === limit) break;
    }
    if (step > 0 && (page.events.length < size || high >= total)) break;
    if (step < 0 && low === 0) break;
  }
  if (step < 0) found.reverse();
  return { found, low, high, total };
}

/** A table of events (time, type, job, run) with a button per event showing its raw JSON. */
export function eventsTable(events, link, caption, idPrefix = "event") {
  const rows = events.flatMap((event, i) => {
    const jsonId = `${idPrefix}-json-${i}`;
    const job = event.job ?? {};
    const runId = event.run?.runId;
    const json = h(
      "tr",
      { class: "event-json", id: jsonId, hidden: true },
      h(
        "td",
        { colspan: "5" },
        h("pre", { tabindex: "0", "aria-label": `Raw JSON of event ${i + 1}` }, JSON.stringify(event, null, 2)),
      ),
    );
    const toggle = h(
      "button",
      {
        type: "button",
        class: "json-toggle",
        "aria-expanded": "false",
        "aria-controls": jsonId,
        onclick: () => {
          const open = json.hidden;
          json.hidden = !open;
          toggle.setAttribute("aria-expanded", String(open));
          toggle.textContent = open ? "Hide JSON" : "Show JSON";
        },
      },
      "Show JSON",
    );
    const jobCell = job.name
      ? [
          link({ view: "runs", jobNamespace: job.namespace ?? "", jobName: job.name }, { class: "job-link" }, job.name),
          " ",
          h("span", { class: "ns" }, job.namespace ?? ""),
        ]
      : "—";
    return [
      h(
        "tr",
        { class: "event", "data-run-id": runId ?? "", "data-event-time": event.eventTime ?? "" },
        h("td", { class: "time" }, formatTime(event.eventTime)),
        h("td", { class: "type" }, event.eventType ?? "—"),
        h("td", { class: "job" }, jobCell),
        h("td", { class: "id" }, runId ? link({ view: "run", runId }, { class: "run-link" }, runId) : "—"),
        h("td", {}, toggle),
      ),
      json,
    ];
  });
  return h(
    "table",
    { class: "listing events" },
    h("caption", {}, caption),
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        ["Time", "Type", "Job", "Run", "Event"].map((name) => h("th", { scope: "col" }, name)),
      ),
    ),
    h("tbody", {}, rows),
  );
}

function filterForm({ after, before, namespace, job, limit }, navigate, signal) {
  const field = (id, label, input) => h("label", { for: id }, label, input);
  const namespaceSelect = h(
    "select",
    { id: "events-namespace" },
    h("option", { value: "" }, "All namespaces"),
    namespace ? h("option", { value: namespace }, namespace) : null,
  );
  namespaceSelect.value = namespace;
  namespaces()
    .then((answer) => {
      if (signal.aborted) return;
      for (const ns of answer.namespaces)
        if (ns.name !== namespace) namespaceSelect.append(h("option", { value: ns.name }, ns.name));
    })
    .catch(() => {}); // the list is a convenience: the filter still works with the namespace given
  const form = h(
    "form",
    { id: "events-filter", class: "filters", role: "search", "aria-label": "Filter the events" },
    field(
      "events-after",
      "From (UTC)",
      h("input", { id: "events-after", type: "datetime-local", step: "1", value: inputTime(after) }),
    ),
    field(
      "events-before",
      "Until (UTC)",
      h("input", { id: "events-before", type: "datetime-local", step: "1", value: inputTime(before) }),
    ),
    field("events-namespace", "Namespace", namespaceSelect),
    field(
      "events-job",
      "Job name contains",
      h("input", { id: "events-job", type: "text", value: job, autocomplete: "off", spellcheck: "false" }),
    ),
    h("button", { type: "submit", id: "events-apply" }, "Apply"),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const value = (id) => form.querySelector(`#${id}`).value.trim();
    navigate({
      view: "events",
      after: value("events-after"),
      before: value("events-before"),
      namespace: value("events-namespace"),
      job: value("events-job"),
      limit,
      offset: 0,
    });
  });
  return form;
}

/**
 * Show a page of events: from ``offset`` (a position among the events of the time range), ``limit`` of
 * them, of namespace ``namespace`` and jobs whose name contains ``job`` when those are set.
 * @returns {Promise<{title: string, status: string}>}
 */
export async function showEvents(container, where, { link, navigate, signal }) {
  const { after, before, namespace, job, offset, limit } = where;
  const query = { after: utcTime(after) ?? after, before: utcTime(before) ?? before };
  const here = { view: "events", after, before, namespace, job, limit };
  const match = eventMatcher(namespace, job);
  let events;
  let range;
  let previous = null;
  let next = null;
  if (!match) {
    const page = await lineageEvents({ ...query, limit, offset }, signal);
    const total = page.totalCount ?? page.events.length;
    events = page.events;
    const last = offset + events.length;
    range = events.length
      ? `Events ${offset + 1}–${last} of ${total}`
      : total
        ? `No events from number ${offset + 1}: there are ${total}.`
        : "No events in this time range.";
    if (offset > 0) previous = { ...here, offset: previousOffset(offset, limit, total) };
    if (last < total) next = { ...here, offset: last };
  } else {
    const forward = await scan(query, offset, 1, limit, match, signal);
    events = forward.found;
    const looked = forward.high > offset ? `among events ${offset + 1}–${forward.high} of ${forward.total}` : "";
    range = `${events.length} matching ${events.length === 1 ? "event" : "events"} ${looked}`.trim();
    if (forward.high < forward.total) next = { ...here, offset: forward.high };
    if (offset > 0) {
      const backward = await scan(query, Math.min(offset, forward.total), -1, limit, match, signal);
      previous = { ...here, offset: backward.low };
    }
  }
  const filters = [
    after ? `from ${formatTime(utcTime(after) ?? after)}` : "",
    before ? `until ${formatTime(utcTime(before) ?? before)}` : "",
    namespace ? `naming namespace ${namespace}` : "",
    job ? `of jobs whose name contains “${job}”` : "",
  ].filter(Boolean);
  container.replaceChildren(
    h("h2", { id: "page-title", tabindex: "-1" }, "Events"),
    h(
      "p",
      { class: "muted" },
      "The OpenLineage run events received, newest first. Times are UTC; the range includes its start and " +
        "excludes its end.",
    ),
    filterForm(where, navigate, signal),
    h("p", { id: "events-filters", class: "muted" }, filters.length ? `Events ${filters.join(", ")}.` : "All events."),
    events.length ? eventsTable(events, link, range) : h("p", { id: "events-empty", class: "muted" }, range),
    h(
      "div",
      { class: "pager-bar" },
      pager({ label: "Pages of events", range, previous, next, link }),
      pageSizeSelect("events-page-size", "Events per page", PAGE_SIZES, limit, (size) =>
        navigate({ ...here, limit: size, offset: match ? offset : Math.floor(offset / size) * size }),
      ),
    ),
  );
  return { title: "Events", status: `${range}.` };
}
