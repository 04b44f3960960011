// Previous and next links of a paged list, with the text saying which items the page holds. The links
// are ordinary addresses of the page (the state is in the URL), so a page can be bookmarked.

import { h } from "./dom.js";

/**
 * @param {{label: string, range: string, previous: object | null, next: object | null,
 *          link: (params: object, attrs: object, ...children: any) => HTMLAnchorElement}} options
 *   ``previous`` and ``next`` are the address parameters of those pages (null: there is none).
 */
export function pager({ label, range, previous, next, link }) {
  const step = (params, text, rel) =>
    params
      ? link(params, { class: `pager-link ${rel}`, rel }, text)
      : h("span", { class: `pager-link ${rel} disabled` }, text);
  return h(
    "nav",
    { class: "pager", "aria-label": label },
    step(previous, "Previous page", "prev"),
    h("span", { class: "range" }, range),
    step(next, "Next page", "next"),
  );
}

/** Where the page before ``offset`` starts; past the end, the last page. */
export function previousOffset(offset, limit, total) {
  if (offset >= total && total > 0) return Math.floor((total - 1) / limit) * limit;
  return Math.max(0, offset - limit);
}

/** A "per page" select; ``onChoose`` gets the size chosen. */
export function pageSizeSelect(id, label, sizes, current, onChoose) {
  const choices = sizes.includes(current) ? sizes : [...sizes, current].sort((a, b) => a - b);
  return h(
    "label",
    { class: "page-size" },
    `${label} `,
    h(
      "select",
      { id, onchange: (event) => onChoose(Number(event.target.value)) },
      choices.map((size) => h("option", { value: size, selected: size === current }, String(size))),
    ),
  );
}
