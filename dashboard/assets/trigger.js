// The "Trigger checkpoint" dialog: asks for the API token and sends
// POST api/v1/checkpoints with it. The token stays in this tab's session
// storage only, and is forgotten when the API rejects it.

import { getJSON } from './api.js';
import { $ } from './dom.js';

const TOKEN_KEY = 'ingest.api-token';

// setupTrigger wires the button, the dialog and the form.
export function setupTrigger() {
  const dialog = $('trigger-dialog');
  const input = $('trigger-token');
  const result = $('trigger-result');
  $('trigger-checkpoint').addEventListener('click', () => {
    input.value = sessionStorage.getItem(TOKEN_KEY) || '';
    result.textContent = '';
    delete result.dataset.outcome;
    dialog.showModal();
    input.focus();
  });
  $('trigger-cancel').addEventListener('click', () => dialog.close());
  $('trigger-form').addEventListener('submit', async (e) => {
    e.preventDefault();
    const token = input.value.trim();
    if (!token) return;
    result.dataset.outcome = 'pending';
    result.textContent = 'Triggering…';
    try {
      const body = await getJSON('api/v1/checkpoints', { method: 'POST', headers: { Accept: 'application/json', Authorization: 'Bearer ' + token } });
      sessionStorage.setItem(TOKEN_KEY, token);
      result.dataset.outcome = 'ok';
      result.textContent = body && body.id !== undefined ? 'Checkpoint ' + body.id + ' triggered.' : 'Checkpoint triggered.';
    } catch (err) {
      result.dataset.outcome = 'error';
      if (err.status === 401 || err.status === 403) {
        sessionStorage.removeItem(TOKEN_KEY);
        result.textContent = 'The API rejected the token (HTTP ' + err.status + ').';
      } else {
        result.textContent = 'Not triggered: ' + err.message;
      }
    }
  });
}

// renderTrigger enables the button when the API says a POST would act, and
// otherwise disables it with the API's reason beside it (no token
// configured, the job not running). An API that says nothing leaves it on.
export function renderTrigger(actions) {
  const a = actions && actions.trigger_checkpoint;
  const enabled = !a || a.enabled !== false;
  const reason = enabled ? '' : String(a.reason || 'The API does not accept a trigger now.');
  const button = $('trigger-checkpoint');
  button.disabled = !enabled;
  button.title = reason;
  const note = $('trigger-reason');
  note.hidden = enabled;
  if (note.textContent !== reason) note.textContent = reason;
}
