// The pipeline graph: one box per node in columns by topological depth, with
// its rates, watermark and backpressure; one curve per input, labelled with
// its partitioning.

import { $, clip, s } from './dom.js';
import { clamp01, fmtClock, fmtCount, fmtDateTime, fmtPercent, fmtRate, num, plural } from './format.js';

const state = {
  key: '', // the topology drawn; the graph is rebuilt only when it changes
  parts: new Map(), // node id → the elements updated in place
};

const NODE_W = 196;
const NODE_H = 104;
const COL_GAP = 124; // wide enough for a partitioning label
const ROW_GAP = 28;
const PAD = 14;

// layout places each node in the column of its topological depth (longest
// path from a node without inputs). Sources stack from the top; every other
// node goes to the mean height of its inputs, pushed down only as far as
// needed to clear the node above it, so edges run mostly straight and rarely
// pass behind a box.
function layout(nodes) {
  const byId = new Map(nodes.map((n) => [n.id, n]));
  const depth = new Map();
  const visiting = new Set();
  const depthOf = (id) => {
    if (depth.has(id)) return depth.get(id);
    if (visiting.has(id)) return 0; // a cycle: break it here
    visiting.add(id);
    const n = byId.get(id);
    let d = 0;
    for (const inp of (n && n.inputs) || []) {
      if (byId.has(inp.from)) d = Math.max(d, depthOf(inp.from) + 1);
    }
    visiting.delete(id);
    depth.set(id, d);
    return d;
  };
  nodes.forEach((n) => depthOf(n.id));

  const columns = [];
  nodes.forEach((n, i) => {
    const d = depth.get(n.id);
    (columns[d] = columns[d] || []).push({ node: n, index: i, want: 0 });
  });
  const top = new Map(); // node id → y of its box
  columns.forEach((col) => {
    if (!col) return;
    for (const c of col) {
      const ys = (c.node.inputs || []).map((inp) => top.get(inp.from)).filter((y) => y !== undefined);
      c.want = ys.length ? ys.reduce((a, b) => a + b, 0) / ys.length : -Infinity;
    }
    col.sort((a, b) => a.want - b.want || a.index - b.index);
    let next = 0;
    for (const c of col) {
      const y = Math.max(next, c.want === -Infinity ? next : c.want);
      top.set(c.node.id, y);
      next = y + NODE_H + ROW_GAP;
    }
  });

  const bottom = Math.max(...[...top.values()].map((y) => y + NODE_H));
  const height = PAD * 2 + bottom;
  const width = PAD * 2 + columns.length * NODE_W + Math.max(0, columns.length - 1) * COL_GAP;
  const pos = new Map();
  columns.forEach((col, d) => {
    if (!col) return;
    for (const c of col) pos.set(c.node.id, { x: PAD + d * (NODE_W + COL_GAP), y: PAD + top.get(c.node.id), depth: d });
  });
  return { pos, width, height };
}

function graphKey(nodes) {
  return JSON.stringify(nodes.map((n) => [n.id, n.kind, n.describe, n.parallelism, (n.inputs || []).map((i) => [i.from, i.partitioning])]));
}

// renderGraph draws nodes (as /api/v1/pipeline lists them) into #graph.
export function renderGraph(nodes) {
  const svgEl = $('graph');
  const key = graphKey(nodes);
  if (key !== state.key) {
    state.key = key;
    buildGraph(svgEl, nodes);
  }
  for (const n of nodes) updateNode(n);
}

function buildGraph(svgEl, nodes) {
  state.parts = new Map();
  if (!nodes.length) {
    svgEl.replaceChildren(s('text', { x: 16, y: 30, class: 'empty-text' }, 'The pipeline has no nodes yet.'));
    fitGraph(svgEl, 320, 50);
    return;
  }
  const { pos, width, height } = layout(nodes);
  fitGraph(svgEl, width, height);
  svgEl.setAttribute('aria-label', 'Pipeline graph: ' + nodes.length + ' ' + plural(nodes.length, 'node', 'nodes'));

  const defs = s('defs', {},
    s('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' },
      s('path', { d: 'M0,0 L10,5 L0,10 z', class: 'arrow' })));
  const edges = s('g', { class: 'edges' });
  const labels = s('g', { class: 'edge-labels' });
  for (const n of nodes) {
    const to = pos.get(n.id);
    const inputs = (n.inputs || []).filter((inp) => pos.has(inp.from));
    inputs.forEach((inp, i) => {
      const from = pos.get(inp.from);
      const x1 = from.x + NODE_W;
      const y1 = from.y + NODE_H / 2;
      const x2 = to.x - 2;
      const y2 = to.y + NODE_H / 2 + (i - (inputs.length - 1) / 2) * 24;
      const dx = Math.max(40, (x2 - x1) / 2);
      const d = `M${x1},${y1} C${x1 + dx},${y1} ${x2 - dx},${y2} ${x2},${y2}`;
      const part = inp.partitioning || '';
      edges.append(s('path', {
        d, class: 'edge', 'marker-end': 'url(#arrow)', 'data-edge-from': inp.from, 'data-edge-to': n.id, 'data-partitioning': part,
      }, s('title', {}, `${inp.from} → ${n.id}: ${part}`)));
      if (part) {
        // The label sits on the curve in the gap before the target's
        // column, where no node can cover it.
        const lx = x2 - COL_GAP / 2;
        const ly = bezierYAt(lx, [x1, y1], [x1 + dx, y1], [x2 - dx, y2], [x2, y2]);
        // Of several inputs, the lower half is labelled below its line.
        const below = inputs.length > 1 && i >= inputs.length / 2;
        labels.append(s('text', { x: lx, y: below ? ly + 14 : ly - 5, class: 'edge-label', 'text-anchor': 'middle' }, clip(part, 18)));
      }
    });
  }

  const nodeLayer = s('g', { class: 'nodes' });
  for (const n of nodes) {
    const p = pos.get(n.id);
    const kind = n.kind || 'operator';
    const title = s('title', {});
    const rates = s('text', { x: 14, y: 63, class: 'node-rates' });
    const watermark = s('text', { x: 14, y: 80, class: 'node-sub' });
    const bpFill = s('rect', { x: 14, y: 89, height: 7, rx: 3.5, width: 0, class: 'bp-fill' });
    const bpText = s('text', { x: NODE_W - 12, y: 96, class: 'bp-text', 'text-anchor': 'end' });
    const g = s('g', {
      class: 'node', 'data-node-id': n.id, 'data-kind': kind, 'data-depth': p.depth, 'data-parallelism': num(n.parallelism),
      transform: `translate(${p.x},${p.y})`, tabindex: 0, role: 'img',
    },
    title,
    s('rect', { width: NODE_W, height: NODE_H, rx: 10, class: 'node-box' }),
    s('rect', { width: 5, height: NODE_H - 20, x: 0, y: 10, rx: 2.5, class: 'node-stripe ' + kind }),
    s('text', { x: 14, y: 23, class: 'node-id' }, clip(n.id, 18)),
    s('text', { x: NODE_W - 12, y: 23, class: 'node-par', 'text-anchor': 'end' }, kind + ' ×' + num(n.parallelism)),
    s('text', { x: 14, y: 41, class: 'node-sub' }, clip(n.describe || '', 30)),
    rates, watermark,
    s('rect', { x: 14, y: 89, height: 7, rx: 3.5, width: NODE_W - 72, class: 'bp-track' }),
    bpFill, bpText);
    nodeLayer.append(g);
    state.parts.set(n.id, { g, title, rates, watermark, bpFill, bpText });
  }
  svgEl.replaceChildren(defs, edges, nodeLayer, labels);
}

// fitGraph sizes the graph to its panel: scaled down to fit, but never below
// 70% (the panel scrolls instead) nor above its natural size.
function fitGraph(svgEl, width, height) {
  svgEl.removeAttribute('width');
  svgEl.removeAttribute('height');
  svgEl.setAttribute('viewBox', `0 0 ${width} ${height}`);
  svgEl.style.width = '100%';
  svgEl.style.maxWidth = width + 'px';
  svgEl.style.minWidth = Math.round(width * 0.7) + 'px';
}

// bezierYAt is the y of the cubic Bézier curve p0..p3 where its x is x; the
// curves drawn here have x increasing along them, so bisection finds it.
function bezierYAt(x, p0, p1, p2, p3) {
  const at = (t, i) => {
    const u = 1 - t;
    return u * u * u * p0[i] + 3 * u * u * t * p1[i] + 3 * u * t * t * p2[i] + t * t * t * p3[i];
  };
  let lo = 0;
  let hi = 1;
  for (let k = 0; k < 30; k++) {
    const mid = (lo + hi) / 2;
    if (at(mid, 0) < x) lo = mid;
    else hi = mid;
  }
  return at((lo + hi) / 2, 1);
}

function updateNode(n) {
  const part = state.parts.get(n.id);
  if (!part) return;
  const kind = n.kind || 'operator';
  const inRate = fmtRate(n.records_in_per_second);
  const outRate = fmtRate(n.records_out_per_second);
  let rates;
  if (kind === 'source') rates = 'out ' + outRate;
  else if (kind === 'sink') rates = 'in ' + inRate;
  else rates = 'in ' + inRate + '  →  out ' + outRate;
  if (part.rates.textContent !== rates) part.rates.textContent = rates;
  const wm = n.watermark ? 'watermark ' + fmtClock(n.watermark) : 'no watermark';
  if (part.watermark.textContent !== wm) part.watermark.textContent = wm;

  const bp = clamp01(n.backpressure_ratio);
  part.bpFill.setAttribute('width', ((NODE_W - 72) * bp).toFixed(1));
  part.bpFill.setAttribute('class', 'bp-fill ' + (bp >= 0.5 ? 'bp-high' : bp >= 0.1 ? 'bp-warn' : 'bp-ok'));
  part.bpText.textContent = 'bp ' + fmtPercent(bp);

  const g = part.g;
  g.dataset.recordsInPerSecond = num(n.records_in_per_second);
  g.dataset.recordsOutPerSecond = num(n.records_out_per_second);
  g.dataset.backpressure = bp;
  const summary = `${n.id} (${kind}, parallelism ${num(n.parallelism)}): ${n.describe || ''}\n` +
    `in ${inRate} (${fmtCount(n.records_in)} total), out ${outRate} (${fmtCount(n.records_out)} total)\n` +
    `backpressure ${fmtPercent(bp)} of the time blocked on a full channel\n` +
    (n.watermark ? 'watermark ' + fmtDateTime(n.watermark) : 'no watermark yet');
  part.title.textContent = summary;
  g.setAttribute('aria-label', summary.replace(/\n/g, '; '));
}
