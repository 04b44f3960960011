// The graph drawn in SVG: layered layout, pan and zoom, and keyboard navigation between nodes.
// Nodes are buttons with a roving tabindex: one Tab stop for the whole graph, arrow keys inside it.

import { stateClass } from "./dom.js";
import { drawNodeLabels, middleEllipsis } from "./labels.js";
import { layeredLayout } from "./layout.js";
import { airflowTaskUrl } from "./task-groups.js";

const SVG = "http://www.w3.org/2000/svg";
const NODE_WIDTH = 212;
const NODE_HEIGHT = 44;
/** The first view fits the whole graph unless that makes labels unreadably small: then it zooms on the root. */
const READABLE_SCALE = 0.6;
/** Room around a task's box of jobs: padding, and the header above its nodes. */
const BOX_PAD = 12;
const BOX_HEADER = 24;

function svg(tag, attrs = {}, parent = null) {
  const el = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) el.setAttribute(key, String(value));
  if (parent) parent.append(el);
  return el;
}

/** An SVG path through the points, with horizontal tangents at each point. */
function curve(points) {
  let d = `M${points[0][0].toFixed(1)},${points[0][1].toFixed(1)}`;
  for (let i = 1; i < points.length; i++) {
    const [x0, y0] = points[i - 1];
    const [x1, y1] = points[i];
    const dx = (x1 - x0) / 2;
    const at = (x, y) => `${x.toFixed(1)},${y.toFixed(1)}`;
    d += ` C${at(x0 + dx, y0)} ${at(x1 - dx, y1)} ${at(x1, y1)}`;
  }
  return d;
}

/** What a templated name's node says of its renderings, for screen readers. */
export function renderingsText({ count, latest, expanded }) {
  const newest = latest ? ` The latest is ${latest.name}, updated ${latest.updatedAt}.` : "";
  const action = expanded ? "Press E to collapse them into this node." : "Press E to expand them.";
  return `Template of ${count} rendering${count === 1 ? "" : "s"}${expanded ? ", drawn each" : ""}.${newest} ${action}`;
}

/** What a node says of the task box it is drawn in, or of the jobs it stands for, for screen readers. */
export function tasksText(node) {
  if (node.tasks) {
    const { count, collapsed } = node.tasks;
    const jobs = `${count} job${count === 1 ? "" : "s"}`;
    return collapsed
      ? `Task containing ${jobs}, collapsed into this node. Press E to expand them.`
      : `Task containing ${jobs}, drawn in its box. Press E to collapse them into this node.`;
  }
  return node.group ? `In task ${node.groupName}'s box. Press E to collapse the box.` : "";
}

export class GraphView {
  /**
   * @param {SVGSVGElement} element
   * @param {{onOpen: (id: string) => void, onToggleRenderings?: (id: string) => void,
   *   onToggleTasks?: (id: string) => void, airflowBase?: string | null}} callbacks ``onToggleRenderings``:
   *   a templated name's node asks to expand its renderings (or collapse them back): its badge clicked, or E;
   *   ``onToggleTasks``: a task's box (by the task's job id) asks to be collapsed or expanded: its header or badge
   *   clicked, or E on a node in it; ``airflowBase``: Airflow's UI when the page runs inside Airflow (task nodes
   *   then link to their task instance), else null
   */
  constructor(element, { onOpen, onToggleRenderings = () => {}, onToggleTasks = () => {}, airflowBase = null }) {
    this.svg = element;
    this.onOpen = onOpen;
    this.onToggleRenderings = onToggleRenderings;
    this.onToggleTasks = onToggleTasks;
    this.airflowBase = airflowBase;
    this.view = { x: 0, y: 0, k: 1 };
    this.model = null;
    this.bindPointer();
    this.bindKeys();
  }

  /** Draw ``model`` (see graph-model.js) around ``rootId``; returns the milliseconds layout and drawing took. */
  render(model, rootId) {
    const started = performance.now();
    this.model = model;
    this.rootId = rootId;
    const sizes = model.nodes.map(() => ({ width: NODE_WIDTH, height: NODE_HEIGHT }));
    const boxed = model.groups?.length
      ? model.nodes.map((node) => node.group ?? (node.tasks && !node.tasks.collapsed ? node.tasks.group : null))
      : null;
    this.layout = layeredLayout(sizes, model.edges, boxed ? { layerGap: 50, groups: boxed } : { layerGap: 50 });
    this.out = model.nodes.map(() => []);
    this.inc = model.nodes.map(() => []);
    for (const [from, to] of model.edges) {
      this.out[from].push(to);
      this.inc[to].push(from);
    }
    this.svg.replaceChildren();
    const defs = svg("defs", {}, this.svg);
    for (const id of ["arrow", "arrow-hl"]) {
      const marker = svg(
        "marker",
        { id, viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto" },
        defs,
      );
      svg("path", { d: "M0,0 L10,5 L0,10 z" }, marker);
    }
    this.viewport = svg("g", { class: "viewport" }, this.svg);
    const boxLayer = svg("g", { class: "task-boxes" }, this.viewport);
    for (const group of model.groups ?? []) this.drawTaskBox(group, boxLayer);
    const edgeLayer = svg("g", { class: "edges", "aria-hidden": "true" }, this.viewport);
    const nodeLayer = svg("g", { class: "nodes" }, this.viewport);
    this.edgeEls = model.edges.map(([from, to, declaredOnly], i) => {
      const path = this.layout.edges[i];
      if (!path) return null;
      return svg(
        "path",
        {
          class: `edge${path.reversed ? " back" : ""}${declaredOnly ? " declared-only" : ""}`,
          d: curve(path.points),
          "marker-end": "url(#arrow)",
          "data-from": model.nodes[from].id,
          "data-to": model.nodes[to].id,
        },
        edgeLayer,
      );
    });
    const fragment = document.createDocumentFragment();
    this.nodeEls = model.nodes.map((node, i) => this.drawNode(node, i, fragment));
    nodeLayer.append(fragment);
    const rootName = model.nodes[model.index.get(rootId)]?.name ?? rootId;
    const size = `${model.nodes.length} nodes, ${model.edges.length} edges`;
    this.svg.setAttribute("aria-label", `Lineage graph around ${rootName}: ${size}`);
    this.overview();
    return performance.now() - started;
  }

  drawNode(node, i, parent) {
    const { x, y } = this.layout.nodes[i];
    const isRoot = node.id === this.rootId;
    const run = node.kind === "job" ? node.data.latestRun : null;
    const kind = node.kind === "job" ? "Job" : "Dataset";
    const state = run ? ` Latest run ${run.state}.` : "";
    const links = `${this.inc[i].length} upstream, ${this.out[i].length} downstream.${isRoot ? " Starting node." : ""}`;
    const declared = node.declaredOnly ? " Declared only: no run has named it." : "";
    const renderings = node.renderings ? ` ${renderingsText(node.renderings)}` : "";
    const pattern = node.renderings ? ` pattern${node.renderings.expanded ? " expanded" : ""}` : "";
    const tasks = node.tasks || node.group ? ` ${tasksText(node)}` : "";
    const task = node.tasks ? ` task${node.tasks.collapsed ? " collapsed" : ""}` : "";
    const contained = `${pattern}${node.group ? " contained" : ""}${task}`;
    const g = svg(
      "g",
      {
        class: `node ${node.kind}${isRoot ? " root" : ""}${node.declaredOnly ? " declared-only" : ""}${contained}`,
        transform: `translate(${x.toFixed(1)},${y.toFixed(1)})`,
        tabindex: isRoot ? 0 : -1,
        role: "button",
        "data-id": node.id,
        "aria-label":
          `${kind} ${node.name} in namespace ${node.namespace}.${state} ${links}${declared}${renderings}` + tasks,
      },
      parent,
    );
    svg("rect", { class: "ring", x: -5, y: -5, width: NODE_WIDTH + 10, height: NODE_HEIGHT + 10, rx: 10 }, g);
    svg("rect", { class: "focus-ring", x: -9, y: -9, width: NODE_WIDTH + 18, height: NODE_HEIGHT + 18, rx: 12 }, g);
    svg(
      "rect",
      { class: "shape", width: NODE_WIDTH, height: NODE_HEIGHT, rx: node.kind === "job" ? NODE_HEIGHT / 2 : 4 },
      g,
    );
    const pad = node.kind === "job" ? 18 : 10;
    const room = NODE_WIDTH - pad - (run ? 24 : 10);
    drawNodeLabels(g, node, this.model.nodes, { pad, room, width: NODE_WIDTH });
    if (run) svg("circle", { class: `state-dot ${stateClass(run.state)}`, cx: NODE_WIDTH - 14, cy: 14, r: 5 }, g);
    if (node.renderings) this.drawRenderingsBadge(node.renderings, g);
    if (node.tasks?.collapsed) this.drawTasksBadge(node.tasks, g);
    if (node.airflowTask && this.airflowBase !== null) this.drawAirflowLink(node.airflowTask, g, -9);
    return g;
  }

  /** The box around an expanded task's jobs (and the task's own node when drawn), under a header naming the
   * task that collapses it; inside Airflow, the header links to the task instance when the task's node is not
   * drawn (the node then links there itself). */
  drawTaskBox(group, parent) {
    const drawn = group.task >= 0 ? [...group.members, group.task] : group.members;
    let left = Infinity;
    let top = Infinity;
    let right = -Infinity;
    let bottom = -Infinity;
    for (const i of drawn) {
      const { x, y } = this.layout.nodes[i];
      left = Math.min(left, x);
      top = Math.min(top, y);
      right = Math.max(right, x + NODE_WIDTH);
      bottom = Math.max(bottom, y + NODE_HEIGHT);
    }
    const box = { x: left - BOX_PAD, y: top - BOX_PAD - BOX_HEADER, width: right - left + 2 * BOX_PAD };
    box.height = bottom - top + 2 * BOX_PAD + BOX_HEADER;
    const at = `translate(${box.x},${box.y})`;
    const g = svg("g", { class: "task-box", "data-group": group.id, transform: at }, parent);
    svg("rect", { class: "frame", width: box.width, height: box.height, rx: 8 }, g);
    const count = group.members.length;
    const header = svg(
      "g",
      {
        class: "task-toggle",
        role: "button",
        tabindex: -1,
        "data-group": group.id,
        "aria-expanded": "true",
        "aria-label": `Task ${group.name}: ${count} job${count === 1 ? "" : "s"}. Collapse them into the task's node.`,
      },
      g,
    );
    svg("title", {}, header).textContent = `${group.namespace} : ${group.name}`;
    const room = box.width - 16 - (group.airflowTask && group.task < 0 && this.airflowBase !== null ? 70 : 0);
    const label = svg("text", { class: "task-name", x: 8, y: 17 }, header);
    label.textContent = `▾ ${fitText(group.name, room)}`;
    if (group.airflowTask && group.task < 0 && this.airflowBase !== null)
      this.drawAirflowLink(group.airflowTask, g, 3, box.width - 66);
  }

  /** The badge on a task's node whose jobs are collapsed into it: ``▸ count jobs``; clicking it (or E) expands
   * them. */
  drawTasksBadge({ count }, parent) {
    const text = `▸ ${count} job${count === 1 ? "" : "s"}`;
    const width = Math.max(34, 10 + 6.5 * text.length);
    const badge = svg("g", { class: "tasks-badge", transform: `translate(${NODE_WIDTH - width - 6},-9)` }, parent);
    svg("title", {}, badge).textContent = `Expand the ${count} job${count === 1 ? "" : "s"} of this task`;
    svg("rect", { width, height: 18, rx: 9 }, badge);
    svg("text", { x: width / 2, y: 13, "text-anchor": "middle" }, badge).textContent = text;
  }

  /** A link to the Airflow task instance ``task`` in Airflow's UI (the whole window, not the frame the page may
   * be embedded in). */
  drawAirflowLink(task, parent, y, x = 8) {
    const href = airflowTaskUrl(this.airflowBase, task);
    const link = svg(
      "a",
      {
        class: "airflow-link",
        href,
        target: "_top",
        "aria-label": `Task ${task.taskId} of DAG ${task.dagId} in Airflow`,
        transform: `translate(${x},${y})`,
      },
      parent,
    );
    svg("title", {}, link).textContent = task.runId
      ? `Open task ${task.taskId} of run ${task.runId} in Airflow`
      : `Open task ${task.taskId} of DAG ${task.dagId} in Airflow`;
    svg("rect", { width: 62, height: 18, rx: 9 }, link);
    svg("text", { x: 31, y: 13, "text-anchor": "middle" }, link).textContent = "Airflow ↗";
  }

  /** The badge on a templated name's node: ``× count`` while its renderings are collapsed into it, ``−`` once
   * they are drawn; clicking it (or E on the node) expands or collapses them. */
  drawRenderingsBadge(renderings, parent) {
    const { count, latest, expanded } = renderings;
    const text = expanded ? "− collapse" : `× ${count} rendering${count === 1 ? "" : "s"}`;
    const width = Math.max(34, 10 + 6.5 * text.length);
    const badge = svg("g", { class: "renderings-badge", transform: `translate(${NODE_WIDTH - width - 6},-9)` }, parent);
    const newest = latest ? ` (the latest ${latest.name}, updated ${latest.updatedAt})` : "";
    svg("title", {}, badge).textContent = expanded
      ? "Collapse the renderings into this node"
      : `Expand the ${count} renderings${newest}`;
    svg("rect", { width, height: 18, rx: 9 }, badge);
    svg("text", { x: width / 2, y: 13, "text-anchor": "middle" }, badge).textContent = text;
  }

  nodeElement(id) {
    const i = this.model?.index.get(id);
    return i === undefined ? null : this.nodeEls[i];
  }

  /** Mark the node whose details are open. */
  select(id) {
    for (const el of this.svg.querySelectorAll(".node.selected")) el.classList.remove("selected");
    this.nodeElement(id)?.classList.add("selected");
  }

  /** Highlight nodes (ids) and the edges between them; an empty set clears the highlight. */
  highlight(ids) {
    this.nodeEls?.forEach((el, i) => el.classList.toggle("hl", ids.has(this.model.nodes[i].id)));
    this.edgeEls?.forEach((el) => {
      if (!el) return;
      const on = ids.has(el.dataset.from) && ids.has(el.dataset.to);
      el.classList.toggle("hl", on);
      el.setAttribute("marker-end", on ? "url(#arrow-hl)" : "url(#arrow)");
    });
  }

  /** Move keyboard focus to a node, panning it into view. */
  focus(id) {
    const el = this.nodeElement(id);
    if (!el) return;
    for (const other of this.svg.querySelectorAll('.node[tabindex="0"]')) other.setAttribute("tabindex", "-1");
    el.setAttribute("tabindex", "0");
    el.focus();
    this.reveal(this.model.index.get(id));
  }

  reveal(i) {
    const { x, y } = this.layout.nodes[i];
    const { width, height } = this.svg.getBoundingClientRect();
    const sx = this.view.x + x * this.view.k;
    const sy = this.view.y + y * this.view.k;
    const margin = 20;
    if (
      sx < margin ||
      sy < margin ||
      sx + NODE_WIDTH * this.view.k > width - margin ||
      sy + NODE_HEIGHT * this.view.k > height - margin
    ) {
      this.view.x = width / 2 - (x + NODE_WIDTH / 2) * this.view.k;
      this.view.y = height / 2 - (y + NODE_HEIGHT / 2) * this.view.k;
      this.apply();
    }
  }

  apply() {
    this.viewport?.setAttribute(
      "transform",
      `translate(${this.view.x.toFixed(1)},${this.view.y.toFixed(1)}) scale(${this.view.k.toFixed(4)})`,
    );
  }

  /** Scale and centre the whole graph in the view (never enlarged past 1:1). */
  fit() {
    if (!this.layout) return;
    const { width, height } = this.svg.getBoundingClientRect();
    const k = Math.max(0.05, Math.min(1, width / this.layout.width, height / this.layout.height));
    this.view = { k, x: (width - this.layout.width * k) / 2, y: (height - this.layout.height * k) / 2 };
    this.apply();
  }

  /** The first view: the whole graph if it is readable that way, else the root at a readable scale. */
  overview() {
    this.fit();
    const root = this.model.index.get(this.rootId);
    if (this.view.k >= READABLE_SCALE || root === undefined) return;
    const { width, height } = this.svg.getBoundingClientRect();
    const { x, y } = this.layout.nodes[root];
    const k = READABLE_SCALE;
    this.view = { k, x: width / 2 - (x + NODE_WIDTH / 2) * k, y: height / 2 - (y + NODE_HEIGHT / 2) * k };
    this.apply();
  }

  /** Zoom by ``factor`` around a point of the view (its centre by default). */
  zoom(factor, cx = null, cy = null) {
    const box = this.svg.getBoundingClientRect();
    const px = cx ?? box.width / 2;
    const py = cy ?? box.height / 2;
    const k = Math.min(4, Math.max(0.05, this.view.k * factor));
    this.view.x = px - ((px - this.view.x) * k) / this.view.k;
    this.view.y = py - ((py - this.view.y) * k) / this.view.k;
    this.view.k = k;
    this.apply();
  }

  bindPointer() {
    let drag = null;
    this.svg.addEventListener("pointerdown", (event) => {
      const node = event.target.closest?.(".node, .task-toggle, .airflow-link");
      if (node || event.button !== 0) return;
      drag = { x: event.clientX, y: event.clientY, vx: this.view.x, vy: this.view.y };
      this.svg.setPointerCapture(event.pointerId);
      this.svg.classList.add("panning");
    });
    this.svg.addEventListener("pointermove", (event) => {
      if (!drag) return;
      this.view.x = drag.vx + event.clientX - drag.x;
      this.view.y = drag.vy + event.clientY - drag.y;
      this.apply();
    });
    const end = () => {
      drag = null;
      this.svg.classList.remove("panning");
    };
    this.svg.addEventListener("pointerup", end);
    this.svg.addEventListener("pointercancel", end);
    this.svg.addEventListener(
      "wheel",
      (event) => {
        event.preventDefault();
        const box = this.svg.getBoundingClientRect();
        this.zoom(Math.exp(-event.deltaY * 0.0015), event.clientX - box.left, event.clientY - box.top);
      },
      { passive: false },
    );
    this.svg.addEventListener("click", (event) => {
      if (event.target.closest?.(".airflow-link")) return; // followed by the browser
      const toggle = event.target.closest?.(".task-toggle");
      if (toggle) {
        this.onToggleTasks(toggle.dataset.group);
        return;
      }
      const node = event.target.closest?.(".node");
      if (!node) return;
      if (event.target.closest(".tasks-badge")) {
        this.onToggleTasks(this.model.nodes[this.model.index.get(node.dataset.id)].tasks.group);
        return;
      }
      if (event.target.closest(".renderings-badge")) {
        this.onToggleRenderings(node.dataset.id);
        return;
      }
      this.focus(node.dataset.id);
      this.onOpen(node.dataset.id);
    });
  }

  bindKeys() {
    this.svg.addEventListener("keydown", (event) => {
      if (event.altKey || event.ctrlKey || event.metaKey) return;
      if (event.target.closest?.(".airflow-link")) return;
      const toggle = event.target.closest?.(".task-toggle");
      if (toggle && (event.key === "Enter" || event.key === " ")) {
        event.preventDefault();
        this.onToggleTasks(toggle.dataset.group);
        return;
      }
      const node = event.target.closest?.(".node");
      const i = node ? this.model.index.get(node.dataset.id) : undefined;
      let target;
      switch (event.key) {
        case "Enter":
        case " ":
          if (i === undefined) return;
          this.onOpen(node.dataset.id);
          break;
        case "ArrowRight":
          target = i === undefined ? undefined : this.neighbour(i, this.out[i], +1);
          break;
        case "ArrowLeft":
          target = i === undefined ? undefined : this.neighbour(i, this.inc[i], -1);
          break;
        case "ArrowUp":
        case "ArrowDown":
          target = i === undefined ? undefined : this.sibling(i, event.key === "ArrowDown" ? 1 : -1);
          break;
        case "Home":
          target = this.model?.index.get(this.rootId);
          break;
        case "e":
        case "E": {
          const shown = i === undefined ? null : this.model.nodes[i];
          if (shown?.renderings) this.onToggleRenderings(node.dataset.id);
          else if (shown?.tasks || shown?.group) this.onToggleTasks(shown.tasks?.group ?? shown.group);
          else return;
          break;
        }
        case "+":
        case "=":
          this.zoom(1.25);
          break;
        case "-":
        case "_":
          this.zoom(0.8);
          break;
        case "0":
          this.fit();
          break;
        default:
          return;
      }
      event.preventDefault();
      if (target !== undefined) this.focus(this.model.nodes[target].id);
    });
  }

  /** The linked node nearest in height to node ``i`` (else the nearest node of the next layer that way). */
  neighbour(i, linked, step) {
    const y = this.layout.nodes[i].y;
    const byHeight = (list) =>
      list.reduce(
        (best, v) =>
          best === undefined || Math.abs(this.layout.nodes[v].y - y) < Math.abs(this.layout.nodes[best].y - y)
            ? v
            : best,
        undefined,
      );
    if (linked.length) return byHeight(linked);
    const layers = this.layout.layers;
    for (let l = this.layout.nodes[i].layer + step; l >= 0 && l < layers.length; l += step) {
      if (layers[l].length) return byHeight(layers[l]);
    }
    return undefined;
  }

  sibling(i, step) {
    const column = this.layout.layers[this.layout.nodes[i].layer];
    const at = column.indexOf(i) + step;
    return at >= 0 && at < column.length ? column[at] : undefined;
  }
}

const fitMeasure = document.createElement("canvas").getContext("2d");

/** ``text`` cut in the middle to fit ``room`` pixels in the task header's font. */
function fitText(text, room) {
  fitMeasure.font = `600 12px ${getComputedStyle(document.body).fontFamily}`;
  return middleEllipsis(text, (candidate) => fitMeasure.measureText(`▾ ${candidate}`).width <= room);
}
