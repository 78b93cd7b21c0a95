package dashboard_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/ingest-engine/ingest/dashboard"
)

// get requests path from h and returns the response and its body.
func get(t *testing.T, h http.Handler, method, path string, header map[string]string) (*http.Response, string) {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	resp := rec.Result()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return resp, string(body)
}

// The page, its script, its style sheet and its icon are served from the
// binary with their types and the headers that keep the page self-contained.
func TestHandlerServesEmbeddedFiles(t *testing.T) {
	h := dashboard.Handler()
	for path, want := range map[string]struct{ contentType, contains string }{
		"/":            {"text/html; charset=utf-8", `<script type="module" src="app.js"></script>`},
		"/app.js":      {"text/javascript; charset=utf-8", "api/v1/pipeline"},
		"/graph.js":    {"text/javascript; charset=utf-8", "export function renderGraph"},
		"/style.css":   {"text/css; charset=utf-8", "prefers-color-scheme: dark"},
		"/favicon.svg": {"image/svg+xml", "<svg"},
	} {
		resp, body := get(t, h, http.MethodGet, path, nil)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %s", path, resp.Status)
			continue
		}
		if got := resp.Header.Get("Content-Type"); got != want.contentType {
			t.Errorf("GET %s: Content-Type %q, want %q", path, got, want.contentType)
		}
		if !strings.Contains(body, want.contains) {
			t.Errorf("GET %s: body lacks %q", path, want.contains)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") || !strings.Contains(csp, "connect-src 'self'") {
			t.Errorf("GET %s: Content-Security-Policy %q does not confine the page to its origin", path, csp)
		}
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: no X-Content-Type-Options: nosniff", path)
		}
	}
	if resp, _ := get(t, h, http.MethodGet, "/nope.js", nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /nope.js: %s, want 404", resp.Status)
	}
}

// A browser that has a file revalidates it for a 304; a changed file (another
// ETag) is sent in full.
func TestHandlerRevalidatesWithETag(t *testing.T) {
	h := dashboard.Handler()
	seen := map[string]string{}
	for _, path := range []string{"/", "/app.js", "/style.css"} {
		resp, _ := get(t, h, http.MethodGet, path, nil)
		tag := resp.Header.Get("ETag")
		if !regexp.MustCompile(`^"[0-9a-f]{32}"$`).MatchString(tag) {
			t.Fatalf("GET %s: ETag %q, want a quoted hash", path, tag)
		}
		if other, ok := seen[tag]; ok {
			t.Errorf("%s and %s share the ETag %s: the tags are not per file", other, path, tag)
		}
		seen[tag] = path
		if resp.Header.Get("Cache-Control") != "no-cache" {
			t.Errorf("GET %s: Cache-Control %q, want no-cache", path, resp.Header.Get("Cache-Control"))
		}
		if resp, body := get(t, h, http.MethodGet, path, map[string]string{"If-None-Match": tag}); resp.StatusCode != http.StatusNotModified || body != "" {
			t.Errorf("GET %s If-None-Match %s: %s with %d bytes, want 304 and no body", path, tag, resp.Status, len(body))
		}
		if resp, _ := get(t, h, http.MethodGet, path, map[string]string{"If-None-Match": `"0000"`}); resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s with a stale ETag: %s, want 200", path, resp.Status)
		}
	}
}

// The dashboard only reads: everything but GET and HEAD is refused, so a
// POST meant for the API never lands on a file.
func TestHandlerRefusesOtherMethods(t *testing.T) {
	h := dashboard.Handler()
	if resp, body := get(t, h, http.MethodHead, "/", nil); resp.StatusCode != http.StatusOK || body != "" {
		t.Errorf("HEAD /: %s with %d bytes, want 200 without body", resp.Status, len(body))
	}
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
		resp, _ := get(t, h, m, "/", nil)
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD" {
			t.Errorf("%s /: %s, Allow %q; want 405 and Allow: GET, HEAD", m, resp.Status, resp.Header.Get("Allow"))
		}
	}
}

// Mounted under a prefix, the page still finds its files: its URLs are
// relative.
func TestHandlerUnderPrefix(t *testing.T) {
	h := http.StripPrefix("/ingest", dashboard.Handler())
	for _, ref := range files(t, dashboard.Handler()) {
		if resp, _ := get(t, h, http.MethodGet, "/ingest/"+ref, nil); resp.StatusCode != http.StatusOK {
			t.Errorf("the page needs %s, served under /ingest/ as %s", ref, resp.Status)
		}
	}
}

// files lists every file the page loads: what index.html references and,
// from the scripts, every module they import (transitively).
func files(t *testing.T, h http.Handler) []string {
	t.Helper()
	_, page := get(t, h, http.MethodGet, "/", nil)
	var out []string
	seen := map[string]bool{}
	var add func(ref string)
	add = func(ref string) {
		if seen[ref] {
			return
		}
		seen[ref] = true
		out = append(out, ref)
		if strings.HasSuffix(ref, ".js") && !strings.Contains(ref, ":") {
			_, script := get(t, h, http.MethodGet, "/"+ref, nil)
			for _, m := range regexp.MustCompile(`(?m)^import (?:[^'"]* from )?'\./([^']+)'`).FindAllStringSubmatch(script, -1) {
				add(m[1])
			}
		}
	}
	for _, m := range regexp.MustCompile(`(?:src|href)="([^"]+)"`).FindAllStringSubmatch(page, -1) {
		add(m[1])
	}
	return out
}

// The page works offline: it loads nothing from another origin, every file
// it loads is embedded, and it calls the API by relative URL so it works
// behind any host, port or path prefix.
func TestAssetsAreSelfContained(t *testing.T) {
	h := dashboard.Handler()
	refs := files(t, h)
	for _, want := range []string{"app.js", "style.css", "favicon.svg", "errors.js", "graph.js", "charts.js", "tables.js"} {
		if !slices.Contains(refs, want) {
			t.Errorf("the page loads %q; %s is not among them", refs, want)
		}
	}
	var scripts strings.Builder
	// The one absolute URL allowed is the SVG namespace, which is a name,
	// not a request.
	external := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}`)
	for _, ref := range append([]string{""}, refs...) {
		if strings.Contains(ref, ":") || strings.HasPrefix(ref, "/") {
			t.Errorf("the page loads %q: want a relative URL to an embedded file", ref)
		}
		resp, body := get(t, h, http.MethodGet, "/"+ref, nil)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("the page loads %s, which the handler answers with %s", ref, resp.Status)
		}
		for _, m := range external.FindAllString(body, -1) {
			if m != "http://www.w3.org" {
				t.Errorf("/%s mentions %s: the dashboard must not load anything from elsewhere", ref, m)
			}
		}
		if strings.HasSuffix(ref, ".js") {
			scripts.WriteString(body)
		}
	}
	js := scripts.String()
	if m := regexp.MustCompile("['\"`]/api/").FindString(js); m != "" {
		t.Errorf("a script calls the API by an absolute path (%s…); want relative URLs", m)
	}
	for _, api := range []string{"'api/v1/pipeline'", "'api/v1/checkpoints'", "'api/v1/checkpoints/'"} {
		if !strings.Contains(js, api) {
			t.Errorf("no script calls %s", api)
		}
	}
}
