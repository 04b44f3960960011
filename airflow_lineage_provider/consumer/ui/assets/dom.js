// Small DOM and formatting helpers. Text always goes in as text nodes, never as HTML.

/**
 * Create an element: h("p", {class: "x", onclick: fn}, "text", child, ...). Attributes starting with
 * "on" become listeners; null/undefined/false attributes and children are skipped.
 */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") el.addEventListener(key.slice(2), value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** "job" or "dataset" from a graph node type (JOB, DATASET) or a search result type. */
export function kindOf(type) {
  return String(type).toLowerCase() === "job" ? "job" : "dataset";
}

/** A small badge naming the kind, so that kinds are told apart by text as well as colour. */
export function kindBadge(type) {
  const kind = kindOf(type);
  return h("span", { class: `kind ${kind}` }, kind);
}

/** A duration in milliseconds as "1 h 2 min", "2 min 5 s", "42 s" or "350 ms". */
export function formatDuration(ms) {
  if (ms === null || ms === undefined || Number.isNaN(ms)) return "—";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  let seconds = Math.round(ms / 1000);
  const hours = Math.floor(seconds / 3600);
  seconds -= hours * 3600;
  const minutes = Math.floor(seconds / 60);
  seconds -= minutes * 60;
  if (hours) return minutes ? `${hours} h ${minutes} min` : `${hours} h`;
  if (minutes) return seconds ? `${minutes} min ${seconds} s` : `${minutes} min`;
  return `${seconds} s`;
}

/** An ISO time as "2026-03-01 12:00:00 UTC" (times are stored in UTC; the page shows them as such). */
export function formatTime(iso) {
  if (!iso) return "—";
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return String(iso);
  return `${date.toISOString().slice(0, 19).replace("T", " ")} UTC`;
}

/** Milliseconds between two ISO times, or null. */
export function durationBetween(startIso, endIso) {
  if (!startIso || !endIso) return null;
  return new Date(endIso).getTime() - new Date(startIso).getTime();
}

/** Run states the page has colours for; anything else is shown as OTHER. */
export function stateClass(state) {
  return ["NEW", "RUNNING", "COMPLETED", "FAILED", "ABORTED"].includes(state) ? state : "OTHER";
}

/** How long a run took: its duration, "still running" (started, not ended), or "—". */
export function runDuration(run) {
  if (run.endedAt) return formatDuration(run.durationMs ?? durationBetween(run.startedAt, run.endedAt));
  return ["RUNNING", "NEW"].includes(run.state) ? "still running" : "—";
}
