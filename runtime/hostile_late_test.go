package runtime_test

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/connector/datagen"
	"github.com/ingest-engine/ingest/internal/testkit"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/storage"
	"github.com/ingest-engine/ingest/stream"
)

// This file holds the runtime's hostile cases: inputs and conditions under
// which records could be lost without a trace.

// lateWarnings returns the late-record warnings of a JSON log.
func lateWarnings(t *testing.T, l *testkit.SyncBuffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(l.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if strings.HasPrefix(m["msg"].(string), "dropped a late record") {
			out = append(out, m)
		}
	}
	return out
}

// A dropped late record warns at once with its event time, the watermark
// and the operator; further drops warn at most once a minute (of the
// context's clock, moved here without sleeping), each warning saying how
// many drops came without one and the total so far.
//
// Defends "A restart must not lose accepted data": a record the pipeline
// drops as late is never dropped silently (#12 item 4b).
func TestHostileLateRecordWarningsRateLimited(t *testing.T) {
	var logs testkit.SyncBuffer
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ctx := &runtime.Context{Task: checkpoint.TaskID{Operator: "bars", Subtask: 1},
		Log: slog.New(slog.NewJSONHandler(&logs, nil)), Clock: func() time.Time { return now }}
	ev := time.Date(2026, 3, 1, 11, 0, 0, 0, time.UTC).UnixNano()
	wm := time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano() - 1

	ctx.DroppedLate(ev, wm)
	w := lateWarnings(t, &logs)
	if len(w) != 1 {
		t.Fatalf("%d warnings after the first drop, want 1", len(w))
	}
	if w[0]["level"] != "WARN" || w[0]["operator"] != "bars" || w[0]["event_time"] != "2026-03-01T11:00:00Z" ||
		w[0]["watermark"] != "2199-12-31T23:59:59.999999999Z" || w[0]["late_records_total"] != 1.0 {
		t.Errorf("first warning %v: want WARN, operator bars, the event time, the watermark and total 1", w[0])
	}
	for i := range 100 {
		now = now.Add(time.Second * 59 / 100)
		ctx.DroppedLate(ev+int64(i), wm)
	}
	if w := lateWarnings(t, &logs); len(w) != 1 {
		t.Fatalf("%d warnings within the first minute, want 1", len(w))
	}
	now = now.Add(time.Second)
	ctx.DroppedLate(ev, wm)
	w = lateWarnings(t, &logs)
	if len(w) != 2 {
		t.Fatalf("%d warnings a minute after the first, want 2", len(w))
	}
	if w[1]["late_records_total"] != 102.0 || w[1]["unlogged_since_last_warning"] != 100.0 {
		t.Errorf("second warning %v: want total 102, 100 unlogged", w[1])
	}
	now = now.Add(30 * time.Second)
	ctx.DroppedLate(ev, wm)
	if w := lateWarnings(t, &logs); len(w) != 2 {
		t.Fatalf("%d warnings 30 s after the second, want 2", len(w))
	}
}

// dropOp drops as late every record whose id is a multiple of 10 and
// passes the others on.
type dropOp struct{ ctx *runtime.Context }

func (o *dropOp) Open(ctx *runtime.Context) error { o.ctx = ctx; return nil }
func (o *dropOp) ProcessBatch(_ int, r runtime.Records) error {
	var out runtime.Batch[keyCount]
	for _, rec := range r.(runtime.Batch[datagen.Event]) {
		if rec.Value.ID%10 == 0 {
			o.ctx.DroppedLate(rec.Time, rec.Time+1)
			continue
		}
		out = append(out, runtime.Record[keyCount]{Value: keyCount{ID: rec.Value.ID, Key: rec.Value.Key}, Time: rec.Time})
	}
	return o.ctx.Output.Emit(out)
}
func (o *dropOp) ProcessWatermark(int64) error             { return nil }
func (o *dropOp) Snapshot(int64) (runtime.Snapshot, error) { return runtime.Snapshot{}, nil }
func (o *dropOp) NotifyComplete(int64) error               { return nil }
func (o *dropOp) Close() error                             { return nil }

// The job exports the late-record count of every operator that can drop
// late records from its creation, at 0, and counts every drop of every
// subtask live; the warnings are rate-limited per operator, not per
// subtask.
//
// Defends "Monitor at least: … Recovery count and replay volume" in
// spirit: a loss the operator chose must be visible (#12 item 4b).
func TestHostileLateRecordsCounted(t *testing.T) {
	const n = 20_000
	src, err := datagen.Events(datagen.Config{Count: n, Keys: 10, Rate: 400_000})
	if err != nil {
		t.Fatal(err)
	}
	p := stream.New("late")
	events := stream.From[datagen.Event](p, "events", src, stream.Parallelism(2))
	keyed := stream.KeyBy(events, func(e datagen.Event) int64 { return e.Key })
	drop := &runtime.Node{ID: "drop", Describe: "drops every tenth record as late", DropsLate: true,
		NewOperator: func() runtime.Operator { return &dropOp{} }}
	kept := stream.Add[datagen.Event, keyCount](keyed.Stream, drop, stream.Parallelism(2))
	store := newTxStore[keyCount]()
	stream.To(kept, "sink", stream.Sink[keyCount](txSink[keyCount]{store}), stream.Parallelism(1))
	st, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var logs testkit.SyncBuffer
	job, err := p.NewJob(stream.RunOptions{Storage: st, Checkpoint: fastCheckpoints(10 * time.Millisecond), Restart: quickRestarts(0),
		Log: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if got := job.Observe().LateRecords; len(got) != 1 || got["drop"] != 0 {
		t.Fatalf("before Run: late records %v, want drop: 0 and no other operator", got)
	}
	began := time.Now()
	if err := runBounded(t, job); err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(began)
	if got := job.Observe().LateRecords["drop"]; got != n/10 {
		t.Errorf("late records %d, want %d", got, n/10)
	}
	if got := store.count(); got != n-n/10 {
		t.Errorf("%d records kept, want %d", got, n-n/10)
	}
	w := lateWarnings(t, &logs)
	if limit := 1 + int(elapsed/time.Minute); len(w) == 0 || len(w) > limit {
		t.Errorf("%d late-record warnings in %v, want 1 to %d (one a minute per operator)", len(w), elapsed, limit)
	}
}
