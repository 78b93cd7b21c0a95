package dashboard_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
)

// The simulated API must answer in the shape package httpapi promises, or the
// browser test proves the page against the wrong thing. This checks the JSON
// itself, member by member and type by type, not the Go structs that made it.
func TestFakeAPIFollowsTheContract(t *testing.T) {
	wall := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	fake := newFakeAPI(func() time.Time { return wall })
	h := fake.handler()
	fetch := func(path string) map[string]any {
		t.Helper()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != http.StatusOK || !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
			t.Fatalf("GET %s: %d %s", path, rec.Code, rec.Header().Get("Content-Type"))
		}
		var v map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		return v
	}

	p := fetch("/api/v1/pipeline")
	want(t, p, "name", "string")
	want(t, p, "status", "string")
	if s := p["status"]; !slices.Contains([]any{"starting", "recovering", "running", "finished", "failed", "stopping"}, s) {
		t.Errorf("status %v is not one of the contract's", s)
	}
	want(t, p, "started_at", "time")
	want(t, p, "restarts", "int")
	want(t, p, "committed_checkpoints", "int")
	want(t, p, "seconds_since_last_checkpoint", "number")
	want(t, p["guarantee"].(map[string]any), "level", "string")
	want(t, p["guarantee"].(map[string]any), "reasons", "array")
	last := p["last_checkpoint"].(map[string]any)
	want(t, last, "id", "int")
	want(t, last, "completed_at", "time")
	want(t, last, "duration_ms", "number")
	want(t, p, "recovery_history", "array")
	for _, e := range p["recovery_history"].([]any) {
		e := e.(map[string]any)
		for k, typ := range map[string]string{"time": "time", "attempt": "int", "cause": "string", "class": "string", "failure": "string"} {
			want(t, e, k, typ)
		}
		if _, ok := e["restored_checkpoint"]; !ok {
			t.Errorf("recovery %v lacks restored_checkpoint (null when none existed)", e)
		}
	}
	nodes := p["nodes"].([]any)
	if len(nodes) != len(fakeGraph) {
		t.Fatalf("%d nodes, want %d", len(nodes), len(fakeGraph))
	}
	for _, n := range nodes {
		n := n.(map[string]any)
		for k, typ := range map[string]string{"id": "string", "kind": "string", "describe": "string", "parallelism": "int",
			"inputs": "array", "records_in": "int", "records_out": "int", "records_in_per_second": "number",
			"records_out_per_second": "number", "backpressure_ratio": "number", "watermark": "time", "watermark_lag_ms": "number"} {
			want(t, n, k, typ)
		}
		if r := n["backpressure_ratio"].(float64); r < 0 || r > 1 {
			t.Errorf("node %v: backpressure_ratio %v outside 0..1", n["id"], r)
		}
		for _, in := range n["inputs"].([]any) {
			want(t, in.(map[string]any), "from", "string")
			want(t, in.(map[string]any), "partitioning", "string")
		}
	}

	list := fetch("/api/v1/checkpoints")["checkpoints"].([]any)
	if len(list) == 0 || len(list) > 1000 {
		t.Fatalf("%d checkpoints, want 1..1000", len(list))
	}
	prev := int64(1 << 62)
	failed := 0
	for _, c := range list {
		c := c.(map[string]any)
		for k, typ := range map[string]string{"id": "int", "trigger_time": "time", "duration_ms": "number", "sync_ms": "number",
			"async_ms": "number", "alignment_max_ms": "number", "state_size_bytes": "int", "status": "string", "failure_reason": "string"} {
			want(t, c, k, typ)
		}
		if _, ok := c["subtasks"]; ok {
			t.Errorf("checkpoint %v: the list carries subtasks; only /api/v1/checkpoints/{id} does", c["id"])
		}
		id := int64(c["id"].(float64))
		if id >= prev {
			t.Fatalf("checkpoint %d after %d: want newest first", id, prev)
		}
		prev = id
		switch c["status"] {
		case "failed":
			failed++
			if c["failure_reason"] == "" {
				t.Errorf("failed checkpoint %d has no failure_reason", id)
			}
		case "completed", "in_progress":
		default:
			t.Errorf("checkpoint %d: status %v", id, c["status"])
		}
	}
	if failed == 0 {
		t.Error("the history has no failed checkpoint to show")
	}

	detail := fetch("/api/v1/checkpoints/20")
	subtasks := detail["subtasks"].([]any)
	if len(subtasks) == 0 {
		t.Fatal("checkpoint 20 has no subtasks")
	}
	for _, st := range subtasks {
		for k, typ := range map[string]string{"operator": "string", "subtask": "int", "sync_ms": "number", "async_ms": "number",
			"alignment_ms": "number", "state_size_bytes": "int"} {
			want(t, st.(map[string]any), k, typ)
		}
	}

	// Checkpoints advance with the clock: one every 200 ms of wall time.
	before := p["committed_checkpoints"].(float64)
	wall = wall.Add(time.Second)
	after := fetch("/api/v1/pipeline")["committed_checkpoints"].(float64)
	if d := after - before; d < 3 || d > 5 {
		t.Errorf("one second later %v more committed checkpoints, want 3..5", d)
	}
}

// want checks that obj[key] exists and has the JSON type typ: string,
// number, int (a number without fraction), time (an RFC 3339 string) or
// array.
func want(t *testing.T, obj map[string]any, key, typ string) {
	t.Helper()
	v, ok := obj[key]
	if !ok {
		t.Errorf("member %q missing", key)
		return
	}
	good := false
	switch typ {
	case "string":
		_, good = v.(string)
	case "number":
		_, good = v.(float64)
	case "int":
		f, isNum := v.(float64)
		good = isNum && f == float64(int64(f))
	case "time":
		s, isStr := v.(string)
		_, err := time.Parse(time.RFC3339, s)
		good = isStr && err == nil
	case "array":
		_, good = v.([]any)
	}
	if !good {
		t.Errorf("member %q = %#v, want %s", key, v, typ)
	}
}
