// The recent-checkpoints table with its per-subtask detail, and the table of
// failed checkpoints with their reasons.

import { getJSON } from './api.js';
import { unacknowledgedText } from './charts.js';
import { $, h } from './dom.js';
import { fmtBytes, fmtClock, fmtDateTime, fmtMs, num } from './format.js';

const RECENT_CHECKPOINTS = 12; // rows of the recent-checkpoints table
const FAILURE_ROWS = 10; // rows of the failures table

const state = {
  checkpoints: [], // the latest history, newest first
  selected: null, // id of the checkpoint whose detail is shown
  tableKey: '', // what the recent-checkpoints table shows; redrawn when it changes
  failuresKey: '', // the same for the failures table
};

// renderTables draws both tables from the history (newest first).
export function renderTables(checkpoints) {
  state.checkpoints = checkpoints;
  renderCheckpointTable(checkpoints);
  renderFailures(checkpoints);
}

function statusBadge(status) {
  return h('span', { class: 'badge small', 'data-status': status }, status === 'in_progress' ? 'in progress' : status);
}

function idButton(c) {
  const b = h('button', { type: 'button', class: 'link', 'data-checkpoint-id': c.id, 'aria-label': 'Show detail of checkpoint ' + c.id }, String(c.id));
  b.addEventListener('click', () => showDetail(c.id));
  return b;
}

function renderCheckpointTable(checkpoints) {
  const rows = checkpoints.slice(0, RECENT_CHECKPOINTS);
  const key = JSON.stringify(rows.map((c) => [c.id, c.status, c.duration_ms])) + state.selected;
  if (key === state.tableKey) return;
  state.tableKey = key;
  const tbody = $('checkpoints').tBodies[0];
  if (!rows.length) {
    tbody.replaceChildren(h('tr', {}, h('td', { colspan: 8, class: 'empty' }, 'No checkpoint yet.')));
    return;
  }
  tbody.replaceChildren(...rows.map((c) => {
    const running = c.status === 'in_progress';
    return h('tr', { 'data-checkpoint-id': c.id, 'data-status': c.status, 'aria-current': c.id === state.selected ? 'true' : null },
      h('td', {}, idButton(c)),
      h('td', {}, statusBadge(c.status)),
      h('td', { title: c.trigger_time }, fmtClock(c.trigger_time)),
      h('td', { class: 'num' }, running ? '…' : fmtMs(c.duration_ms)),
      h('td', { class: 'num' }, running ? '…' : fmtMs(c.sync_ms)),
      h('td', { class: 'num' }, running ? '…' : fmtMs(c.async_ms)),
      h('td', { class: 'num' }, running ? '…' : fmtMs(c.alignment_max_ms)),
      h('td', { class: 'num' }, running ? '…' : fmtBytes(c.state_size_bytes)));
  }));
}

function renderFailures(checkpoints) {
  const failed = checkpoints.filter((c) => c.status === 'failed').slice(0, FAILURE_ROWS);
  const key = JSON.stringify(failed.map((c) => [c.id, c.failure_reason, unacknowledgedText(c)]));
  if (key === state.failuresKey) return;
  state.failuresKey = key;
  $('failures-empty').hidden = failed.length > 0;
  $('failures').hidden = failed.length === 0;
  $('failures').tBodies[0].replaceChildren(...failed.map((c) => h('tr', { 'data-checkpoint-id': c.id },
    h('td', {}, idButton(c)),
    h('td', { title: c.trigger_time }, fmtClock(c.trigger_time)),
    h('td', { class: 'reason' }, c.failure_reason || 'no reason given'),
    h('td', { class: 'missing' }, unacknowledgedText(c) || '–'))));
}

async function showDetail(id) {
  state.selected = id;
  state.tableKey = '';
  renderCheckpointTable(state.checkpoints);
  const box = $('checkpoint-detail');
  box.hidden = false;
  box.dataset.checkpointId = id;
  box.replaceChildren(h('p', { class: 'empty' }, 'Loading checkpoint ' + id + '…'));
  let c;
  try {
    c = await getJSON('api/v1/checkpoints/' + encodeURIComponent(id));
  } catch (err) {
    if (state.selected === id) box.replaceChildren(h('p', { class: 'error' }, 'Could not load checkpoint ' + id + ': ' + err.message));
    return;
  }
  if (state.selected !== id) return; // another one was selected meanwhile
  const subtasks = (Array.isArray(c.subtasks) ? c.subtasks : []).slice().sort((a, b) =>
    String(a.operator).localeCompare(String(b.operator)) || num(a.subtask) - num(b.subtask));
  const close = h('button', { type: 'button', class: 'button secondary small', id: 'detail-close' }, 'Close');
  close.addEventListener('click', () => {
    state.selected = null;
    state.tableKey = '';
    box.hidden = true;
    box.replaceChildren();
    renderCheckpointTable(state.checkpoints);
  });
  const facts = [
    'triggered ' + fmtDateTime(c.trigger_time),
    c.status === 'in_progress' ? 'in progress' : 'took ' + fmtMs(c.duration_ms),
    'sync ' + fmtMs(c.sync_ms), 'async ' + fmtMs(c.async_ms), 'alignment max ' + fmtMs(c.alignment_max_ms),
    'state ' + fmtBytes(c.state_size_bytes),
  ];
  box.replaceChildren(...[
    h('div', { class: 'detail-head' },
      h('h3', {}, 'Checkpoint ' + c.id + ' ', statusBadge(c.status || 'unknown')), close),
    h('p', { class: 'facts' }, facts.join(' · ')),
    c.failure_reason ? h('p', { class: 'error' }, c.failure_reason) : null,
    unacknowledgedText(c) ? h('p', { class: 'error', id: 'detail-unacknowledged' }, 'Not acknowledged by ' + unacknowledgedText(c)) : null,
    subtasks.length
      ? h('table', { class: 'table', id: 'subtasks' },
        h('caption', { class: 'visually-hidden' }, 'Per-subtask detail of checkpoint ' + c.id),
        h('thead', {}, h('tr', {}, ...['operator', 'subtask', 'sync', 'async', 'alignment', 'state'].map((t, i) =>
          h('th', { scope: 'col', class: i > 1 ? 'num' : null }, t)))),
        h('tbody', {}, ...subtasks.map((st) => h('tr', { 'data-operator': st.operator, 'data-subtask': st.subtask },
          h('td', {}, String(st.operator)), h('td', {}, String(st.subtask)),
          h('td', { class: 'num' }, fmtMs(st.sync_ms)), h('td', { class: 'num' }, fmtMs(st.async_ms)),
          h('td', { class: 'num' }, fmtMs(st.alignment_ms)), h('td', { class: 'num' }, fmtBytes(st.state_size_bytes))))))
      : h('p', { class: 'empty' }, 'No per-subtask detail.'),
  ].filter(Boolean));
}
