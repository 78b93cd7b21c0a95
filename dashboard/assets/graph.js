// The pipeline graph: one box per node in columns by topological depth, with
// its rates, watermark and backpressure; one curve per input, labelled with
// its partitioning.

import { $, s } from './dom.js';
import { clamp01, fmtCount, fmtLag, fmtPercent, fmtRate, fmtStamp, num, plural } from './format.js';

const state = {
  key: '', // the topology drawn; the graph is rebuilt only when it changes
  parts: new Map(), // node id → the elements updated in place
};

const NODE_W = 216;
const NODE_H = 132;
const COL_GAP = 124; // wide enough for a partitioning label
const INSET = 14; // left margin of a node's text
const SKEW_Y = 99; // top of the per-subtask rate bars
const SKEW_H = 12; // their height at the busiest subtask
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
        labels.append(s('text', { x: lx, y: below ? ly + 14 : ly - 5, class: 'edge-label', 'text-anchor': 'middle', 'data-full': part }, part));
      }
    });
  }

  const nodeLayer = s('g', { class: 'nodes' });
  for (const n of nodes) {
    const p = pos.get(n.id);
    const kind = n.kind || 'operator';
    const title = s('title', {});
    const rates = s('text', { x: INSET, y: 61, class: 'node-rates' });
    const watermark = s('text', { x: INSET, y: 78, class: 'node-sub node-watermark' });
    const lag = s('text', { x: INSET, y: 94, class: 'node-sub node-lag' });
    const skewText = s('text', { x: NODE_W - 12, y: 94, class: 'node-sub node-skew', 'text-anchor': 'end' });
    const skew = s('g', { class: 'skew' });
    const bpFill = s('rect', { x: INSET, y: 117, height: 7, rx: 3.5, width: 0, class: 'bp-fill' });
    const bpText = s('text', { x: NODE_W - 12, y: 124, class: 'bp-text', 'text-anchor': 'end' });
    const idText = s('text', { x: INSET, y: 23, class: 'node-id', 'data-full': n.id }, n.id);
    const parText = s('text', { x: NODE_W - 12, y: 23, class: 'node-par', 'text-anchor': 'end' }, kind + ' ×' + num(n.parallelism));
    const describe = s('text', { x: INSET, y: 41, class: 'node-sub node-describe', 'data-full': n.describe || '' }, n.describe || '');
    const g = s('g', {
      class: 'node', 'data-node-id': n.id, 'data-kind': kind, 'data-depth': p.depth, 'data-parallelism': num(n.parallelism),
      transform: `translate(${p.x},${p.y})`, tabindex: 0, role: 'img',
    },
    title,
    s('rect', { width: NODE_W, height: NODE_H, rx: 10, class: 'node-box' }),
    s('rect', { width: 5, height: NODE_H - 20, x: 0, y: 10, rx: 2.5, class: 'node-stripe ' + kind }),
    idText, parText, describe, rates, watermark, lag, skewText, skew,
    s('rect', { x: INSET, y: 117, height: 7, rx: 3.5, width: NODE_W - 72, class: 'bp-track' }),
    bpFill, bpText);
    nodeLayer.append(g);
    state.parts.set(n.id, { g, title, rates, watermark, lag, skew, skewText, bpFill, bpText, idText, parText });
  }
  svgEl.replaceChildren(defs, edges, nodeLayer, labels);
  // Texts are measured once drawn: a long name is shortened to end before
  // the label beside it, never under it (the full text is in the title).
  for (const part of state.parts.values()) {
    fit(part.idText, NODE_W - 12 - part.parText.getComputedTextLength() - 10 - INSET);
    fit(part.g.querySelector('.node-describe'), NODE_W - 12 - INSET);
  }
  for (const label of labels.querySelectorAll('.edge-label')) fit(label, COL_GAP - 6);
}

// fit shortens the text of el, with an ellipsis, until it is at most width
// wide.
export function fit(el, width) {
  const full = el.dataset.full !== undefined ? el.dataset.full : el.textContent;
  el.textContent = full;
  if (el.getComputedTextLength() <= width) return;
  let lo = 0;
  let hi = full.length;
  while (lo < hi) { // the longest prefix that fits with the ellipsis
    const mid = Math.ceil((lo + hi) / 2);
    el.textContent = full.slice(0, mid) + '…';
    if (el.getComputedTextLength() <= width) lo = mid;
    else hi = mid - 1;
  }
  el.textContent = full.slice(0, lo) + '…';
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
  const wm = n.watermark ? 'watermark ' + fmtStamp(n.watermark) : 'no watermark';
  if (part.watermark.textContent !== wm) part.watermark.textContent = wm;
  const hasLag = n.watermark && n.watermark_lag_ms !== null && n.watermark_lag_ms !== undefined;
  const lag = hasLag ? 'lag ' + fmtLag(n.watermark_lag_ms) : '';
  if (part.lag.textContent !== lag) part.lag.textContent = lag;
  part.g.dataset.watermarkLagMs = hasLag ? num(n.watermark_lag_ms) : '';
  const skew = drawSkew(part, kind, Array.isArray(n.subtasks) ? n.subtasks : []);

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
    (n.watermark ? 'watermark ' + fmtStamp(n.watermark) + (hasLag ? ', ' + fmtLag(n.watermark_lag_ms) + ' behind' : '') : 'no watermark yet') +
    (skew ? '\nper subtask: ' + skew : '');
  part.title.textContent = summary;
  g.setAttribute('aria-label', summary.replace(/\n/g, '; '));
}

// rateOf is the rate of a subtask that shows its node's work: what a source
// reads, what an operator or sink receives.
function rateOf(kind, st) {
  return num(kind === 'source' ? st.records_out_per_second : st.records_in_per_second);
}

// drawSkew draws one bar per subtask, as tall as its rate against the
// busiest sibling's, and labels the spread (busiest / mean): 1.0× is even
// work. It returns the subtasks' rates as text, "" when there are none.
function drawSkew(part, kind, subtasks) {
  const rates = subtasks.map((st) => rateOf(kind, st));
  const peak = Math.max(0, ...rates);
  const mean = rates.length ? rates.reduce((a, b) => a + b, 0) / rates.length : 0;
  const spread = mean > 0 ? peak / mean : 1;
  const label = rates.length > 1 ? 'skew ' + spread.toFixed(1) + '×' : '';
  if (part.skewText.textContent !== label) part.skewText.textContent = label;
  part.g.dataset.skew = rates.length > 1 ? spread.toFixed(3) : '';
  part.skewText.classList.toggle('skewed', rates.length > 1 && spread >= 1.5);
  const width = NODE_W - INSET - 12;
  const gap = rates.length > 24 ? 0 : 2;
  const bw = rates.length ? Math.max(1, (width - gap * (rates.length - 1)) / rates.length) : 0;
  const bars = rates.map((r, i) => {
    const h = peak > 0 ? Math.max(1, (r / peak) * SKEW_H) : 1;
    const st = subtasks[i];
    return s('rect', {
      x: (INSET + i * (bw + gap)).toFixed(1), y: (SKEW_Y + SKEW_H - h).toFixed(1), width: bw.toFixed(1), height: h.toFixed(1),
      class: 'skew-bar', 'data-subtask': num(st.subtask), 'data-rate': r,
    }, s('title', {}, `subtask ${num(st.subtask)}: ${fmtRate(r)}` + (st.watermark ? ', watermark ' + fmtStamp(st.watermark) : '')));
  });
  part.skew.replaceChildren(...bars);
  return rates.map((r, i) => '#' + num(subtasks[i].subtask) + ' ' + fmtRate(r)).join(', ');
}
