// Errors the page hits, kept for the browser test (dashboard/browser_test.go)
// and for anyone who opens the console. Imported first by app.js, so it
// listens before anything else runs.

window.__errors = [];
window.addEventListener('error', (e) => {
  if (e.target && e.target !== window) {
    window.__errors.push('failed to load ' + (e.target.src || e.target.href || e.target.tagName));
    return;
  }
  window.__errors.push(String(e.message || e.error || 'error'));
}, true);
window.addEventListener('unhandledrejection', (e) => {
  window.__errors.push('unhandled rejection: ' + String(e.reason && e.reason.stack || e.reason));
});
document.addEventListener('securitypolicyviolation', (e) => {
  window.__errors.push('blocked by CSP: ' + e.blockedURI + ' (' + e.violatedDirective + ')');
});

// Progress counters the browser test waits on.
window.__dashboard = { polls: 0, renders: 0 };
