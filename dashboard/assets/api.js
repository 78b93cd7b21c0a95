// The one way the dashboard talks to the HTTP API: relative URLs, JSON, a
// timeout, and errors that say which request failed and how.

const FETCH_TIMEOUT_MS = 5000; // a request that takes longer counts as failed

// getJSON fetches path and returns its JSON body, or null when the answer
// has no body (a 202 or 204 to a POST). A status other than 2xx throws an
// Error whose status member is the HTTP status.
export async function getJSON(path, init) {
  const ctrl = new AbortController();
  const timer = setTimeout(() => ctrl.abort(), FETCH_TIMEOUT_MS);
  try {
    const resp = await fetch(path, { cache: 'no-store', headers: { Accept: 'application/json' }, signal: ctrl.signal, ...init });
    if (!resp.ok) {
      const body = (await resp.text()).trim().slice(0, 200);
      const err = new Error(path + ': HTTP ' + resp.status + (body ? ': ' + body : ''));
      err.status = resp.status;
      throw err;
    }
    const text = await resp.text();
    if (!text.trim()) return null;
    try {
      return JSON.parse(text);
    } catch (err) {
      throw new Error(path + ': HTTP ' + resp.status + ' but not JSON: ' + err.message);
    }
  } catch (err) {
    if (err.name === 'AbortError') throw new Error(path + ': no answer within ' + FETCH_TIMEOUT_MS / 1000 + ' s');
    throw err;
  } finally {
    clearTimeout(timer);
  }
}
