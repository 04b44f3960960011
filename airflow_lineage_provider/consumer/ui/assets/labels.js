// The text of a graph node: its name cut in the middle so that both the start and the distinguishing end
// stay readable, the full name on hover, and its namespace brought forward when another drawn node has the
// same name (or the same shortened label) in a different namespace.

const SVG = "http://www.w3.org/2000/svg";
const FONT_FAMILY = getComputedStyle(document.body).fontFamily;
export const LABEL_FONT = `600 13px ${FONT_FAMILY}`;
/** A name too long for the label font is drawn smaller (class ``condensed``) before it is cut. */
export const CONDENSED_FONT = `600 11px ${FONT_FAMILY}`;
export const SUB_FONT = `11px ${FONT_FAMILY}`;
/** Characters of a dotted or slashed name's first segment kept, at least, before the ellipsis. */
const MIN_HEAD = 6;
const SEPARATORS = /[./]/g;

const measure = document.createElement("canvas").getContext("2d");

/** Whether ``text`` takes at most ``room`` pixels in ``font``. */
function fitsIn(room, font) {
  return (text) => {
    measure.font = font;
    return measure.measureText(text).width <= room;
  };
}

/**
 * How ``text`` is cut when ``kept`` of its characters can be shown: ``[head, tail]`` lengths. A dotted or
 * slashed name (an Airflow ``dag.task.child`` job, ``schema.table``, a path) keeps its last two segments
 * whole before the rest of its first one (``example_task…build_customer_totals.join``); once both are
 * whole, more of the end is kept. Any other name keeps a third from the start and the rest from the end.
 */
function split(text, kept) {
  const cuts = [...text.matchAll(SEPARATORS)].map((m) => m.index);
  if (!cuts.length) {
    const head = Math.ceil(kept / 3);
    return [head, kept - head];
  }
  const firstEnd = cuts[0] + 1;
  const tail = text.length - (cuts.length >= 2 ? cuts[cuts.length - 2] + 1 : cuts[cuts.length - 1] + 1);
  const minHead = Math.min(firstEnd, MIN_HEAD, Math.ceil(kept / 3));
  const head = Math.min(firstEnd, Math.max(minHead, kept - tail));
  return [head, kept - head];
}

function cut(text, kept) {
  const [head, tail] = split(text, kept);
  return `${text.slice(0, head)}…${tail > 0 ? text.slice(text.length - tail) : ""}`;
}

/**
 * ``text`` shortened with an ellipsis in the middle until ``fits(candidate)``; unchanged if it fits.
 * Example: ``middleEllipsis("example_task_lineage.build_customer_totals.join", fits)`` →
 * ``"example…build_customer_totals.join"`` (as much as fits).
 */
export function middleEllipsis(text, fits) {
  if (fits(text)) return text;
  let low = 0;
  let high = text.length - 1;
  while (low < high) {
    const kept = Math.ceil((low + high) / 2);
    if (fits(cut(text, kept))) low = kept;
    else high = kept - 1;
  }
  return cut(text, low);
}

/** ``name`` as drawn in ``room`` pixels: ``{text, condensed}``, in the label font if it fits, else in the
 * condensed font, shortened if it must be. */
export function nodeLabel(name, room) {
  if (fitsIn(room, LABEL_FONT)(name)) return { text: name, condensed: false };
  return { text: middleEllipsis(name, fitsIn(room, CONDENSED_FONT)), condensed: true };
}

/** Per drawn graph and label room: the namespaces each name, and each shortened label, is drawn in. */
const drawnNamespaces = new WeakMap();

function namespacesByText(nodes, room) {
  let byRoom = drawnNamespaces.get(nodes);
  if (!byRoom) drawnNamespaces.set(nodes, (byRoom = new Map()));
  let byText = byRoom.get(room);
  if (!byText) {
    byText = new Map();
    const add = (text, namespace) => {
      if (!byText.has(text)) byText.set(text, new Set());
      byText.get(text).add(namespace);
    };
    for (const node of nodes) {
      add(`name:${node.name}`, node.namespace);
      add(`label:${nodeLabel(node.name, room).text}`, node.namespace);
    }
    byRoom.set(room, byText);
  }
  return byText;
}

/** Whether another of ``nodes`` has ``node``'s name, or reads the same shortened, in another namespace. */
export function collides(node, nodes, room) {
  const byText = namespacesByText(nodes, room);
  return (
    byText.get(`name:${node.name}`).size > 1 || byText.get(`label:${nodeLabel(node.name, room).text}`).size > 1
  );
}

function svg(tag, attrs, parent) {
  const el = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) el.setAttribute(key, String(value));
  parent.append(el);
  return el;
}

/**
 * Draw ``node``'s texts into its group ``g``: a ``<title>`` with the full name (shown on hover), the name
 * shortened to ``room`` pixels, and under it the kind and namespace — the namespace alone, emphasised, when
 * the name collides with another of the drawn ``nodes`` (see :func:`collides`).
 */
export function drawNodeLabels(g, node, nodes, { pad, room, width }) {
  svg("title", {}, g).textContent = `${node.kind} ${node.namespace} : ${node.name}`;
  const label = nodeLabel(node.name, room);
  svg("text", { class: label.condensed ? "label condensed" : "label", x: pad, y: 19 }, g).textContent = label.text;
  const clash = collides(node, nodes, room);
  const subRoom = width - pad - 10;
  const sub = svg("text", { class: clash ? "sub namespace collides" : "sub", x: pad, y: 35 }, g);
  if (clash) {
    sub.textContent = middleEllipsis(node.namespace, fitsIn(subRoom, `600 ${SUB_FONT}`));
    g.dataset.collides = "true";
  } else {
    const prefix = `${node.kind} · `;
    measure.font = SUB_FONT;
    const prefixWidth = measure.measureText(prefix).width;
    sub.textContent = prefix + middleEllipsis(node.namespace, fitsIn(subRoom - prefixWidth, SUB_FONT));
  }
}
