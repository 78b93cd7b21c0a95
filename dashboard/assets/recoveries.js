// Recoveries: the restart count since the start, and the timeline of the
// job's recoveries as the API keeps it (recovery_history), so that a reload
// shows the same thing: when each restart happened, after which failure, and
// which checkpoint it restored — or that none existed and it started over.

import { $, h, setText } from './dom.js';
import { fmtClock, fmtStamp, num, plural } from './format.js';

const TIMELINE_EVENTS = 20; // events shown

// renderRecoveries updates the count and the timeline from /api/v1/pipeline.
export function renderRecoveries(p) {
  const restarts = num(p.restarts);
  const events = (Array.isArray(p.recovery_history) ? p.recovery_history : []).slice(0, TIMELINE_EVENTS);
  let summary = restarts === 0 ? 'No restart since the pipeline started.'
    : restarts + ' ' + plural(restarts, 'restart', 'restarts') + ' since the pipeline started.';
  if (p.status === 'recovering') summary += ' Recovering now.';
  setText('recoveries-summary', summary);

  const list = $('recoveries');
  const key = JSON.stringify(events.map((e) => [e.time, e.restored_checkpoint]));
  if (list.dataset.key === key) return;
  list.dataset.key = key;
  if (!events.length) {
    list.replaceChildren(h('li', { class: 'empty' }, 'None.'));
    return;
  }
  list.replaceChildren(...events.map((e) => h('li', {
    'data-kind': e.cause === 'restart' ? 'restart' : 'checkpoint',
    'data-restored': e.restored_checkpoint === null || e.restored_checkpoint === undefined ? '' : num(e.restored_checkpoint),
  },
  h('time', { datetime: e.time, title: fmtStamp(e.time) }, fmtClock(e.time)), ' ', describe(e))));
}

// describe says what a recovery did, claiming only what the API says.
function describe(e) {
  const restored = e.restored_checkpoint === null || e.restored_checkpoint === undefined ? null : num(e.restored_checkpoint);
  if (e.cause !== 'restart') {
    return 'started from checkpoint ' + restored + ', completed by an earlier run';
  }
  const what = restored === null
    ? 'started over from the beginning: no complete checkpoint existed'
    : 'restored checkpoint ' + restored;
  const after = e.failure ? ' after a failure' + (e.class ? ' (' + e.class + ')' : '') + ': ' + e.failure : '';
  return 'restart (attempt ' + num(e.attempt) + '): ' + what + after;
}
