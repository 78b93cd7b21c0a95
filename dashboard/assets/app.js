// Ingest dashboard: polls the HTTP API every second and draws what it says.
// Plain JavaScript, no framework, no build step, nothing loaded from elsewhere:
// the page must work offline, served from the binary at any host:port, so
// every URL below is relative.

import './errors.js'; // first: it listens for errors before anything runs
import { getJSON } from './api.js';
import { renderCharts } from './charts.js';
import { $, h, setText } from './dom.js';
import { fmtAge, fmtClock, fmtCount, fmtLag, fmtMs, fmtRate, fmtShortDateTime, fmtStamp, num, plural } from './format.js';
import { renderGraph } from './graph.js';
import { badgeText, healthOf, renderHealth } from './health.js';
import { renderRecoveries } from './recoveries.js';
import { renderTables } from './tables.js';
import { renderTrigger, setupTrigger } from './trigger.js';

// Progress counters the browser test waits on.
window.__dashboard = { polls: 0, renders: 0 };

const POLL_MS = 1000; // how often the API is asked

const state = {
  pipeline: null, // the latest /api/v1/pipeline
  checkpoints: [], // the latest history, newest first
  ageBase: null, // seconds_since_last_checkpoint at ageAt
  startBase: null, // seconds since the job started, at ageAt
  ageAt: 0, // performance.now() when ageBase arrived
  interval: null, // the checkpoint interval in seconds; null when none
  apiStale: false, // whether the API judged the checkpoints stale
  lastText: null, // what the age's sub-line says of the last checkpoint
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
  renderHealth(p);
  renderStats(p, checkpoints);
  renderGraph(Array.isArray(p.nodes) ? p.nodes : []);
  renderCharts(checkpoints);
  renderTables(checkpoints);
  renderRecoveries(p);
  renderTrigger(p.actions);
}

function renderHeader(p) {
  const name = p.name || 'pipeline';
  setText('pipeline-name', name);
  document.title = name + ' · ' + badgeText(p) + ' — Ingest';

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

// present says whether the API answered field v (older answers lack some).
const present = (v) => v !== null && v !== undefined;

function renderStats(p, checkpoints) {
  const counts = p.checkpoints || {};
  const count = $('checkpoint-count');
  count.dataset.value = num(p.committed_checkpoints);
  setText('checkpoint-count', fmtCount(p.committed_checkpoints));
  const noneCompleted = present(counts.completed) && num(counts.completed) === 0 && num(counts.failed) > 0;
  count.classList.toggle('bad', noneCompleted);
  const interval = num(p.checkpoint_interval_ms);
  const parts = [];
  if (interval > 0) parts.push('interval ' + fmtMs(interval));
  if (present(counts.triggered)) parts.push(fmtCount(counts.completed) + ' of ' + fmtCount(counts.triggered) + ' triggered completed');
  setText('checkpoint-interval', parts.length ? parts.join(' · ') : '\u00a0');

  state.ageAt = performance.now();
  state.ageBase = present(p.seconds_since_last_checkpoint) ? num(p.seconds_since_last_checkpoint) : null;
  const observed = Date.parse(p.observed_at);
  const started = Date.parse(p.started_at);
  state.startBase = Number.isFinite(observed) && Number.isFinite(started) ? Math.max(0, (observed - started) / 1000) : null;
  state.interval = interval > 0 ? interval / 1000 : null;
  state.apiStale = healthOf(p).problems.some((x) => x.state === 'checkpoints_stale');
  const last = p.last_checkpoint;
  state.lastText = last
    ? '#' + last.id + (last.restored ? ' (restored)' : '') + ' at ' + fmtClock(last.completed_at) + ' · took ' + fmtMs(last.duration_ms)
    : null;
  renderAge();

  const failed = checkpoints.filter((c) => c.status === 'failed').length;
  const failureCount = $('failure-count');
  failureCount.dataset.value = failed;
  failureCount.classList.toggle('bad', failed > 0);
  setText('failure-count', fmtCount(failed));
  const inARow = num(p.consecutive_failed_checkpoints);
  setText('failure-window', (inARow > 0 ? fmtCount(inARow) + ' in a row · ' : '') +
    'of the last ' + fmtCount(checkpoints.length) + ' ' + plural(checkpoints.length, 'checkpoint', 'checkpoints'));

  const restarts = $('restarts');
  restarts.dataset.value = num(p.restarts);
  restarts.classList.toggle('bad', num(p.restarts) > 0);
  setText('restarts', fmtCount(p.restarts));
  const lastRestart = (Array.isArray(p.recovery_history) ? p.recovery_history : []).find((e) => e.cause === 'restart');
  setText('started-at', lastRestart ? 'last at ' + fmtShortDateTime(lastRestart.time)
    : p.started_at ? 'since the start, ' + fmtShortDateTime(p.started_at) : '\u00a0');

  const nodes = Array.isArray(p.nodes) ? p.nodes : [];
  const read = nodes.filter((n) => n.kind === 'source').reduce((a, n) => a + num(n.records_out_per_second), 0);
  const written = nodes.filter((n) => n.kind === 'sink').reduce((a, n) => a + num(n.records_in_per_second), 0);
  setText('throughput', fmtRate(read));
  setText('throughput-sub', 'read by sources · ' + fmtRate(written) + ' into sinks');

  renderWatermark(nodes);
  renderCommits(p);
}

// renderWatermark shows how far event time is behind: the least watermark of
// the sinks (of every node when no sink has one), with its date.
function renderWatermark(nodes) {
  const withWm = (list) => list.filter((n) => n.watermark && present(n.watermark_lag_ms));
  let candidates = withWm(nodes.filter((n) => n.kind === 'sink'));
  if (!candidates.length) candidates = withWm(nodes);
  const box = $('stat-watermark');
  const value = $('watermark-lag');
  if (!candidates.length) {
    value.dataset.ms = '';
    setText('watermark-lag', '–');
    setText('watermark-at', 'no watermark yet');
    return;
  }
  const behind = candidates.reduce((a, n) => (num(n.watermark_lag_ms) > num(a.watermark_lag_ms) ? n : a));
  value.dataset.ms = num(behind.watermark_lag_ms);
  setText('watermark-lag', fmtLag(behind.watermark_lag_ms));
  setText('watermark-at', fmtStamp(behind.watermark) + ' at ' + behind.id);
  box.title = 'The event time of ' + behind.id + ' is ' + fmtLag(behind.watermark_lag_ms) + ' behind the clock: its watermark is ' + fmtStamp(behind.watermark) + '.';
}

// renderCommits shows when output last became visible and what waits for it.
function renderCommits(p) {
  const sinks = Array.isArray(p.sinks) ? p.sinks : [];
  const committers = sinks.filter((x) => x.committer);
  const pending = num(p.checkpoints && p.checkpoints.pending_commit);
  const items = sinks.reduce((a, x) => a + num(x.pending_committables), 0);
  const box = $('stat-commit');
  box.dataset.pending = pending;
  const lc = p.last_commit;
  const value = $('commit-latency');
  value.dataset.ms = lc ? num(lc.latency_ms) : '';
  setText('commit-latency', lc ? fmtMs(lc.latency_ms) : '–');
  let sub;
  if (!present(p.sinks)) sub = '\u00a0';
  else if (!committers.length) sub = 'no sink commits at checkpoints';
  else sub = (lc ? 'after checkpoint ' + lc.checkpoint + ' completed · ' : 'no commit yet · ') + fmtCount(pending) + ' pending' + (items ? ' (' + fmtCount(items) + ' staged)' : '');
  setText('commit-sub', sub);
  box.dataset.stale = String(pending > 1);
  box.title = committers.map((x) => x.id + ': ' + fmtCount(x.commits) + ' commits' +
    (present(x.commit_mean_ms) ? ', ' + fmtMs(x.commit_mean_ms) + ' on average' : '')).join('\n');
}

// renderAge runs every second on its own timer, so the age keeps counting
// between polls and while the API is unreachable. A complete checkpoint
// older than two intervals is stale, and so is a job that has completed
// none within two intervals of its start (the API judges the same).
function renderAge() {
  const age = $('last-checkpoint-age');
  const box = $('stat-age');
  if (!state.pipeline) return;
  const elapsed = (performance.now() - state.ageAt) / 1000;
  const sinceStart = state.startBase === null ? null : state.startBase + elapsed;
  let stale = state.apiStale;
  if (state.ageBase === null) {
    age.dataset.seconds = '';
    setText('last-checkpoint-age', 'none yet');
    setText('last-checkpoint', sinceStart === null ? 'no checkpoint yet' : 'none completed in the ' + fmtAge(sinceStart) + ' since the start');
    if (state.interval !== null && sinceStart !== null) stale = stale || sinceStart > 2 * state.interval;
  } else {
    const sec = state.ageBase + elapsed;
    age.dataset.seconds = sec.toFixed(1);
    setText('last-checkpoint-age', fmtAge(sec));
    setText('last-checkpoint', state.lastText);
    // A checkpoint restored from an earlier run is as old as that run left
    // it: count from the start then.
    const ref = sinceStart === null ? sec : Math.min(sec, sinceStart);
    if (state.interval !== null) stale = stale || ref > 2 * state.interval;
  }
  box.dataset.stale = String(stale);
  age.title = stale && state.interval !== null
    ? 'No checkpoint completed for more than twice the ' + fmtMs(state.interval * 1000) + ' interval.' : '';
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
