// A left-to-right layered layout of a directed graph (the Sugiyama method, written for this page):
//   1. cycles are broken by reversing the back edges of a depth-first search;
//   2. longest-path layering; a source is then pulled right, next to its nearest consumer;
//   3. an edge spanning several layers is split by virtual nodes, one per layer it crosses;
//   4. crossings are reduced by barycentric ordering in alternating sweeps, keeping the best ordering;
//   5. each node is pulled toward the mean height of its neighbours, keeping order and spacing.
// Every step is linear or n·log n per sweep, so a few thousand nodes lay out in well under a second.

const DEFAULTS = { layerGap: 80, nodeGap: 14, virtualGap: 6, groupGap: 40, sweeps: 12, placementPasses: 8, margin: 24 };

/**
 * Lay out nodes of the given sizes joined by the given edges.
 * @param {{width: number, height: number}[]} sizes one entry per node (index = node number)
 * @param {[number, number][]} edges [source, target] pairs of node numbers
 * @param {{groups?: (string | null)[]}} options ``groups``: each node's group (null: none); the nodes of a group are
 *   kept next to each other in each layer, with ``groupGap`` (room for the group's box) between groups
 * @returns {{nodes: {x: number, y: number, layer: number}[], edges: ({points: number[][], reversed: boolean} | null)[],
 *   width: number, height: number, layers: number[][]}} top-left corner of each node; each input edge's
 *   polyline (null for self-loops and repeats); the real nodes of each layer, top to bottom
 */
export function layeredLayout(sizes, edges, options = {}) {
  const opt = { ...DEFAULTS, ...options };
  const n = sizes.length;
  const unique = uniqueEdges(n, edges);
  const reversed = breakCycles(n, unique.list);
  const dag = unique.list.map(([s, t], i) => (reversed[i] ? [t, s] : [s, t]));
  const layer = longestPathLayers(n, dag);
  const graph = splitLongEdges(n, sizes, layer, dag);
  const layers = orderLayers(graph, opt.sweeps);
  if (opt.groups) keepGroupsTogether(layers, opt.groups);
  const y = placeVertically(graph, layers, opt);
  const x = placeHorizontally(graph, layers, opt);
  let minY = Infinity;
  let maxY = -Infinity;
  for (let v = 0; v < graph.count; v++) {
    minY = Math.min(minY, y[v] - graph.height[v] / 2);
    maxY = Math.max(maxY, y[v] + graph.height[v] / 2);
  }
  if (graph.count === 0) minY = maxY = 0;
  const shift = opt.margin - minY;
  const nodes = [];
  for (let v = 0; v < n; v++) {
    nodes.push({ x: x[v], y: y[v] + shift - sizes[v].height / 2, layer: graph.layer[v] });
  }
  const paths = edges.map(() => null);
  unique.list.forEach((_, i) => {
    const chain = graph.chains[i];
    const points = chain.slice(1, -1).map((v) => [x[v], y[v] + shift]);
    const [s, t] = unique.list[i];
    const right = (v) => [x[v] + sizes[v].width, y[v] + shift];
    const left = (v) => [x[v], y[v] + shift];
    paths[unique.index[i]] = reversed[i]
      ? { points: [left(s), ...points.reverse(), right(t)], reversed: true }
      : { points: [right(s), ...points, left(t)], reversed: false };
  });
  let width = 0;
  for (let v = 0; v < n; v++) width = Math.max(width, x[v] + sizes[v].width);
  return {
    nodes,
    edges: paths,
    width: width + opt.margin,
    height: maxY - minY + 2 * opt.margin,
    layers: layers.map((ids) => ids.filter((v) => v < n)),
  };
}

function uniqueEdges(n, edges) {
  const seen = new Set();
  const list = [];
  const index = [];
  edges.forEach(([s, t], i) => {
    const key = s * n + t;
    if (s === t || seen.has(key)) return;
    seen.add(key);
    list.push([s, t]);
    index.push(i);
  });
  return { list, index };
}

function adjacency(n, edges) {
  const out = Array.from({ length: n }, () => []);
  const inc = Array.from({ length: n }, () => []);
  edges.forEach(([s, t], i) => {
    out[s].push(i);
    inc[t].push(i);
  });
  return { out, inc };
}

/** Flags the edges to reverse so that the graph has no cycle (back edges of an iterative DFS). */
function breakCycles(n, edges) {
  const { out, inc } = adjacency(n, edges);
  const reversed = new Uint8Array(edges.length);
  const state = new Uint8Array(n); // 0 new, 1 on the stack, 2 done
  const starts = [];
  for (let v = 0; v < n; v++) if (inc[v].length === 0) starts.push(v);
  for (let v = 0; v < n; v++) starts.push(v);
  for (const start of starts) {
    if (state[start]) continue;
    state[start] = 1;
    const stack = [[start, 0]];
    while (stack.length) {
      const top = stack[stack.length - 1];
      const v = top[0];
      if (top[1] < out[v].length) {
        const e = out[v][top[1]++];
        const w = edges[e][1];
        if (state[w] === 1) reversed[e] = 1;
        else if (state[w] === 0) {
          state[w] = 1;
          stack.push([w, 0]);
        }
      } else {
        state[v] = 2;
        stack.pop();
      }
    }
  }
  return reversed;
}

/** Layer of each node: the longest path reaching it, except sources, placed just before their consumers. */
function longestPathLayers(n, dag) {
  const { out, inc } = adjacency(n, dag);
  const layer = new Int32Array(n);
  const waiting = Int32Array.from(inc, (list) => list.length);
  const queue = [];
  for (let v = 0; v < n; v++) if (waiting[v] === 0) queue.push(v);
  for (let head = 0; head < queue.length; head++) {
    const v = queue[head];
    for (const e of out[v]) {
      const w = dag[e][1];
      layer[w] = Math.max(layer[w], layer[v] + 1);
      if (--waiting[w] === 0) queue.push(w);
    }
  }
  for (let v = 0; v < n; v++) {
    if (inc[v].length === 0 && out[v].length > 0) {
      let nearest = Infinity;
      for (const e of out[v]) nearest = Math.min(nearest, layer[dag[e][1]]);
      layer[v] = nearest - 1;
    }
  }
  return layer;
}

/** The layered graph: real nodes, then one virtual node per layer each long edge crosses. */
function splitLongEdges(n, sizes, realLayer, dag) {
  const layer = Array.from(realLayer);
  const width = sizes.map((s) => s.width);
  const height = sizes.map((s) => s.height);
  const up = Array.from({ length: n }, () => []);
  const down = Array.from({ length: n }, () => []);
  const chains = [];
  for (const [s, t] of dag) {
    const chain = [s];
    let previous = s;
    for (let l = layer[s] + 1; l < layer[t]; l++) {
      const v = layer.length;
      layer.push(l);
      width.push(0);
      height.push(2);
      up.push([]);
      down.push([]);
      down[previous].push(v);
      up[v].push(previous);
      chain.push(v);
      previous = v;
    }
    down[previous].push(t);
    up[t].push(previous);
    chain.push(t);
    chains.push(chain);
  }
  return { count: layer.length, real: n, layer, width, height, up, down, chains };
}

/** Nodes of each layer, top to bottom, with few edge crossings. */
function orderLayers(graph, sweeps) {
  let depth = 0; // not Math.max(...layers): spreading a long array overflows the call stack
  for (const l of graph.layer) depth = Math.max(depth, l + 1);
  const layers = Array.from({ length: depth }, () => []);
  // Initial order: depth first from the first layer, so that connected nodes start close together.
  const seen = new Uint8Array(graph.count);
  const visit = (start) => {
    const stack = [start];
    while (stack.length) {
      const v = stack.pop();
      if (seen[v]) continue;
      seen[v] = 1;
      layers[graph.layer[v]].push(v);
      for (let i = graph.down[v].length - 1; i >= 0; i--) stack.push(graph.down[v][i]);
      for (let i = graph.up[v].length - 1; i >= 0; i--) stack.push(graph.up[v][i]);
    }
  };
  for (let v = 0; v < graph.count; v++) if (!seen[v]) visit(v);
  const pos = new Float64Array(graph.count);
  const index = () => layers.forEach((ids) => ids.forEach((v, i) => (pos[v] = i)));
  index();
  let best = layers.map((ids) => ids.slice());
  let bestCrossings = totalCrossings(graph, layers, pos);
  const rounds = graph.count > 4000 ? Math.min(sweeps, 4) : sweeps;
  for (let round = 0; round < rounds && bestCrossings > 0; round++) {
    for (let l = 1; l < depth; l++) sortByBarycenter(layers[l], graph.up, pos);
    for (let l = depth - 2; l >= 0; l--) sortByBarycenter(layers[l], graph.down, pos);
    const crossings = totalCrossings(graph, layers, pos);
    if (crossings < bestCrossings) {
      bestCrossings = crossings;
      best = layers.map((ids) => ids.slice());
    }
  }
  return best;
}

function sortByBarycenter(ids, neighbours, pos) {
  const keys = new Map();
  for (const v of ids) {
    const list = neighbours[v];
    let sum = 0;
    for (const w of list) sum += pos[w];
    keys.set(v, list.length ? sum / list.length : pos[v]);
  }
  ids.sort((a, b) => keys.get(a) - keys.get(b) || pos[a] - pos[b]);
  ids.forEach((v, i) => (pos[v] = i));
}

/** Edge crossings between consecutive layers: inversions counted with a Fenwick tree. */
function totalCrossings(graph, layers, pos) {
  let total = 0;
  for (let l = 0; l + 1 < layers.length; l++) {
    const pairs = [];
    for (const v of layers[l]) for (const w of graph.down[v]) pairs.push([pos[v], pos[w]]);
    pairs.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    const size = layers[l + 1].length;
    const tree = new Int32Array(size + 1);
    let inserted = 0;
    for (const [, p] of pairs) {
      let atMost = 0;
      for (let i = p + 1; i > 0; i -= i & -i) atMost += tree[i];
      total += inserted - atMost;
      for (let i = p + 1; i <= size; i += i & -i) tree[i]++;
      inserted++;
    }
  }
  return total;
}

/** Each layer reordered so that the nodes of a group follow each other, where its first node was. */
function keepGroupsTogether(layers, groupOf) {
  for (const ids of layers) {
    const first = new Map();
    ids.forEach((v, i) => {
      const group = groupOf[v] ?? null;
      if (group !== null && !first.has(group)) first.set(group, i);
    });
    if (!first.size) continue;
    const at = new Map(ids.map((v, i) => [v, i]));
    const key = (v) => (groupOf[v] ?? null) === null ? at.get(v) : first.get(groupOf[v]);
    ids.sort((a, b) => key(a) - key(b) || at.get(a) - at.get(b));
  }
}

/** Vertical centre of every node: pulled toward its neighbours, never overlapping within a layer. */
function placeVertically(graph, layers, opt) {
  const y = new Float64Array(graph.count);
  const groupOf = (v) => (opt.groups && v < graph.real ? (opt.groups[v] ?? null) : null);
  const apart = (a, b) => (groupOf(a) !== groupOf(b) ? opt.groupGap : 0);
  const gap = (a, b) =>
    (graph.height[a] + graph.height[b]) / 2 +
    (a < graph.real && b < graph.real ? opt.nodeGap : opt.virtualGap) +
    apart(a, b);
  for (const ids of layers) {
    let at = 0;
    ids.forEach((v, i) => {
      if (i > 0) at += gap(ids[i - 1], v);
      y[v] = at;
    });
    for (const v of ids) y[v] -= at / 2;
  }
  const both = graph.up.map((list, v) => list.concat(graph.down[v]));
  for (let pass = 0; pass < opt.placementPasses; pass++) {
    const last = pass === opt.placementPasses - 1;
    const neighbours = last ? both : pass % 2 === 0 ? graph.up : graph.down;
    const order = pass % 2 === 0 ? layers : layers.slice().reverse();
    for (const ids of order) {
      const wanted = ids.map((v) => {
        const list = neighbours[v];
        if (!list.length) return y[v];
        let sum = 0;
        for (const w of list) sum += y[w];
        return sum / list.length;
      });
      pack(ids, wanted, y, gap);
    }
  }
  return y;
}

/** Positions as close to ``wanted`` as the order and spacing allow: the mean of a top-down and a bottom-up packing. */
function pack(ids, wanted, y, gap) {
  const k = ids.length;
  const down = new Float64Array(k);
  const up = new Float64Array(k);
  for (let i = 0; i < k; i++) down[i] = i ? Math.max(wanted[i], down[i - 1] + gap(ids[i - 1], ids[i])) : wanted[i];
  for (let i = k - 1; i >= 0; i--)
    up[i] = i < k - 1 ? Math.min(wanted[i], up[i + 1] - gap(ids[i], ids[i + 1])) : wanted[i];
  for (let i = 0; i < k; i++) y[ids[i]] = (down[i] + up[i]) / 2;
}

/** Left edge of every node: layers side by side, each as wide as its widest node. */
function placeHorizontally(graph, layers, opt) {
  const x = new Float64Array(graph.count);
  let left = opt.margin;
  for (const ids of layers) {
    let widest = 0;
    for (const v of ids) widest = Math.max(widest, graph.width[v]);
    for (const v of ids) x[v] = left + (widest - graph.width[v]) / 2;
    left += widest + opt.layerGap;
  }
  return x;
}
