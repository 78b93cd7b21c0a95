package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ingest-engine/ingest/config"
	"github.com/ingest-engine/ingest/httpapi"
	"github.com/ingest-engine/ingest/internal/testkit"
	"github.com/ingest-engine/ingest/runtime"
)

// TestMain fails the package if any test leaves a goroutine behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const token = "s3cret"

// windowJob builds an unbounded datagen → window → file sink pipeline from
// YAML in a temporary directory.
func windowJob(t *testing.T) *runtime.Job {
	t.Helper()
	src := testkit.WindowPipeline{Name: "api", Interval: 20 * time.Millisecond, Rate: 20000, Keys: 10, Parallelism: 2}.YAML()
	p, err := config.Parse(filepath.Join(t.TempDir(), "p.yaml"), []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	job, err := p.Stream.NewJob(p.RunOptions())
	if err != nil {
		t.Fatal(err)
	}
	return job
}

// call sends a request and decodes the JSON answer into out (when not nil);
// it returns the status code and the raw body.
func call(t *testing.T, srv *httptest.Server, method, path, bearer string, out any) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if out != nil && strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(body, out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, path, err, body)
		}
	}
	return resp.StatusCode, string(body)
}

// eventually polls f until it returns true, failing after d.
func eventually(t *testing.T, d time.Duration, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type pipeline struct {
	Name      string  `json:"name"`
	Status    string  `json:"status"`
	StartedAt *string `json:"started_at"`
	Restarts  *int64  `json:"restarts"`
	Guarantee struct {
		Level   string   `json:"level"`
		Reasons []string `json:"reasons"`
	} `json:"guarantee"`
	Nodes []struct {
		ID          string `json:"id"`
		Kind        string `json:"kind"`
		Describe    string `json:"describe"`
		Parallelism int    `json:"parallelism"`
		Inputs      []struct {
			From         string `json:"from"`
			Partitioning string `json:"partitioning"`
		} `json:"inputs"`
		RecordsIn           int64    `json:"records_in"`
		RecordsOut          int64    `json:"records_out"`
		RecordsInPerSecond  float64  `json:"records_in_per_second"`
		RecordsOutPerSecond float64  `json:"records_out_per_second"`
		BackpressureRatio   *float64 `json:"backpressure_ratio"`
		Watermark           *string  `json:"watermark"`
	} `json:"nodes"`
	LastCheckpoint *struct {
		ID          int64   `json:"id"`
		CompletedAt string  `json:"completed_at"`
		DurationMS  float64 `json:"duration_ms"`
	} `json:"last_checkpoint"`
	SecondsSinceLastCheckpoint *float64 `json:"seconds_since_last_checkpoint"`
	CommittedCheckpoints       int64    `json:"committed_checkpoints"`
}

type checkpointItem struct {
	ID             int64    `json:"id"`
	TriggerTime    string   `json:"trigger_time"`
	DurationMS     *float64 `json:"duration_ms"`
	SyncMS         *float64 `json:"sync_ms"`
	AsyncMS        *float64 `json:"async_ms"`
	AlignmentMaxMS *float64 `json:"alignment_max_ms"`
	StateSizeBytes int64    `json:"state_size_bytes"`
	Status         string   `json:"status"`
	FailureReason  *string  `json:"failure_reason"`
	Final          bool     `json:"final"`
	Tasks          int      `json:"tasks"`
	Subtasks       []struct {
		Operator       string   `json:"operator"`
		Subtask        *int     `json:"subtask"`
		SyncMS         *float64 `json:"sync_ms"`
		AsyncMS        *float64 `json:"async_ms"`
		AlignmentMS    *float64 `json:"alignment_ms"`
		StateSizeBytes *int64   `json:"state_size_bytes"`
	} `json:"subtasks"`
}

type checkpointList struct {
	Checkpoints []checkpointItem `json:"checkpoints"`
}

// The API against a running datagen → window → file pipeline: the pipeline
// JSON has the contract's fields, the history grows, a checkpoint's detail
// lists its subtasks, POST needs the token, a triggered checkpoint gets a
// new id and completes, and stop ends the job with a final checkpoint.
func TestAPIOnRunningJob(t *testing.T) {
	job := windowJob(t)
	srv := httptest.NewServer(httpapi.New(job, httpapi.Options{Token: token}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- job.Run(ctx) }()
	stopped := false
	defer func() {
		if !stopped {
			job.Stop()
			<-done
		}
	}()

	var p pipeline
	eventually(t, 20*time.Second, "a completed checkpoint", func() bool {
		call(t, srv, "GET", "/api/v1/pipeline", "", &p)
		return p.Status == "running" && p.LastCheckpoint != nil
	})
	if p.Name != "api" || p.StartedAt == nil || p.Restarts == nil || *p.Restarts != 0 || p.Guarantee.Level != "exactly-once" || p.Guarantee.Reasons == nil {
		t.Fatalf("pipeline %+v", p)
	}
	if _, err := time.Parse(time.RFC3339Nano, *p.StartedAt); err != nil {
		t.Errorf("started_at %q: %v", *p.StartedAt, err)
	}
	if _, err := time.Parse(time.RFC3339Nano, p.LastCheckpoint.CompletedAt); err != nil || p.LastCheckpoint.DurationMS <= 0 {
		t.Errorf("last checkpoint %+v: %v", p.LastCheckpoint, err)
	}
	if s := p.SecondsSinceLastCheckpoint; s == nil || *s < 0 || *s > 10 {
		t.Errorf("seconds since last checkpoint %v", s)
	}
	kinds := map[string]string{}
	for _, n := range p.Nodes {
		kinds[n.ID] = n.Kind
		if n.BackpressureRatio == nil || *n.BackpressureRatio < 0 || *n.BackpressureRatio > 1 || n.Describe == "" {
			t.Errorf("node %s: backpressure %v, describe %q", n.ID, n.BackpressureRatio, n.Describe)
		}
	}
	if kinds["events"] != "source" || kinds["per_key"] != "operator" || kinds["out"] != "sink" || len(p.Nodes) != 3 {
		t.Fatalf("nodes %+v", p.Nodes)
	}
	if win := p.Nodes[1]; win.ID != "per_key" || len(win.Inputs) != 1 || win.Inputs[0].From != "events" || win.Inputs[0].Partitioning != "hash" {
		t.Errorf("window node %+v: want input from events, hash partitioned", win)
	}
	if src := p.Nodes[0]; src.Parallelism != 2 || src.RecordsOut <= 0 || src.Watermark == nil {
		t.Errorf("source node %+v: want parallelism 2, records out and a watermark", src)
	}

	// The history grows.
	var first checkpointList
	call(t, srv, "GET", "/api/v1/checkpoints", "", &first)
	if len(first.Checkpoints) == 0 {
		t.Fatal("empty history after a completed checkpoint")
	}
	newest := first.Checkpoints[0].ID
	var later checkpointList
	eventually(t, 20*time.Second, "the history to grow", func() bool {
		call(t, srv, "GET", "/api/v1/checkpoints", "", &later)
		return len(later.Checkpoints) > len(first.Checkpoints) && later.Checkpoints[0].ID > newest
	})
	var completed *checkpointItem
	for i, c := range later.Checkpoints {
		if i > 0 && c.ID >= later.Checkpoints[i-1].ID {
			t.Fatalf("history not newest first: %d after %d", c.ID, later.Checkpoints[i-1].ID)
		}
		if c.DurationMS == nil || c.SyncMS == nil || c.AsyncMS == nil || c.AlignmentMaxMS == nil || c.FailureReason == nil {
			t.Fatalf("checkpoint %d lacks contract fields: %+v", c.ID, c)
		}
		if c.Status == "completed" && completed == nil {
			completed = &later.Checkpoints[i]
		}
	}
	if completed == nil {
		t.Fatal("no completed checkpoint in the history")
	}

	// Its detail.
	var detail checkpointItem
	if code, body := call(t, srv, "GET", "/api/v1/checkpoints/"+itoa(completed.ID), "", &detail); code != http.StatusOK {
		t.Fatalf("detail: %d %s", code, body)
	}
	if detail.ID != completed.ID || detail.Status != "completed" || len(detail.Subtasks) != detail.Tasks || detail.Tasks != 5 {
		t.Fatalf("detail %+v: want 5 subtasks (2 events, 1 window, 2 sink)", detail)
	}
	for _, s := range detail.Subtasks {
		if s.Operator == "" || s.Subtask == nil || s.SyncMS == nil || s.AsyncMS == nil || s.AlignmentMS == nil || s.StateSizeBytes == nil {
			t.Fatalf("subtask %+v lacks contract fields", s)
		}
	}
	var e struct{ Error string }
	if code, _ := call(t, srv, "GET", "/api/v1/checkpoints/999999", "", &e); code != http.StatusNotFound || e.Error == "" {
		t.Errorf("unknown checkpoint: %d %q, want 404 with an error", code, e.Error)
	}
	if code, _ := call(t, srv, "GET", "/api/v1/checkpoints/abc", "", nil); code != http.StatusBadRequest {
		t.Errorf("checkpoint abc: %d, want 400", code)
	}
	if code, _ := call(t, srv, "GET", "/api/v1/nothing", "", &e); code != http.StatusNotFound || e.Error == "" {
		t.Errorf("unknown endpoint: %d %q, want 404 with an error", code, e.Error)
	}
	if code, _ := call(t, srv, "DELETE", "/api/v1/pipeline", "", nil); code != http.StatusMethodNotAllowed {
		t.Errorf("DELETE pipeline: %d, want 405", code)
	}

	// POST needs the token.
	for _, bearer := range []string{"", "wrong"} {
		if code, _ := call(t, srv, "POST", "/api/v1/checkpoints", bearer, &e); code != http.StatusUnauthorized || e.Error == "" {
			t.Errorf("POST with token %q: %d, want 401", bearer, code)
		}
		if code, _ := call(t, srv, "POST", "/api/v1/stop", bearer, nil); code != http.StatusUnauthorized {
			t.Errorf("POST stop with token %q: %d, want 401", bearer, code)
		}
	}
	var before checkpointList
	call(t, srv, "GET", "/api/v1/checkpoints", "", &before)
	var trig struct{ ID int64 }
	if code, body := call(t, srv, "POST", "/api/v1/checkpoints", token, &trig); code != http.StatusOK {
		t.Fatalf("trigger: %d %s", code, body)
	}
	if trig.ID <= before.Checkpoints[0].ID {
		t.Fatalf("triggered checkpoint %d, want a new id after %d", trig.ID, before.Checkpoints[0].ID)
	}
	eventually(t, 20*time.Second, "the triggered checkpoint to complete", func() bool {
		var d checkpointItem
		code, _ := call(t, srv, "GET", "/api/v1/checkpoints/"+itoa(trig.ID), "", &d)
		return code == http.StatusOK && d.Status == "completed"
	})

	// Rates need a second of history.
	time.Sleep(1100 * time.Millisecond)
	call(t, srv, "GET", "/api/v1/pipeline", "", &p)
	if p.Nodes[0].RecordsOutPerSecond <= 0 || p.Nodes[1].RecordsInPerSecond <= 0 {
		t.Errorf("rates: source out %v/s, window in %v/s; want > 0", p.Nodes[0].RecordsOutPerSecond, p.Nodes[1].RecordsInPerSecond)
	}

	var metrics string
	if code, body := call(t, srv, "GET", "/metrics", "", nil); code != http.StatusOK || !strings.Contains(body, `ingest_checkpoints_total{pipeline="api",status="completed"}`) {
		t.Errorf("/metrics: %d\n%.2000s", code, body)
	} else {
		metrics = body
	}
	if !strings.Contains(metrics, "go_goroutines") {
		t.Error("/metrics lacks the Go runtime collector")
	}

	// Stop: a final checkpoint, then Run returns nil.
	var st struct{ Status string }
	if code, body := call(t, srv, "POST", "/api/v1/stop", token, &st); code != http.StatusOK || st.Status != "stopping" {
		t.Fatalf("stop: %d %s", code, body)
	}
	select {
	case err := <-done:
		stopped = true
		if err != nil {
			t.Fatalf("Run after stop: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after POST /api/v1/stop")
	}
	call(t, srv, "GET", "/api/v1/pipeline", "", &p)
	var final checkpointList
	call(t, srv, "GET", "/api/v1/checkpoints", "", &final)
	if p.Status != "finished" || !final.Checkpoints[0].Final || final.Checkpoints[0].Status != "completed" || p.LastCheckpoint.ID != final.Checkpoints[0].ID {
		t.Fatalf("after stop: status %s, newest checkpoint %+v, last %+v", p.Status, final.Checkpoints[0], p.LastCheckpoint)
	}
	if code, _ := call(t, srv, "POST", "/api/v1/stop", token, nil); code != http.StatusConflict {
		t.Errorf("stop of a finished job: %d, want 409", code)
	}
	if code, _ := call(t, srv, "POST", "/api/v1/checkpoints", token, nil); code != http.StatusConflict {
		t.Errorf("trigger on a finished job: %d, want 409", code)
	}
}

// Without a configured token every POST is refused with 403 and a message
// that says how to set one; GET still works.
func TestPOSTWithoutConfiguredToken(t *testing.T) {
	job := windowJob(t)
	srv := httptest.NewServer(httpapi.New(job, httpapi.Options{}))
	defer srv.Close()
	for _, path := range []string{"/api/v1/checkpoints", "/api/v1/stop"} {
		for _, bearer := range []string{"", "anything"} {
			var e struct{ Error string }
			code, _ := call(t, srv, "POST", path, bearer, &e)
			if code != http.StatusForbidden || !strings.Contains(e.Error, "http.token") || !strings.Contains(e.Error, httpapi.TokenEnv) {
				t.Errorf("POST %s (token %q): %d %q, want 403 naming http.token and %s", path, bearer, code, e.Error, httpapi.TokenEnv)
			}
		}
	}
	var p pipeline
	if code, _ := call(t, srv, "GET", "/api/v1/pipeline", "", &p); code != http.StatusOK || p.Status != "starting" || p.LastCheckpoint != nil {
		t.Errorf("GET pipeline before Run: %d %+v", code, p)
	}
	var l checkpointList
	if code, body := call(t, srv, "GET", "/api/v1/checkpoints", "", &l); code != http.StatusOK || l.Checkpoints == nil {
		t.Errorf("GET checkpoints before Run: %d %s, want an empty list", code, body)
	}
}

// The environment's token wins over the pipeline file's.
func TestToken(t *testing.T) {
	t.Setenv(httpapi.TokenEnv, "")
	if got := httpapi.Token("file"); got != "file" {
		t.Errorf("Token = %q without the environment, want the file's", got)
	}
	t.Setenv(httpapi.TokenEnv, "env")
	if got := httpapi.Token("file"); got != "env" {
		t.Errorf("Token = %q, want the environment's", got)
	}
}

// A mounted dashboard serves / and the paths below it the API does not take.
func TestDashboardMount(t *testing.T) {
	job := windowJob(t)
	dash := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "dashboard "+r.URL.Path) })
	srv := httptest.NewServer(httpapi.New(job, httpapi.Options{Dashboard: dash}))
	defer srv.Close()
	for _, path := range []string{"/", "/app.js"} {
		if code, body := call(t, srv, "GET", path, "", nil); code != http.StatusOK || body != "dashboard "+path {
			t.Errorf("GET %s: %d %q", path, code, body)
		}
	}
	if code, _ := call(t, srv, "GET", "/api/v1/pipeline", "", nil); code != http.StatusOK {
		t.Errorf("GET /api/v1/pipeline with a dashboard: %d", code)
	}
	bare := httptest.NewServer(httpapi.New(job, httpapi.Options{}))
	defer bare.Close()
	if code, body := call(t, bare, "GET", "/", "", nil); code != http.StatusOK || !strings.Contains(body, "/api/v1/pipeline") {
		t.Errorf("GET / without a dashboard: %d %q, want the index of endpoints", code, body)
	}
}

// itoa formats a checkpoint id for a path.
func itoa(n int64) string { return strconv.FormatInt(n, 10) }
