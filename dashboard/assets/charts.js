// Charts of the recent checkpoints over trigger time: duration with its sync
// and async parts, state size, and barrier alignment. Plain SVG.

import { $, s, setAttrs } from './dom.js';
import { fmtBytes, fmtMs, num } from './format.js';

const CHART_CHECKPOINTS = 60; // checkpoints the charts show
const CHART_H = 210;
const MARGIN = { top: 14, right: 14, bottom: 28, left: 62 };

// renderCharts draws the three charts from the history (newest first).
export function renderCharts(checkpoints) {
  const recent = checkpoints.filter((c) => c.status !== 'in_progress').slice(0, CHART_CHECKPOINTS).reverse();
  const done = recent.filter((c) => c.status === 'completed');
  const failed = recent.filter((c) => c.status === 'failed');
  lineChart($('chart-duration'), {
    name: 'Checkpoint duration', points: done, failed, format: fmtMs, empty: 'No checkpoint has ended yet',
    line: (c) => c.duration_ms,
    stack: [{ cls: 'sync', value: (c) => c.sync_ms, label: 'sync' }, { cls: 'async', value: (c) => c.async_ms, label: 'async' }],
    tip: (c) => `checkpoint ${c.id}: ${fmtMs(c.duration_ms)} (sync ${fmtMs(c.sync_ms)}, async ${fmtMs(c.async_ms)}, alignment ${fmtMs(c.alignment_max_ms)})`,
  });
  lineChart($('chart-size'), {
    name: 'State size', points: done, format: fmtBytes, nice: niceBytes, line: (c) => c.state_size_bytes, area: true,
    tip: (c) => `checkpoint ${c.id}: ${fmtBytes(c.state_size_bytes)}`,
  });
  lineChart($('chart-alignment'), {
    name: 'Alignment', points: done, format: fmtMs, line: (c) => c.alignment_max_ms, area: true,
    tip: (c) => `checkpoint ${c.id}: alignment max ${fmtMs(c.alignment_max_ms)}`,
  });
}

// lineChart draws one chart over trigger time: optional stacked bars, a line
// with a point per completed checkpoint, and, when o.failed is given, a bar
// as long as each failed checkpoint ran until it failed, with a mark above.
// Failed checkpoints are drawn when none completed too: that is when they
// matter most.
function lineChart(svgEl, o) {
  const width = Math.max(280, Math.round(svgEl.getBoundingClientRect().width || 480));
  const height = CHART_H;
  setAttrs(svgEl, { viewBox: `0 0 ${width} ${height}`, height });
  const pw = width - MARGIN.left - MARGIN.right;
  const ph = height - MARGIN.top - MARGIN.bottom;
  const failed = o.failed || [];
  const all = o.points.concat(failed);
  if (!all.length) {
    const text = o.empty || 'No completed checkpoint yet';
    svgEl.replaceChildren(s('text', { x: width / 2, y: height / 2, 'text-anchor': 'middle', class: 'empty-text' }, text));
    svgEl.setAttribute('aria-label', o.name + ': ' + text.toLowerCase());
    return;
  }
  const times = all.map((c) => Date.parse(c.trigger_time));
  let t0 = Math.min(...times);
  let t1 = Math.max(...times);
  if (t1 - t0 < 1000) {
    t0 -= 5000;
    t1 += 5000;
  }
  const pad = (t1 - t0) * 0.02;
  t0 -= pad;
  t1 += pad;
  // The scale is the completed checkpoints' when there are any: a failed
  // one that ran into a 10-minute timeout must not flatten them (its bar is
  // cut at the top); else the failed ones'.
  const scaled = o.points.length ? o.points : failed;
  const ymax = (o.nice || niceMax)(Math.max(...scaled.map((c) => num(o.line(c)) + 0),
    ...(o.stack ? o.points.map((c) => o.stack.reduce((a, st) => a + num(st.value(c)), 0)) : [0])));
  const x = (t) => MARGIN.left + ((t - t0) / (t1 - t0)) * pw;
  const y = (v) => MARGIN.top + ph - (num(v) / ymax) * ph;

  const grid = s('g', { class: 'grid' });
  const axes = s('g', { class: 'axis' });
  for (const v of ticks(ymax)) {
    grid.append(s('line', { x1: MARGIN.left, x2: width - MARGIN.right, y1: y(v), y2: y(v) }));
    axes.append(s('text', { x: MARGIN.left - 8, y: y(v) + 4, 'text-anchor': 'end' }, o.format(v)));
  }
  const step = timeStep((t1 - t0) / Math.max(2, Math.floor(pw / 90)));
  for (let t = Math.ceil(t0 / step) * step; t <= t1; t += step) {
    axes.append(s('line', { x1: x(t), x2: x(t), y1: MARGIN.top + ph, y2: MARGIN.top + ph + 4 }));
    axes.append(s('text', { x: x(t), y: height - 8, 'text-anchor': 'middle' }, fmtTick(t, step)));
  }
  axes.append(s('line', { x1: MARGIN.left, x2: width - MARGIN.right, y1: MARGIN.top + ph, y2: MARGIN.top + ph, class: 'baseline' }));

  const bars = s('g', { class: 'bars' });
  const bw = Math.max(2, Math.min(12, (pw / Math.max(1, all.length)) * 0.55));
  if (o.stack) {
    for (const c of o.points) {
      let base = 0;
      for (const st of o.stack) {
        const v = num(st.value(c));
        if (v > 0) {
          bars.append(s('rect', { x: x(Date.parse(c.trigger_time)) - bw / 2, y: y(base + v), width: bw, height: Math.max(0, y(base) - y(base + v)), class: 'bar ' + st.cls }));
        }
        base += v;
      }
    }
  }

  for (const c of failed) {
    const v = Math.min(num(o.line(c)), ymax);
    bars.append(s('rect', {
      x: x(Date.parse(c.trigger_time)) - bw / 2, y: y(v), width: bw, height: Math.max(1, y(0) - y(v)), class: 'bar failed',
      'data-checkpoint-id': c.id, 'data-value': num(o.line(c)),
    }));
  }

  const coords = o.points.map((c) => [x(Date.parse(c.trigger_time)), y(o.line(c))]);
  const line = 'M' + coords.map(([a, b]) => a.toFixed(1) + ',' + b.toFixed(1)).join(' L');
  const series = s('g', { class: 'series' });
  if (coords.length && o.area) {
    const bottom = (MARGIN.top + ph).toFixed(1);
    series.append(s('path', { d: `${line} L${coords[coords.length - 1][0].toFixed(1)},${bottom} L${coords[0][0].toFixed(1)},${bottom} Z`, class: 'area' }));
  }
  if (coords.length) series.append(s('path', { d: line, class: 'line' }));
  o.points.forEach((c, i) => {
    series.append(s('circle', {
      cx: coords[i][0].toFixed(1), cy: coords[i][1].toFixed(1), r: 2.6, class: 'point', 'data-checkpoint-id': c.id, 'data-status': 'completed', 'data-value': num(o.line(c)),
    }, s('title', {}, o.tip(c))));
  });
  for (const c of failed) {
    const fx = x(Date.parse(c.trigger_time));
    series.append(s('path', {
      d: `M${fx - 5},${MARGIN.top} L${fx + 5},${MARGIN.top} L${fx},${MARGIN.top + 8} Z`, class: 'failed-mark', 'data-checkpoint-id': c.id, 'data-status': 'failed',
    }, s('title', {}, failedTip(c, o.format(o.line(c))))));
  }
  svgEl.replaceChildren(grid, bars, axes, series);

  const tail = failed.length ? `; ${failed.length} failed` : '';
  if (!o.points.length) {
    svgEl.setAttribute('aria-label', `${o.name}: no completed checkpoint${tail}`);
    return;
  }
  const latest = o.points[o.points.length - 1];
  const peak = Math.max(...o.points.map((c) => num(o.line(c))));
  svgEl.setAttribute('aria-label', `${o.name} of the last ${o.points.length} completed checkpoints: latest ${o.format(o.line(latest))} (checkpoint ${latest.id}), peak ${o.format(peak)}` + tail);
}

// failedTip says why a checkpoint failed and who never acknowledged it.
export function failedTip(c, took) {
  const missing = unacknowledgedText(c);
  return `checkpoint ${c.id} failed after ${took}: ${c.failure_reason || 'no reason given'}` + (missing ? `; not acknowledged by ${missing}` : '');
}

// unacknowledgedText lists the subtasks that did not acknowledge c:
// "enrich#2, sink#0", "" when none (or the API does not say).
export function unacknowledgedText(c) {
  const list = Array.isArray(c.unacknowledged) ? c.unacknowledged : [];
  return list.map((t) => t.operator + '#' + num(t.subtask)).join(', ');
}

// niceMax is the top of a value axis with four ticks: v rounded up so that a
// quarter of it is 1, 1.5, 2, 2.5, 3, 4, 5, 6 or 8 times a power of ten.
function niceMax(v) {
  if (!(v > 0)) return 1;
  const q = v / 4;
  const p = Math.pow(10, Math.floor(Math.log10(q)));
  const m = [1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10].find((c) => q <= c * p * (1 + 1e-9));
  return 4 * m * p;
}

// niceBytes does the same in the binary unit fmtBytes prints v in, so the
// axis reads 320 MiB, not 305 MiB.
function niceBytes(v) {
  if (!(v > 0)) return 1024;
  const unit = Math.pow(1024, Math.max(0, Math.floor(Math.log(v) / Math.log(1024))));
  return niceMax(v / unit) * unit;
}

function ticks(max) {
  const out = [];
  for (let i = 0; i <= 4; i++) out.push((max * i) / 4);
  return out;
}

const TIME_STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400].map((s) => s * 1000);

function timeStep(raw) {
  return TIME_STEPS.find((st) => st >= raw) || TIME_STEPS[TIME_STEPS.length - 1];
}

function fmtTick(t, step) {
  const d = new Date(t);
  const opts = { hour: '2-digit', minute: '2-digit', hourCycle: 'h23' };
  if (step < 60000) opts.second = '2-digit';
  return d.toLocaleTimeString(undefined, opts);
}
