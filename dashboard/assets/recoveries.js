// Recoveries: the restart count since the start, and a timeline of the
// restarts and status changes seen while the page is open.

import { $, h, setText } from './dom.js';
import { fmtClock, num, plural } from './format.js';

const TIMELINE_EVENTS = 20; // events kept

const state = {
  restartsSeen: null, // restarts at the previous poll
  statusSeen: null, // status at the previous poll
  recoveries: [], // {at, text, kind, count}, newest first
};

// renderRecoveries updates the count and the timeline from /api/v1/pipeline.
export function renderRecoveries(p) {
  const restarts = num(p.restarts);
  const status = p.status || 'unknown';
  if (state.restartsSeen !== null && restarts > state.restartsSeen) {
    const n = restarts - state.restartsSeen;
    addRecovery(n === 1 ? 'restart ' + restarts + ': recovered from the last complete checkpoint'
      : n + ' restarts (now ' + restarts + ')', 'restart', n);
  }
  if (state.statusSeen !== null && status !== state.statusSeen && (status === 'failed' || state.statusSeen === 'recovering' || status === 'recovering')) {
    addRecovery('status ' + state.statusSeen + ' → ' + status, 'status', 0);
  }
  state.restartsSeen = restarts;
  state.statusSeen = status;

  const before = restarts - state.recoveries.filter((r) => r.kind === 'restart').reduce((a, r) => a + r.count, 0);
  let summary = restarts === 0 ? 'No restart since the pipeline started.'
    : restarts + ' ' + plural(restarts, 'restart', 'restarts') + ' since the pipeline started' +
      (before > 0 && before < restarts ? ' (' + before + ' before this page was opened).' : '.');
  if (status === 'recovering') summary += ' Recovering now.';
  setText('recoveries-summary', summary);

  const list = $('recoveries');
  const key = state.recoveries.length + ':' + (state.recoveries[0] ? state.recoveries[0].at.getTime() : 0);
  if (list.dataset.key === key) return;
  list.dataset.key = key;
  if (!state.recoveries.length) {
    list.replaceChildren(h('li', { class: 'empty' }, 'None seen since this page was opened.'));
    return;
  }
  list.replaceChildren(...state.recoveries.map((r) => h('li', { 'data-kind': r.kind },
    h('time', { datetime: r.at.toISOString() }, fmtClock(r.at)), ' ', r.text)));
}

// addRecovery records an event; count is the number of restarts it stands for.
function addRecovery(text, kind, count) {
  state.recoveries.unshift({ at: new Date(), text, kind, count });
  state.recoveries.length = Math.min(state.recoveries.length, TIMELINE_EVENTS);
}
