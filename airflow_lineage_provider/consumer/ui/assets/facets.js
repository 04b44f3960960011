// Facets shown readably: Egeria's information supply chain and governance action, the error message of a
// failed run with its stack trace, and every facet as a disclosure holding its JSON. Used by the details
// panel and the run view.

import { h } from "./dom.js";

export const SUPPLY_CHAIN = "egeria_informationSupplyChain";
export const GOVERNANCE_ACTION = "egeria_governanceAction";
export const ERROR_MESSAGE = "errorMessage";

/** A facet without the OpenLineage bookkeeping fields (_producer, _schemaURL). */
export function facetBody(facet) {
  return Object.fromEntries(Object.entries(facet ?? {}).filter(([key]) => !["_producer", "_schemaURL"].includes(key)));
}

/** The facets not named in ``names``. */
export function withoutFacets(facets, names) {
  return Object.fromEntries(Object.entries(facets ?? {}).filter(([name]) => !names.includes(name)));
}

/** Every facet as a disclosure holding its JSON; Egeria's facets are summarised by the caller. */
export function facetList(facets, emptyText) {
  const names = Object.keys(facets ?? {}).sort();
  if (!names.length) return h("p", { class: "muted" }, emptyText);
  return h(
    "div",
    { class: "facets" },
    names.map((name) => h("details", {}, h("summary", {}, name), h("pre", {}, JSON.stringify(facets[name], null, 2)))),
  );
}

/** Egeria's information supply chain and governance action run facets, as text (none: an empty list). */
export function egeriaSummary(facets) {
  const parts = [];
  const chain = facets?.[SUPPLY_CHAIN];
  if (chain?.iscQualifiedName) {
    parts.push(
      h(
        "p",
        { class: "egeria supply-chain" },
        h("strong", {}, "Information supply chain"),
        h("br"),
        h("span", { class: "value" }, chain.iscQualifiedName),
      ),
    );
  }
  const action = facets?.[GOVERNANCE_ACTION];
  if (action) {
    const fields = Object.entries(facetBody(action));
    parts.push(
      h(
        "div",
        { class: "egeria governance-action" },
        h("strong", {}, "Egeria governance action"),
        h(
          "dl",
          {},
          fields.map(([key, value]) => [
            h("dt", {}, key),
            h("dd", {}, typeof value === "object" ? JSON.stringify(value) : String(value)),
          ]),
        ),
      ),
    );
  }
  return parts;
}

/** The ``errorMessage`` run facet: the message, the language and the stack trace, or null. */
export function errorDetails(facets) {
  const error = facets?.[ERROR_MESSAGE];
  if (!error || typeof error !== "object") return null;
  const text = (value) => (value === undefined || value === null ? "" : String(value));
  return h(
    "div",
    { class: "error-details" },
    h("p", { class: "run-error" }, h("strong", {}, "Error: "), text(error.message) || "(no message)"),
    error.programmingLanguage ? h("p", { class: "muted" }, `Language: ${text(error.programmingLanguage)}`) : null,
    error.stackTrace
      ? h(
          "details",
          { open: true },
          h("summary", {}, "Stack trace"),
          h("pre", { class: "stack-trace", tabindex: "0" }, text(error.stackTrace)),
        )
      : h("p", { class: "muted" }, "No stack trace received."),
  );
}
