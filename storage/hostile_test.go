package storage

import (
	"context"
	"github.com/ingest-engine/ingest/internal/testkit"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Hostile cases of checkpoint storage: each test names the sentence of
// checkpointing.txt it defends and the issue item.

// waitLog waits (60 s at most) until the log holds a line containing every
// part, and returns that line.
func waitLog(t *testing.T, log *testkit.SyncBuffer, parts ...string) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		for _, line := range strings.Split(log.String(), "\n") {
			ok := true
			for _, p := range parts {
				ok = ok && strings.Contains(line, p)
			}
			if ok {
				return line
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log line with %q within 60 s; log:\n%s", parts, log.String())
		}
		time.Sleep(time.Millisecond)
	}
}

// checkpointing.txt: "Monitor at least: … State size and checkpoint-storage
// latency" — a storage call that hangs is reported while it hangs: a WARN
// naming the call and the directory once it is outstanding longer than the
// threshold, and an INFO when it returns. (#12 item 4d)
func TestLocalReportsAHangingCall(t *testing.T) {
	f := NewFaultFS(nil)
	dir := filepath.Join(t.TempDir(), "ck")
	l, err := f.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	var log testkit.SyncBuffer
	l.ReportSlowCalls(slog.New(slog.NewTextHandler(&log, nil)), 20*time.Millisecond)

	// A fast call is not reported.
	if _, err := l.List(context.Background()); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	f.FailWhen(func(op FSOp, path string) error {
		if op == FSSync && strings.Contains(path, ".tmp-_metadata") {
			<-release // the disk hangs in the metadata's fsync
		}
		return nil
	})
	done := make(chan error, 1)
	go func() { done <- l.WriteMetadata(context.Background(), 1, []byte("m")) }()
	warn := waitLog(t, &log, "level=WARN", "storage call has not returned", `call="write metadata of checkpoint 1"`, "storage="+dir)
	t.Log(warn)
	if strings.Contains(log.String(), "list checkpoints") {
		t.Errorf("a call that returned at once was reported:\n%s", log.String())
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	waitLog(t, &log, "level=INFO", "storage call returned", `call="write metadata of checkpoint 1"`, "storage="+dir, "elapsed=")
}

// A call that keeps hanging is reported again, at most once per repeat
// period: the log is not flooded.
func TestSlowCallReportsAreRateBounded(t *testing.T) {
	var log testkit.SyncBuffer
	var s SlowCalls
	s.Report(slog.New(slog.NewTextHandler(&log, nil)), "somewhere", time.Millisecond)
	cfg := *s.cfg.Load()
	cfg.repeat = 50 * time.Millisecond
	s.cfg.Store(&cfg)
	start := time.Now()
	end := s.Begin("list checkpoints")
	waitLog(t, &log, "level=WARN", "list checkpoints")
	time.Sleep(300 * time.Millisecond) // any duration: the bound is relative to it
	end()
	end() // a second call is harmless
	elapsed := time.Since(start)
	warns := strings.Count(log.String(), "storage call has not returned")
	if max := int(elapsed/cfg.repeat) + 1; warns < 1 || warns > max {
		t.Errorf("%d warnings over %v with a repeat of %v, want 1..%d", warns, elapsed, cfg.repeat, max)
	}
	if n := strings.Count(log.String(), "storage call returned"); n != 1 {
		t.Errorf("%d return reports, want 1:\n%s", n, log.String())
	}
}
