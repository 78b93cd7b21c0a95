// Ingest dashboard: polls the HTTP API every second and draws what it says.
// Plain JavaScript, no framework, no build step, nothing loaded from elsewhere:
// the page must work offline, served from the binary at any host:port, so
// every URL below is relative.

import './errors.js'; // first: it listens for errors before anything runs
import { getJSON } from './api.js';
import { renderCharts } from './charts.js';
import { $, h, setText } from './dom.js';
import { fmtAge, fmtClock, fmtCount, fmtMs, fmtRate, fmtShortDateTime, num, plural } from './format.js';
import { renderGraph } from './graph.js';
import { renderRecoveries } from './recoveries.js';
import { renderTables } from './tables.js';
import { setupTrigger } from './trigger.js';

// Progress counters the browser test waits on.
window.__dashboard = { polls: 0, renders: 0 };

const POLL_MS = 1000; // how often the API is asked

const state = {
  pipeline: null, // the latest /api/v1/pipeline
  checkpoints: [], // the latest history, newest first
  ageBase: null, // seconds_since_last_checkpoint at ageAt
  ageAt: 0, // performance.now() when ageBase arrived
  interval: null, // median seconds between recent checkpoint triggers
  failingSince: null, // Date of the first failed poll in a row
};

async function poll() {
  window.__dashboard.polls++;
  let pipeline;
  let history;
  try {
    [pipeline, history] = await Promise.all([getJSON('api/v1/pipeline'), getJSON('api/v1/checkpoints')]);
    if (!pipeline || typeof pipeline !== 'object') throw new Error('api/v1/pipeline: empty answer');
  } catch (err) {
    showDisconnected(err);
    setTimeout(poll, POLL_MS);
    return;
  }
  try {
    showConnected();
    render(pipeline, Array.isArray(history && history.checkpoints) ? history.checkpoints : []);
    window.__dashboard.renders++;
  } catch (err) {
    // A rendering bug must not stop the polling, but must not hide either.
    report(err);
  }
  setTimeout(poll, POLL_MS);
}

// report raises err as an uncaught error would be (window.onerror and the
// console see it) without unwinding the caller.
function report(err) {
  if (typeof window.reportError === 'function') {
    window.reportError(err);
  } else {
    window.__errors.push(String((err && err.stack) || err));
    console.error(err);
  }
}

function showConnected() {
  state.failingSince = null;
  const c = $('connection');
  c.dataset.state = 'ok';
  c.textContent = 'live';
  c.removeAttribute('title');
  document.body.classList.remove('stale');
  setText('updated-at', 'updated ' + fmtClock(new Date()));
}

function showDisconnected(err) {
  if (!state.failingSince) state.failingSince = new Date();
  const c = $('connection');
  c.dataset.state = 'error';
  c.textContent = 'API unreachable since ' + fmtClock(state.failingSince);
  c.title = String(err && err.message || err);
  document.body.classList.add('stale');
}

// ---------- rendering ----------

function render(p, checkpoints) {
  state.pipeline = p;
  state.checkpoints = checkpoints;
  renderHeader(p);
  renderStats(p, checkpoints);
  renderGraph(Array.isArray(p.nodes) ? p.nodes : []);
  renderCharts(checkpoints);
  renderTables(checkpoints);
  renderRecoveries(p);
}

function renderHeader(p) {
  const name = p.name || 'pipeline';
  setText('pipeline-name', name);
  const status = p.status || 'unknown';
  const badge = $('pipeline-status');
  badge.dataset.status = status;
  setText('pipeline-status', status);
  document.title = name + ' · ' + status + ' — Ingest';

  const g = p.guarantee || {};
  const level = g.level || 'unknown';
  setText('guarantee-level', level);
  $('guarantee').dataset.level = level;
  const reasons = Array.isArray(g.reasons) ? g.reasons : [];
  const key = JSON.stringify(reasons);
  const list = $('guarantee-reasons');
  if (list.dataset.key !== key) {
    list.dataset.key = key;
    list.replaceChildren(...(reasons.length ? reasons : ['No reasons given.']).map((r) => h('li', {}, r)));
  }
  $('guarantee').title = reasons.join('\n');
}

function renderStats(p, checkpoints) {
  const count = $('checkpoint-count');
  count.dataset.value = num(p.committed_checkpoints);
  setText('checkpoint-count', fmtCount(p.committed_checkpoints));

  if (p.seconds_since_last_checkpoint === null || p.seconds_since_last_checkpoint === undefined) {
    state.ageBase = null;
  } else {
    state.ageBase = num(p.seconds_since_last_checkpoint);
    state.ageAt = performance.now();
  }
  const last = p.last_checkpoint;
  setText('last-checkpoint', last
    ? '#' + last.id + ' at ' + fmtClock(last.completed_at) + ' · took ' + fmtMs(last.duration_ms)
    : 'no checkpoint yet');

  state.interval = medianInterval(checkpoints);
  setText('checkpoint-interval', state.interval ? 'one every ~' + fmtAge(Math.max(1, state.interval)) + ' lately' : '\u00a0');
  renderAge();

  const failed = checkpoints.filter((c) => c.status === 'failed').length;
  const failureCount = $('failure-count');
  failureCount.dataset.value = failed;
  failureCount.classList.toggle('bad', failed > 0);
  setText('failure-count', fmtCount(failed));
  setText('failure-window', 'of the last ' + fmtCount(checkpoints.length) + ' ' + plural(checkpoints.length, 'checkpoint', 'checkpoints'));

  const restarts = $('restarts');
  restarts.dataset.value = num(p.restarts);
  restarts.classList.toggle('bad', num(p.restarts) > 0);
  setText('restarts', fmtCount(p.restarts));
  setText('started-at', p.started_at ? 'since the start, ' + fmtShortDateTime(p.started_at) : '\u00a0');

  const nodes = Array.isArray(p.nodes) ? p.nodes : [];
  const read = nodes.filter((n) => n.kind === 'source').reduce((a, n) => a + num(n.records_out_per_second), 0);
  const written = nodes.filter((n) => n.kind === 'sink').reduce((a, n) => a + num(n.records_in_per_second), 0);
  setText('throughput', fmtRate(read));
  setText('throughput-sub', 'read by sources · ' + fmtRate(written) + ' into sinks');
}

// medianInterval is the median gap, in seconds, between the triggers of the
// last 20 checkpoints: what "normal" looks like for the age warning.
function medianInterval(checkpoints) {
  const times = checkpoints.slice(0, 21).map((c) => Date.parse(c.trigger_time)).filter(Number.isFinite).sort((a, b) => a - b);
  const gaps = [];
  for (let i = 1; i < times.length; i++) gaps.push((times[i] - times[i - 1]) / 1000);
  if (!gaps.length) return null;
  gaps.sort((a, b) => a - b);
  return gaps[Math.floor(gaps.length / 2)];
}

// renderAge runs every second on its own timer, so the age keeps counting
// between polls and while the API is unreachable.
function renderAge() {
  const age = $('last-checkpoint-age');
  const box = $('stat-age');
  if (state.ageBase === null) {
    age.dataset.seconds = '';
    setText('last-checkpoint-age', state.pipeline ? 'none yet' : '–');
    box.dataset.stale = 'false';
    return;
  }
  const sec = state.ageBase + (performance.now() - state.ageAt) / 1000;
  age.dataset.seconds = sec.toFixed(1);
  setText('last-checkpoint-age', fmtAge(sec));
  // Late: three usual intervals without a completed checkpoint.
  const late = state.interval !== null && sec > Math.max(5, 3 * state.interval);
  box.dataset.stale = String(late);
  age.title = late ? 'No checkpoint completed for more than three usual intervals.' : '';
}

// ---------- start ----------

let resizeTimer = null;
window.addEventListener('resize', () => {
  clearTimeout(resizeTimer);
  resizeTimer = setTimeout(() => {
    if (state.pipeline) renderCharts(state.checkpoints);
  }, 150);
});

setupTrigger();
setInterval(renderAge, 1000);
poll();
