// Package httpapi serves a running job over HTTP: Prometheus metrics, the
// pipeline's graph and status, the checkpoint history, and two operator
// actions (trigger a checkpoint, stop with a final checkpoint).
//
//	GET  /metrics                    Prometheus metrics (package metrics)
//	GET  /api/v1/pipeline            graph, parallelism, rates, guarantee, status
//	GET  /api/v1/checkpoints         the last 1000 checkpoints, newest first
//	GET  /api/v1/checkpoints/{id}    one checkpoint with its subtasks
//	POST /api/v1/checkpoints         trigger a checkpoint now: {"id": N}
//	POST /api/v1/stop                stop with a final checkpoint
//	GET  /                           the dashboard, when one is mounted
//
// The pipeline answer carries the job's health as the API judges it
// (health.go: failed, checkpoints failing, restarting, checkpoints stale),
// so that every client shows trouble the same way.
//
// GET is open. POST requires "Authorization: Bearer <token>" with the
// configured token; without a configured token POST is refused (403), so a
// server started without one cannot be used to stop the pipeline. Errors
// are JSON objects {"error": "..."}. docs/operations.md describes the API.
package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/metrics"
	"github.com/ingest-engine/ingest/runtime"
)

// TokenEnv is the environment variable that holds the token POST requests
// must carry when the pipeline file sets none (see Options.Token).
const TokenEnv = "INGEST_HTTP_TOKEN"

// noTokenMessage is the answer to every POST when no token is configured.
const noTokenMessage = "POST endpoints are disabled because no token is configured: set http.token in the pipeline file " +
	"or the " + TokenEnv + " environment variable, restart, and send Authorization: Bearer <token>"

// Job is what the API serves; *runtime.Job implements it.
type Job interface {
	Observe() runtime.Observation
	Checkpoints() []runtime.CheckpointRecord
	Checkpoint(id int64) (runtime.CheckpointRecord, bool)
	RecoveryLog() []runtime.RecoveryEvent
	CheckpointOptions() checkpoint.Options
	TriggerCheckpoint() (int64, error)
	Stop()
}

// Options configures the handler.
type Options struct {
	// Token is the bearer token POST requests must carry. Empty refuses
	// every POST with 403 and a message saying how to set one.
	// The default value is "". CLI: http.token in the pipeline file, or
	// INGEST_HTTP_TOKEN (see Token).
	Token string
	// Delivery, when set, is the delivery guarantee /api/v1/pipeline shows
	// instead of the job's (Observation.Delivery): the YAML builder's adds
	// the caveats of nondeterministic expressions.
	Delivery *runtime.Delivery
	// Dashboard is served at / and below it (paths other handlers do not
	// take); nil serves a short index of the endpoints there.
	Dashboard http.Handler
	// Gatherer serves /metrics; nil registers the job's collector (package
	// metrics) with Go runtime and process collectors in a registry of the
	// handler's own.
	Gatherer prometheus.Gatherer
	// Collectors are registered with the job's collector when Gatherer is
	// nil (e.g. metrics.NewBadRecordCollector).
	Collectors []prometheus.Collector
}

// Token returns the token to guard POST requests with: the environment's
// INGEST_HTTP_TOKEN when set, else fromFile (http.token of the pipeline
// file). The environment wins so a deployment can rotate the token without
// editing the file.
func Token(fromFile string) string {
	if t := os.Getenv(TokenEnv); t != "" {
		return t
	}
	return fromFile
}

// handler serves the API for one job.
type handler struct {
	job   Job
	opts  Options
	rates *sampler
	mux   *http.ServeMux
}

// New returns the API handler for job.
func New(job Job, opts Options) http.Handler {
	h := &handler{job: job, opts: opts, rates: &sampler{}, mux: http.NewServeMux()}
	g := opts.Gatherer
	if g == nil {
		reg := prometheus.NewRegistry()
		reg.MustRegister(metrics.NewCollector(job), collectors.NewGoCollector(),
			collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		reg.MustRegister(opts.Collectors...)
		g = reg
	}
	h.mux.Handle("/metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	h.mux.HandleFunc("/api/v1/pipeline", h.methods(map[string]http.HandlerFunc{http.MethodGet: h.pipeline}))
	h.mux.HandleFunc("/api/v1/checkpoints", h.methods(map[string]http.HandlerFunc{http.MethodGet: h.checkpoints, http.MethodPost: h.trigger}))
	h.mux.HandleFunc("/api/v1/checkpoints/{id}", h.methods(map[string]http.HandlerFunc{http.MethodGet: h.checkpoint}))
	h.mux.HandleFunc("/api/v1/stop", h.methods(map[string]http.HandlerFunc{http.MethodPost: h.stop}))
	h.mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no API endpoint "+r.URL.Path+" (see /api/v1/pipeline, /api/v1/checkpoints, /api/v1/stop)")
	})
	if opts.Dashboard != nil {
		h.mux.Handle("/", opts.Dashboard)
	} else {
		h.mux.HandleFunc("/", index)
	}
	return h
}

// ServeHTTP implements http.Handler.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// methods dispatches by method; POST handlers require the token. Other
// methods get 405 with the allowed ones.
func (h *handler) methods(by map[string]http.HandlerFunc) http.HandlerFunc {
	var allowed []string
	for m := range by {
		allowed = append(allowed, m)
	}
	return func(w http.ResponseWriter, r *http.Request) {
		f, ok := by[r.Method]
		if !ok && r.Method == http.MethodHead {
			f, ok = by[http.MethodGet]
		}
		if !ok {
			w.Header().Set("Allow", strings.Join(allowed, ", "))
			writeError(w, http.StatusMethodNotAllowed, r.Method+" is not allowed on "+r.URL.Path)
			return
		}
		if r.Method == http.MethodPost && !h.authorized(w, r) {
			return
		}
		f(w, r)
	}
}

// authorized checks the bearer token of a POST and answers 403 (no token
// configured) or 401 (missing or wrong token) when it does not pass.
func (h *handler) authorized(w http.ResponseWriter, r *http.Request) bool {
	if h.opts.Token == "" {
		writeError(w, http.StatusForbidden, noTokenMessage)
		return false
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	// Hashing both sides makes the comparison constant-time in the length too.
	a, b := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(h.opts.Token))
	if !ok || subtle.ConstantTimeCompare(a[:], b[:]) != 1 {
		w.Header().Set("WWW-Authenticate", `Bearer realm="ingest"`)
		writeError(w, http.StatusUnauthorized, "missing or wrong token: send Authorization: Bearer <token> with the token of http.token or "+TokenEnv)
		return false
	}
	return true
}

func (h *handler) pipeline(w http.ResponseWriter, _ *http.Request) {
	o := h.job.Observe()
	d := o.Delivery
	if h.opts.Delivery != nil {
		d = *h.opts.Delivery
	}
	writeJSON(w, http.StatusOK, pipelineOf(view{o: o, delivery: d, rates: h.rates.rates(o), history: h.job.Checkpoints(),
		log: h.job.RecoveryLog(), opts: h.job.CheckpointOptions(), actions: h.actions(o.Phase)}))
}

func (h *handler) checkpoints(w http.ResponseWriter, _ *http.Request) {
	o := h.job.Observe()
	tasks := taskSet(o)
	recs := h.job.Checkpoints()
	out := checkpointList{Checkpoints: make([]checkpointJSON, 0, len(recs))}
	for _, r := range recs {
		out.Checkpoints = append(out.Checkpoints, checkpointOf(r, o.At, tasks))
	}
	writeJSON(w, http.StatusOK, out)
}

func (h *handler) checkpoint(w http.ResponseWriter, r *http.Request) {
	s := r.PathValue("id")
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id < 1 {
		writeError(w, http.StatusBadRequest, "checkpoint id "+strconv.Quote(s)+" is not a positive whole number")
		return
	}
	rec, ok := h.job.Checkpoint(id)
	if !ok {
		writeError(w, http.StatusNotFound, "checkpoint "+s+" is not in the history (it keeps the last "+strconv.Itoa(runtime.HistorySize)+" checkpoints this process triggered)")
		return
	}
	o := h.job.Observe()
	writeJSON(w, http.StatusOK, detailOf(rec, o.At, taskSet(o)))
}

func (h *handler) trigger(w http.ResponseWriter, r *http.Request) {
	type result struct {
		id  int64
		err error
	}
	done := make(chan result, 1)
	go func() {
		id, err := h.job.TriggerCheckpoint()
		done <- result{id, err}
	}()
	select {
	case res := <-done:
		switch {
		case errors.Is(res.err, runtime.ErrNotRunning):
			writeError(w, http.StatusConflict, res.err.Error())
		case res.err != nil:
			writeError(w, http.StatusInternalServerError, res.err.Error())
		default:
			writeJSON(w, http.StatusOK, map[string]int64{"id": res.id})
		}
	case <-r.Context().Done():
		// The client left; the checkpoint is triggered anyway once there
		// is room.
	}
}

func (h *handler) stop(w http.ResponseWriter, _ *http.Request) {
	switch ph := h.job.Observe().Phase; ph {
	case runtime.PhaseFinished, runtime.PhaseFailed:
		writeError(w, http.StatusConflict, "the job is "+string(ph)+": nothing to stop")
		return
	}
	h.job.Stop()
	writeJSON(w, http.StatusOK, map[string]string{"status": string(runtime.PhaseStopping)})
}

// index answers / when no dashboard is mounted.
func index(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" {
		writeError(w, http.StatusNotFound, "not found: "+r.URL.Path)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ingest: no dashboard in this build.\n\n" +
		"GET  /metrics\nGET  /api/v1/pipeline\nGET  /api/v1/checkpoints\nGET  /api/v1/checkpoints/{id}\n" +
		"POST /api/v1/checkpoints   (Authorization: Bearer <token>)\nPOST /api/v1/stop          (Authorization: Bearer <token>)\n"))
}

// writeJSON answers with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v) // the client may be gone; nothing to do about it
}

// writeError answers with {"error": msg}.
func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}
