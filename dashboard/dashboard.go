// Package dashboard serves the operator's web dashboard: one HTML page, its
// JavaScript modules (assets/*.js, one job each, app.js first) and a style
// sheet, embedded in the binary so that it works offline and behind any
// host:port (no CDN, no build step, no framework).
//
// The page polls the HTTP API of package httpapi every second with relative
// URLs (api/v1/pipeline, api/v1/checkpoints, api/v1/checkpoints/{id}) and
// shows the job's health as the API judges it (failed, checkpoints failing,
// restarting, checkpoints stale) in amber or red with the last failures, the
// pipeline graph with per-operator and per-subtask rates, watermarks with
// their lag and backpressure, charts of checkpoint duration (failed ones
// too), state size and alignment, the time since the last checkpoint, sink
// commit latency, failed checkpoints with their reasons and the subtasks that
// never acknowledged them, and the recoveries the API keeps. It
// therefore has to be mounted at the same path prefix as the API: at "/" next
// to "/api/v1/", or under a prefix with http.StripPrefix for both.
package dashboard

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"strings"
)

//go:embed assets
var assets embed.FS

// contentSecurityPolicy allows the page to load only its own files and to
// talk only to its own origin: a dashboard that must work offline has no
// business reaching anything else, and a stray CDN reference fails loudly.
const contentSecurityPolicy = "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Handler returns the handler that serves the dashboard's files: index.html
// at "/", and its scripts, style.css and favicon.svg beside it. It answers GET and
// HEAD only; each file carries a strong ETag (its SHA-256), so a browser
// revalidates cheaply and a new binary's files are never served stale.
func Handler() http.Handler {
	root, err := fs.Sub(assets, "assets")
	if err != nil {
		// fs.Sub fails only on an invalid directory name, and "assets" is
		// valid; answer rather than panic all the same.
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "dashboard: embedded assets: "+err.Error(), http.StatusInternalServerError)
		})
	}
	return &handler{files: http.FileServerFS(root), etags: etags(root)}
}

// handler wraps the file server with the headers every response needs.
type handler struct {
	files http.Handler
	// etags maps a URL path ("/", "/app.js") to its file's quoted ETag.
	etags map[string]string
}

// ServeHTTP serves one embedded file.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "dashboard: method "+r.Method+" not allowed", http.StatusMethodNotAllowed)
		return
	}
	hdr := w.Header()
	hdr.Set("Content-Security-Policy", contentSecurityPolicy)
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Referrer-Policy", "no-referrer")
	hdr.Set("Cache-Control", "no-cache")
	if tag, ok := h.etags[r.URL.Path]; ok {
		// http.ServeContent, under the file server, answers If-None-Match
		// from this header with 304 Not Modified.
		hdr.Set("ETag", tag)
	}
	h.files.ServeHTTP(w, r)
}

// etags computes the ETag of every embedded file, keyed by the URL path the
// file server serves it at.
func etags(root fs.FS) map[string]string {
	tags := map[string]string{}
	_ = fs.WalkDir(root, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(root, name)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		tag := `"` + hex.EncodeToString(sum[:16]) + `"`
		tags["/"+name] = tag
		if name == "index.html" {
			tags["/"] = tag
		} else if dir, ok := strings.CutSuffix(name, "/index.html"); ok {
			tags["/"+dir+"/"] = tag
		}
		return nil
	})
	return tags
}
