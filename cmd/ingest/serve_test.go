package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/internal/testkit"
)

// servePipeline is an unbounded datagen → window → file pipeline with the
// http block given, written to a temporary directory.
func servePipeline(t *testing.T, http string) string {
	t.Helper()
	src := `pipeline: served
checkpoint:
  interval: 50ms
` + http + `sources:
  events:
    type: datagen
    rate: 20000
    keys: 10
transforms:
  per_key:
    type: window
    input: events
    key: key
    size: 1s
    aggregates:
      count: count()
sinks:
  out:
    type: file
    input: per_key
    path: out
`
	path := filepath.Join(t.TempDir(), "p.yaml")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// listening finds the server's URL in a JSON log.
var listening = regexp.MustCompile(`"url":"(http://[^"]+)"`)

// `ingest run --http 127.0.0.1:0` serves the API while the pipeline runs:
// the address is in the log, GET answers, the token of the pipeline file's
// http block authorizes POST /api/v1/stop, and run then exits 0 after its
// final checkpoint.
func TestRunServesHTTP(t *testing.T) {
	t.Setenv("INGEST_HTTP_TOKEN", "")
	path := servePipeline(t, "http:\n  token: from-the-file\n")
	cmd := runCmd()
	var stderr testkit.SyncBuffer
	cmd.SetOut(io.Discard)
	cmd.SetErr(&stderr)
	cmd.SetArgs([]string{"--http", "127.0.0.1:0", "--log-format", "json", path})
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	done := make(chan error, 1)
	go func() { done <- cmd.Execute() }()

	var url string
	deadline := time.Now().Add(20 * time.Second)
	for url == "" {
		if m := listening.FindStringSubmatch(stderr.String()); m != nil {
			url = m[1]
		}
		select {
		case err := <-done:
			t.Fatalf("run returned %v before serving:\n%s", err, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no listening address logged:\n%s", stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if strings.HasSuffix(url, ":0") || strings.Contains(url, ":8080") {
		t.Fatalf("served on %s, want the free port picked for 127.0.0.1:0", url)
	}

	type pipeline struct {
		Status         string          `json:"status"`
		LastCheckpoint json.RawMessage `json:"last_checkpoint"`
		Guarantee      struct {
			Level string `json:"level"`
		} `json:"guarantee"`
	}
	var p pipeline
	for p.Status != "running" || string(p.LastCheckpoint) == "null" || p.LastCheckpoint == nil {
		resp, err := http.Get(url + "/api/v1/pipeline")
		if err != nil {
			t.Fatal(err)
		}
		err = json.NewDecoder(resp.Body).Decode(&p)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("pipeline never reported a checkpoint while running: %+v", p)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if p.Guarantee.Level != "exactly-once" {
		t.Errorf("guarantee %q, want exactly-once", p.Guarantee.Level)
	}
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `ingest_records_out_total{operator="events",pipeline="served",subtask="0"}`) {
		t.Errorf("/metrics lacks the source's records:\n%.1500s", body)
	}

	// The dashboard is mounted at /.
	resp, err = http.Get(url + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") || !strings.Contains(string(body), "app.js") {
		t.Errorf("GET /: %d %s, want the dashboard page:\n%.300s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}

	post := func(token string) int {
		req, _ := http.NewRequest("POST", url+"/api/v1/stop", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post("wrong"); code != http.StatusUnauthorized {
		t.Fatalf("stop with a wrong token: %d, want 401", code)
	}
	if code := post("from-the-file"); code != http.StatusOK {
		t.Fatalf("stop with the file's token: %d, want 200", code)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run after POST /api/v1/stop: %v\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run did not exit after POST /api/v1/stop")
	}
	if !strings.Contains(stderr.String(), `"msg":"final checkpoint committed"`) {
		t.Errorf("no final checkpoint in the log:\n%s", stderr.String())
	}
	if _, err := http.Get(url + "/api/v1/pipeline"); err == nil {
		t.Error("the HTTP server still answers after run returned")
	}
}

// A busy port fails run at start with an error naming the address and the
// flag; --http "" runs without a server.
func TestRunHTTPPortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().String()
	path := servePipeline(t, "")
	_, stderr, err := runCLI(runCmd(), "--http", addr, path)
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != exitConfig || !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "--http") {
		t.Fatalf("run on a busy port: %v, want an error naming %s and --http\n%s", err, addr, stderr)
	}

	// Bounded, without a server: nothing listens, it finishes.
	bounded := servePipeline(t, "")
	data, _ := os.ReadFile(bounded)
	if err := os.WriteFile(bounded, bytes.Replace(data, []byte("    rate: 20000\n"), []byte("    count: 2000\n"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, err = runCLI(runCmd(), "--http", "", bounded)
	if err != nil || strings.Contains(stderr, "HTTP server listening") {
		t.Fatalf("run --http \"\": %v\n%s", err, stderr)
	}
}

// --log-format accepts text and json only.
func TestRunLogFormat(t *testing.T) {
	_, _, err := runCLI(runCmd(), "--log-format", "xml", "p.yaml")
	if err == nil || !strings.Contains(err.Error(), `log format "xml": use text or json`) {
		t.Fatalf("--log-format xml: %v", err)
	}
}
