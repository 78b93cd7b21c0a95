package storage

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/internal/testkit"
)

// Hostile cases of checkpoint storage: each test names the sentence of
// checkpointing.txt it defends and the issue item.

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
	log.WaitLine(t, "level=WARN", "list checkpoints")
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
