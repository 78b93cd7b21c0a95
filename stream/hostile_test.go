package stream

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// Hostile inputs of the bad-record policy. Each test names the sentence of
// checkpointing.txt it defends and the item of issue #12.

// "Monitor at least: … Recovery count and replay volume": records a source
// drops are part of what an operator must see. Under on_error: skip only the
// first bad record of a burst was logged: the warnings came only with a new
// bad record at least 10 s after the last, so a burst that ended left its
// count out of the log for good, and nothing was logged at the end (#12
// item 10). Now the running totals are logged at the first read after the
// period and when the subtask closes, and they are the source's totals, the
// values of ingest_source_bad_records_total. The clock is the handler's, so
// no test time passes.
func TestHostileSkipTotalsLoggedPeriodicallyAndAtClose(t *testing.T) {
	logs := &captured{}
	counts := &BadRecordCounts{}
	setup := BadRecordSetup{Policy: BadRecordPolicy{OnError: OnErrorSkip}, Counts: counts}
	b0, err := setup.Open(subtaskCtx(0, slog.New(logs), nil), BadRecordTally{Skipped: 5})
	if err != nil {
		t.Fatal(err)
	}
	b1, err := setup.Open(subtaskCtx(1, slog.New(logs), nil), BadRecordTally{Skipped: 2})
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Unix(1000, 0)
	b0.now = func() time.Time { return clock }
	b1.now = b0.now
	if err := b1.Reject(BadRecord{Partition: "g.jsonl", Line: 1}, errors.New("g.jsonl:1 bad")); err != nil {
		t.Fatal(err)
	}
	// A burst of 1000 bad records within a second, then none.
	for i := range 1000 {
		if err := b0.Reject(BadRecord{Partition: "f.jsonl", Line: int64(i + 1)}, fmt.Errorf("f.jsonl:%d bad", i+1)); err != nil {
			t.Fatal(err)
		}
		clock = clock.Add(time.Millisecond)
	}
	if err := b0.Flush(); err != nil {
		t.Fatal(err)
	}
	want := func(what string, n int, parts ...string) {
		t.Helper()
		if len(logs.msgs) != n {
			t.Fatalf("%s: %d log lines, want %d:\n%s", what, len(logs.msgs), n, strings.Join(logs.msgs, "\n"))
		}
		for _, p := range parts {
			if !strings.Contains(logs.msgs[n-1], p) {
				t.Errorf("%s: %q, want it to contain %q", what, logs.msgs[n-1], p)
			}
		}
	}
	want("the burst", 2, "f.jsonl:1 bad", "skipped=9")
	clock = clock.Add(badRecordLogEvery - 2*time.Second)
	if err := b0.Flush(); err != nil {
		t.Fatal(err)
	}
	want("within the period", 2)
	clock = clock.Add(2 * time.Second)
	if err := b0.Flush(); err != nil {
		t.Fatal(err)
	}
	// The totals are the source's: 5 + 1000 restored and skipped by
	// subtask 0, 2 + 1 by subtask 1, as the metric sums them.
	want("after the period", 3, "subtask=0", "unlogged_since_last_warning=999", "last_err=f.jsonl:1000 bad", "skipped=1008", "subtask_skipped=1005")
	if got := counts.Total().Skipped; got != 1008 {
		t.Fatalf("the metric's count %d, want 1008", got)
	}
	clock = clock.Add(time.Hour)
	if err := b0.Flush(); err != nil {
		t.Fatal(err)
	}
	want("nothing new", 3)
	b0.Close()
	want("at close", 4, "subtask=0", "skipped=1008", "subtask_skipped=1005", "unlogged_since_last_warning=0")
	b1.Close()
	want("at close of subtask 1", 5, "subtask=1", "skipped=1008", "subtask_skipped=3")

	// A subtask without bad records since it opened logs nothing at close,
	// whatever it restored; nor does the default policy (nil).
	quiet, err := setup.Open(subtaskCtx(0, slog.New(logs), nil), BadRecordTally{Skipped: 5})
	if err != nil {
		t.Fatal(err)
	}
	quiet.Close()
	(*BadRecords)(nil).Close()
	want("a quiet close", 5)
}
