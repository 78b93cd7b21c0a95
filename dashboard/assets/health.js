// The job's health as the API judges it (pipeline.health): the badge in the
// header says the worst problem in amber or red, and the banner under it
// says what is wrong, since when, and the last failures with their reasons
// and times, so that a failing job never looks like a healthy one.

import { unacknowledgedText } from './charts.js';
import { $, h, setText } from './dom.js';
import { fmtClock, fmtStamp } from './format.js';

// LABELS name the problem states on the badge; a healthy job shows its phase.
const LABELS = {
  failed: 'failed',
  checkpoints_failing: 'checkpoints failing',
  restarting: 'restarting',
  checkpoints_stale: 'checkpoints stale',
  checkpoints_slow: 'checkpoints slow',
};

// healthOf is p's health, or one made from its status for an API that does
// not judge it.
export function healthOf(p) {
  const hl = p.health;
  if (hl && typeof hl === 'object') return hl;
  return { level: 'ok', state: p.status || 'unknown', summary: '', problems: [] };
}

// badgeText is what the header badge says.
export function badgeText(p) {
  const hl = healthOf(p);
  return LABELS[hl.state] || p.status || 'unknown';
}

// renderHealth draws the badge and the banner.
export function renderHealth(p) {
  const hl = healthOf(p);
  const badge = $('pipeline-status');
  badge.dataset.status = p.status || 'unknown';
  badge.dataset.health = hl.level || 'ok';
  badge.dataset.state = hl.state || '';
  setText('pipeline-status', badgeText(p));
  badge.title = hl.summary || '';

  const box = $('health');
  const problems = Array.isArray(hl.problems) ? hl.problems : [];
  const lf = p.last_failure;
  const lc = p.last_failed_checkpoint;
  box.dataset.level = hl.level || 'ok';
  box.dataset.state = hl.state || '';
  box.hidden = problems.length === 0 && !lf && !lc;
  box.setAttribute('role', hl.level === 'critical' ? 'alert' : 'status');

  if (problems.length) {
    const first = problems[0].state === hl.state ? problems[0] : problems.find((x) => x.state === hl.state) || problems[0];
    setText('health-state', capitalise(LABELS[first.state] || first.state));
    setText('health-summary', first.message + since(first));
  } else {
    setText('health-state', 'Healthy now');
    setText('health-summary', hl.summary ? hl.summary + '.' : '');
  }
  const rest = problems.filter((x) => x.state !== hl.state);
  const list = $('health-problems');
  const key = JSON.stringify(rest);
  if (list.dataset.key !== key) {
    list.dataset.key = key;
    list.replaceChildren(...rest.map((x) => h('li', { 'data-state': x.state, 'data-level': x.level },
      h('strong', {}, capitalise(LABELS[x.state] || x.state) + ': '), x.message + since(x))));
  }

  const failure = $('last-failure');
  failure.hidden = !lf;
  if (lf) {
    const key = JSON.stringify(lf);
    if (failure.dataset.key !== key) {
      failure.dataset.key = key;
      failure.replaceChildren(h('span', { class: 'label' }, 'Last job failure '),
        h('time', { datetime: lf.time, title: fmtStamp(lf.time) }, fmtClock(lf.time)),
        lf.class ? ' (' + lf.class + ')' : '', ': ', h('span', { class: 'reason' }, lf.error || 'no reason given'));
    }
  }
  const ckpt = $('last-failed-checkpoint');
  ckpt.hidden = !lc;
  if (lc) {
    const key = JSON.stringify(lc);
    if (ckpt.dataset.key !== key) {
      ckpt.dataset.key = key;
      const missing = unacknowledgedText(lc);
      ckpt.dataset.checkpointId = lc.id;
      ckpt.replaceChildren(h('span', { class: 'label' }, 'Last failed checkpoint ' + lc.id + ' '),
        h('time', { datetime: lc.end_time || lc.trigger_time, title: fmtStamp(lc.end_time || lc.trigger_time) }, fmtClock(lc.end_time || lc.trigger_time)),
        ': ', h('span', { class: 'reason' }, lc.reason || 'no reason given'),
        missing ? h('span', { class: 'missing' }, ' · not acknowledged by ' + missing) : null);
    }
  }
}

function since(problem) {
  return problem.since ? ' (since ' + fmtClock(problem.since) + ')' : '';
}

function capitalise(text) {
  text = String(text);
  return text.charAt(0).toUpperCase() + text.slice(1);
}
