// The search box: an ARIA combobox listing jobs and datasets whose name contains the typed text.

import { ApiError, search } from "./api.js";
import { h, kindBadge } from "./dom.js";

export class SearchBox {
  /**
   * @param {HTMLInputElement} input @param {HTMLUListElement} list
   * @param {{onChoose: (nodeId: string) => void, namespace: () => string}} options
   */
  constructor(input, list, { onChoose, namespace }) {
    this.input = input;
    this.list = list;
    this.onChoose = onChoose;
    this.namespace = namespace;
    this.results = [];
    this.active = -1;
    this.timer = null;
    this.controller = null;
    input.addEventListener("input", () => this.schedule());
    input.addEventListener("keydown", (event) => this.key(event));
    input.addEventListener("blur", () => setTimeout(() => this.close(), 150));
    input.addEventListener("focus", () => this.results.length && this.open());
  }

  schedule() {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.run(), 200);
  }

  /** Search again (after the namespace filter changed). */
  refresh() {
    if (this.input.value.trim()) this.run();
  }

  async run() {
    const text = this.input.value.trim();
    this.controller?.abort();
    if (!text) {
      this.show([]);
      this.close();
      return;
    }
    this.controller = new AbortController();
    try {
      const answer = await search(text, this.namespace(), 20, this.controller.signal);
      this.show(answer.results, answer.totalCount);
    } catch (error) {
      if (error.name === "AbortError") return;
      this.show([], 0, error instanceof ApiError ? error.message : String(error));
    }
  }

  show(results, total = 0, problem = null) {
    this.results = results;
    this.active = -1;
    this.input.removeAttribute("aria-activedescendant");
    const items = results.map((result, i) =>
      h(
        "li",
        {
          id: `search-option-${i}`,
          role: "option",
          "aria-selected": "false",
          "data-node-id": result.nodeId,
          onmousedown: (event) => event.preventDefault(),
          onclick: () => this.choose(i),
        },
        kindBadge(result.type),
        h("span", { class: "name" }, result.name),
        h("span", { class: "ns" }, result.namespace),
      ),
    );
    if (!results.length && this.input.value.trim()) {
      items.push(
        h("li", { class: "empty", role: "option", "aria-disabled": "true" }, problem ?? "No job or dataset matches."),
      );
    } else if (total > results.length) {
      items.push(
        h(
          "li",
          { class: "empty", role: "option", "aria-disabled": "true" },
          `${total - results.length} more: type more of the name.`,
        ),
      );
    }
    this.list.replaceChildren(...items);
    if (document.activeElement === this.input && items.length) this.open();
  }

  open() {
    this.list.hidden = false;
    this.input.setAttribute("aria-expanded", "true");
  }

  close() {
    this.list.hidden = true;
    this.input.setAttribute("aria-expanded", "false");
  }

  move(step) {
    if (!this.results.length) return;
    this.open();
    this.active = (this.active + step + this.results.length) % this.results.length;
    for (const [i, li] of [...this.list.children].entries())
      li.setAttribute("aria-selected", String(i === this.active));
    const current = this.list.children[this.active];
    this.input.setAttribute("aria-activedescendant", current.id);
    current.scrollIntoView({ block: "nearest" });
  }

  choose(i) {
    const result = this.results[i];
    if (!result) return;
    this.close();
    this.input.value = result.name;
    this.onChoose(result.nodeId);
  }

  key(event) {
    switch (event.key) {
      case "ArrowDown":
        this.move(1);
        break;
      case "ArrowUp":
        this.move(-1);
        break;
      case "Enter":
        if (this.active >= 0) this.choose(this.active);
        else if (this.results.length) this.choose(0);
        else this.run();
        break;
      case "Escape":
        this.close();
        break;
      default:
        return;
    }
    event.preventDefault();
  }
}
