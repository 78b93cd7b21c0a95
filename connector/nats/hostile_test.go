package nats_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/connector/file"
	"github.com/ingest-engine/ingest/connector/nats"
	"github.com/ingest-engine/ingest/internal/natstest"
	"github.com/ingest-engine/ingest/internal/testkit"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/stream"
)

// The hostile cases of the NATS source: messages removed from the stream
// (a purge, a retention limit, a deletion) while the source reads it, or
// while the job is down, must stop the job with an error naming the stream,
// the subject and the removed sequences, never be skipped silently (#12
// item 4a). They defend "Replayable source - The source can resume from
// the position saved in a checkpoint" and "A restart must not lose accepted
// data, repeat already-visible output, or combine state from different
// points in the stream": a source that jumps over removed messages resumes
// from a position it never reached.
//
// Events are published in id order to a fresh stream, so event i is stream
// sequence i+1; event i has subject ev.(i%4), so the filter ev.1 reads the
// events 1, 5, 9, … and crosses three other subjects' messages between two
// of its own.

// stream returns the fixture's stream handle.
func (f *fixture) stream() jetstream.Stream {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := f.js.Stream(ctx, f.name)
	if err != nil {
		f.t.Fatal(err)
	}
	return s
}

// deleteMsgs deletes the messages at the sequences.
func (f *fixture) deleteMsgs(seqs ...uint64) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, seq := range seqs {
		if err := f.stream().DeleteMsg(ctx, seq); err != nil {
			f.t.Fatalf("deleting sequence %d: %v", seq, err)
		}
	}
}

// purge purges the stream (with opts: a part of it).
func (f *fixture) purge(opts ...jetstream.StreamPurgeOpt) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := f.stream().Purge(ctx, opts...); err != nil {
		f.t.Fatalf("purging: %v", err)
	}
}

// readToEnd reads until Read fails (the error is returned) or the source
// is exhausted (nil), within 60s.
func (s subtask[T]) readToEnd(t testing.TB) error {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		res, err := s.src.Read()
		if err != nil {
			return err
		}
		if res.Exhausted {
			return nil
		}
		if res.Wait > 0 {
			time.Sleep(res.Wait)
		}
	}
	t.Fatalf("neither an error nor the end after 60s; %d records", len(s.out.recs))
	return nil
}

// wantGap checks that err is the gap error: it wraps ErrGap and
// runtime.ErrIncompatible (a restart cannot cure it) and names the stream,
// the subject (when filtered) and every one of the parts.
func wantGap(t testing.TB, err error, f *fixture, subject string, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatal("no error: the removed messages were skipped silently")
	}
	if !errors.Is(err, nats.ErrGap) || !errors.Is(err, runtime.ErrIncompatible) {
		t.Fatalf("error %q: want it to wrap nats.ErrGap and runtime.ErrIncompatible", err)
	}
	for _, p := range append([]string{"stream " + f.name}, parts...) {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("error %q does not name %q", err, p)
		}
	}
	if subject != "" && !strings.Contains(err.Error(), "subject "+subject) {
		t.Fatalf("error %q does not name the subject %s", err, subject)
	}
}

// checkPrefix checks that got is the events from, from+step, … (a prefix
// of that sequence at most below): what a source that stopped at a gap
// emitted before it.
func checkPrefix(t testing.TB, got []int64, from, step, below int64) {
	t.Helper()
	for i, id := range got {
		if want := from + int64(i)*step; id != want || id >= below {
			t.Fatalf("record %d has id %d, want %d below %d (ids %v)", i, id, want, below, got)
		}
	}
}

// nextAfter is the stream sequence after the last event of recs.
func nextAfter(recs []runtime.Record[event]) uint64 {
	return uint64(recs[len(recs)-1].Value.ID) + 2
}

// gapCase is one way of reading the stream: the whole of it, or the ev.1
// filter.
type gapCase struct {
	name     string
	filtered bool
}

var gapCases = []gapCase{{"whole-stream", false}, {"filter", true}}

// setup returns the source configuration of the case (stop_at latest,
// small batches) and the step between two ids it reads.
func (c gapCase) setup(f *fixture) (nats.SourceConfig, int64, int64) {
	cfg := f.config()
	cfg.BatchSize = 20
	cfg.StopAt = nats.StopAtLatest
	if c.filtered {
		cfg.Subject = f.subject("ev.1")
		return cfg, 1, 4
	}
	return cfg, 0, 1
}

func (c gapCase) subject(f *fixture) string {
	if c.filtered {
		return f.subject("ev.1")
	}
	return ""
}

// #12 item 4a: DeleteMsg of one message ahead of the reader.
func TestGapMessageDeletedAhead(t *testing.T) {
	url := requireServer(t)
	for _, c := range gapCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newStream(t, url)
			f.publishEvents(0, 400, 5)
			cfg, first, step := c.setup(f)
			st := open(t, eventSource(t, cfg), nil)
			st.readUntil(t, 5)
			f.deleteMsgs(202) // event 201, subject ev.1
			err := st.readToEnd(t)
			wantGap(t, err, f, c.subject(f), "sequence 202")
			checkPrefix(t, ids(st.out.recs), first, step, 201)
		})
	}
}

// #12 item 4a: a purge of the whole stream while the source reads it: a
// bounded source ends, an unbounded one sees new messages after the purge,
// or none at all.
func TestGapPurgeWhileReading(t *testing.T) {
	url := requireServer(t)
	for _, c := range gapCases {
		for _, after := range []string{"stop-at-latest", "new-messages", "quiet"} {
			t.Run(c.name+"/"+after, func(t *testing.T) {
				t.Parallel()
				f := newStream(t, url)
				f.publishEvents(0, 400, 5)
				cfg, first, step := c.setup(f)
				if after != "stop-at-latest" {
					cfg.StopAt = nats.StopNever
				}
				st := open(t, eventSource(t, cfg), nil)
				st.readUntil(t, 5)
				f.purge()
				if after == "new-messages" {
					f.publishEvents(400, 408, 5)
				}
				err := st.readToEnd(t)
				// The source read a batch; the purge removed everything
				// after it, up to sequence 400.
				next := nextAfter(st.out.recs)
				wantGap(t, err, f, c.subject(f), fmt.Sprintf("sequences %d-400", next))
				checkPrefix(t, ids(st.out.recs), first, step, 400)
			})
		}
	}
}

// #12 item 4a: a retention limit (max_msgs) removes messages ahead of a
// reader that lags behind.
func TestGapRetentionMaxMsgs(t *testing.T) {
	url := requireServer(t)
	for _, c := range gapCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newStreamWith(t, url, func(sc *jetstream.StreamConfig) { sc.MaxMsgs = 400 })
			f.publishEvents(0, 400, 5)
			cfg, first, step := c.setup(f)
			cfg.StopAt = nats.StopNever
			st := open(t, eventSource(t, cfg), nil)
			st.readUntil(t, 5)
			f.publishEvents(400, 500, 5) // sequences 1-100 go
			err := st.readToEnd(t)
			next := nextAfter(st.out.recs)
			wantGap(t, err, f, c.subject(f), fmt.Sprintf("sequences %d-100", next), "begins at 101")
			checkPrefix(t, ids(st.out.recs), first, step, 100)
		})
	}
}

// #12 item 4a: a retention limit (max_age) removes messages ahead of a
// reader that lags behind.
func TestGapRetentionMaxAge(t *testing.T) {
	url := requireServer(t)
	for _, c := range gapCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newStreamWith(t, url, func(sc *jetstream.StreamConfig) { sc.MaxAge, sc.Duplicates = time.Second, time.Second })
			f.publishEvents(0, 200, 5)
			cfg, first, step := c.setup(f)
			st := open(t, eventSource(t, cfg), nil)
			st.readUntil(t, 5)
			for deadline := time.Now().Add(60 * time.Second); f.state().Msgs > 0; time.Sleep(50 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("max_age 1s: %d messages still there after 60s", f.state().Msgs)
				}
			}
			err := st.readToEnd(t)
			next := nextAfter(st.out.recs)
			wantGap(t, err, f, c.subject(f), fmt.Sprintf("sequences %d-200", next))
			checkPrefix(t, ids(st.out.recs), first, step, 200)
		})
	}
}

// #12 item 4a: messages removed while the job is down, ahead of the
// checkpoint's next sequence, are found when it is restored (the next
// sequence itself removed is ErrPositionLost, TestRestoreRefusals).
func TestGapRemovedWhileStopped(t *testing.T) {
	url := requireServer(t)
	for _, c := range gapCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newStream(t, url)
			f.publishEvents(0, 400, 5)
			cfg, _, _ := c.setup(f)
			src := eventSource(t, cfg)
			st := open(t, src, nil)
			st.readUntil(t, 5)
			pos := st.position(t)
			_ = st.src.Close()
			f.deleteMsgs(302) // event 301, subject ev.1
			_, err := tryOpen(src, pos)
			wantGap(t, err, f, c.subject(f), "302")
		})
	}
}

// No false alarm (#12 item 4a): sequences missing before the source
// started (deleted before, a stream whose first sequence is not 1), other
// subjects between the filter's messages, messages removed behind the
// reader, and a restore over such holes read exactly the messages there
// are.
func TestGapNoFalseAlarm(t *testing.T) {
	url := requireServer(t)
	for _, c := range gapCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newStream(t, url)
			f.publishEvents(0, 400, 5)
			f.deleteMsgs(5, 10, 300, 301, 302) // events 4, 9, 299-301: before the source starts
			cfg, first, step := c.setup(f)
			src := eventSource(t, cfg)
			st := open(t, src, nil)
			st.readUntil(t, 5)
			f.deleteMsgs(2, 3, 4) // events 1-3, behind the reader
			f.purge(jetstream.WithPurgeSequence(2))
			st.readUntil(t, 30)
			pos := st.position(t)
			_ = st.src.Close()

			// The restore continues over the holes of before.
			st2 := open(t, src, pos)
			if err := st2.readToEnd(t); err != nil {
				t.Fatalf("Read: %v", err)
			}
			got := append(ids(st.out.recs), ids(st2.out.recs)...)
			var want []int64
			for id := first; id < 400; id += step {
				if id != 4 && id != 9 && (id < 299 || id > 301) {
					want = append(want, id)
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("read ids %v,\nwant %v", got, want)
			}
		})
	}
}

// logBuffer returns a logger writing text to a buffer.
func logBuffer() (*slog.Logger, *testkit.SyncBuffer) {
	buf := &testkit.SyncBuffer{}
	return slog.New(slog.NewTextHandler(buf, nil)), buf
}

// openWithLog opens the source's subtask with log, restored from pos when
// pos is not nil.
func openWithLog[T any](t testing.TB, src *nats.Source[T], pos []byte, log *slog.Logger) (subtask[T], error) {
	t.Helper()
	out := &collector[T]{}
	s := runtime.EraseSource(src.NewSubtask())
	ctx := &runtime.Context{Task: checkpoint.TaskID{Operator: "events"}, Parallelism: 1, MaxParallelism: 128, Output: out, JobID: "job", Log: log}
	if pos != nil {
		ctx.Restored = &checkpoint.SubtaskState{Task: ctx.Task, Inline: pos}
	}
	if err := s.Open(ctx); err != nil {
		_ = s.Close()
		return subtask[T]{}, err
	}
	t.Cleanup(func() { _ = s.Close() })
	return subtask[T]{src: s, out: out}, nil
}

// on_gap: skip (#12 item 4a) reads on past removed messages: it counts
// them (in the position, so a restore resumes the count) and logs each
// range at WARN; the next sequence of a checkpoint removed is skipped too.
func TestOnGapSkip(t *testing.T) {
	url := requireServer(t)
	for _, c := range gapCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newStream(t, url)
			f.publishEvents(0, 400, 5)
			cfg, first, step := c.setup(f)
			cfg.OnGap = nats.OnGapSkip
			src := eventSource(t, cfg)
			log, buf := logBuffer()
			st, err := openWithLog(t, src, nil, log)
			if err != nil {
				t.Fatal(err)
			}
			st.readUntil(t, 5)
			early := st.position(t)
			next := nextAfter(st.out.recs)
			f.deleteMsgs(202, 203, 302) // events 201, 202 and 301
			if err := st.readToEnd(t); err != nil {
				t.Fatalf("Read: %v", err)
			}
			var want []int64
			for id := first; id < 400; id += step {
				if id != 201 && id != 202 && id != 301 {
					want = append(want, id)
				}
			}
			if got := ids(st.out.recs); !slices.Equal(got, want) {
				t.Fatalf("read ids %v,\nwant %v", got, want)
			}
			if got, want := src.SkippedGaps(), (nats.GapTally{Ranges: 2, Sequences: 3}); got != want {
				t.Errorf("SkippedGaps %+v, want %+v", got, want)
			}
			for _, w := range []string{"level=WARN", "sequences 202-203", "sequence 302", f.name} {
				if !strings.Contains(buf.String(), w) {
					t.Errorf("the log does not say %q:\n%s", w, buf)
				}
			}
			var p struct {
				Gaps nats.GapTally `json:"gaps"`
			}
			if err := json.Unmarshal(st.position(t), &p); err != nil || p.Gaps != (nats.GapTally{Ranges: 2, Sequences: 3}) {
				t.Errorf("position %s: want the gap count 2 ranges, 3 sequences", st.position(t))
			}

			// Restored from a checkpoint taken before the deletions, whose
			// next sequence was purged since: read on from the stream's
			// first sequence, and count the purged range and the deleted
			// messages ahead once each.
			purgedTo := uint64(30)
			if c.filtered {
				purgedTo = 90
			}
			f.purge(jetstream.WithPurgeSequence(purgedTo))
			st2, err := openWithLog(t, src, early, log)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			if err := st2.readToEnd(t); err != nil {
				t.Fatalf("Read: %v", err)
			}
			if got := ids(st2.out.recs); len(got) == 0 || got[0] != int64(purgedTo)-1 {
				t.Fatalf("the restored read begins at id %v, want %d (sequence %d)", got[:min(len(got), 1)], purgedTo-1, purgedTo)
			}
			if got, want := src.SkippedGaps(), (nats.GapTally{Ranges: 3, Sequences: int64(purgedTo-next) + 3}); got != want {
				t.Errorf("SkippedGaps after the restore %+v, want %+v", got, want)
			}
			if w := fmt.Sprintf("sequences %d-%d", next, purgedTo-1); !strings.Contains(buf.String(), w) {
				t.Errorf("the log does not name the purged range %s:\n%s", w, buf)
			}
		})
	}
}

// gapJob is NATS (filter ev.1, stop_at latest) → an operator that deletes
// message del when it sees the first batch (the source is at most a few
// batches ahead: backpressure) → the file sink, with checkpoints every
// 10ms and restarts allowed.
func gapJob(t *testing.T, f *fixture, cfg nats.SourceConfig, del uint64, dir string) (*runtime.Job, *nats.Source[event]) {
	t.Helper()
	src := eventSource(t, cfg)
	c := &chaos{pace: 200 * time.Microsecond, before: func() { f.deleteMsgs(del) }}
	p := stream.New("nats-gap")
	ev := stream.Add[event, event](stream.From(p, "events", src), c.node())
	stream.To(ev, "out", file.JSONLines[event](filepath.Join(dir, "out")))
	job, err := p.NewJob(jobOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	return job, src
}

// committedIDs returns the ids of the events committed under dir/out, in
// id order.
func committedIDs(t *testing.T, dir string) []int64 {
	t.Helper()
	lines, err := testkit.ReadCommitted(filepath.Join(dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	for _, l := range lines {
		var e event
		if err := json.Unmarshal(l.Text, &e); err != nil {
			t.Fatalf("%s:%d: %s", l.File, l.Number, l.Text)
		}
		got = append(got, e.ID)
	}
	slices.Sort(got)
	return got
}

// #12 item 4a, through the runtime: a message removed while the job runs
// stops the job at once (no restart: a restart cannot bring it back) with
// the error naming it, and nothing read after it is committed; with
// on_gap: skip the job completes with every other message exactly once
// and the removed one counted.
func TestPipelineGap(t *testing.T) {
	url := requireServer(t)
	const n = 12000
	for _, skip := range []bool{false, true} {
		t.Run(fmt.Sprintf("skip=%v", skip), func(t *testing.T) {
			f := newStream(t, url)
			f.publishEvents(0, n, 10)
			cfg := f.config()
			cfg.Subject = f.subject("ev.1")
			cfg.StopAt = nats.StopAtLatest
			cfg.BatchSize = 50
			if skip {
				cfg.OnGap = nats.OnGapSkip
			}
			const del = 11002 // event 11001
			dir := t.TempDir()
			job, src := gapJob(t, f, cfg, del, dir)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			err := job.Run(ctx)
			got := committedIDs(t, dir)
			if !skip {
				wantGap(t, err, f, cfg.Subject, "sequence 11002")
				if class := runtime.ErrorClass(err); class != "incompatible" {
					t.Errorf("error class %q, want incompatible (the job stops without restarting)", class)
				}
				if r := job.Stats().Restarts; r != 0 {
					t.Errorf("%d restarts, want none", r)
				}
				checkPrefix(t, got, 1, 4, 11001)
				return
			}
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			var want []int64
			for id := int64(1); id < n; id += 4 {
				if id != 11001 {
					want = append(want, id)
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("committed %d events, want %d: every ev.1 event but 11001, once", len(got), len(want))
			}
			if g := src.SkippedGaps(); g != (nats.GapTally{Ranges: 1, Sequences: 1}) {
				t.Errorf("SkippedGaps %+v, want 1 range of 1 sequence", g)
			}
		})
	}
}

// A stream with more deleted sequences inside it than the source tracks
// (65536; 10 here) cannot be proven continuous (#12 item 4a): the source
// refuses it, naming the count and the way out, unless on_gap: skip, which
// reads it with a warning that deletions ahead are no longer detected. Not
// parallel: it sets the limit of the package.
func TestGapTooManyHoles(t *testing.T) {
	url := requireServer(t)
	defer nats.SetMaxTrackedHoles(10)()
	f := newStream(t, url)
	f.publishEvents(0, 120, 5)
	f.purge(jetstream.WithPurgeSubject(f.subject("ev.2"))) // 30 holes
	cfg := f.config()
	cfg.StopAt = nats.StopAtLatest
	_, err := tryOpen(eventSource(t, cfg), nil)
	wantGap(t, err, f, "", "30 deleted sequences", "on_gap: skip")

	cfg.OnGap = nats.OnGapSkip
	log, buf := logBuffer()
	st, err := openWithLog(t, eventSource(t, cfg), nil, log)
	if err != nil {
		t.Fatalf("Open with on_gap skip: %v", err)
	}
	if err := st.readToEnd(t); err != nil {
		t.Fatalf("Read: %v", err)
	}
	if got := len(st.out.recs); got != 90 {
		t.Errorf("%d records, want the 90 not purged", got)
	}
	if !strings.Contains(buf.String(), "too many deleted sequences") {
		t.Errorf("no warning that deletions are not detected:\n%s", buf)
	}
}

// A quiet filtered source keeps up with other subjects' messages (#12 item
// 4a, no false alarm): while only other subjects are published to a stream
// whose retention (max_msgs 150) removes them soon, its position moves past
// them, so neither the next message of its subject nor a restore of its
// checkpoint finds a gap.
func TestGapQuietFilterKeepsUp(t *testing.T) {
	t.Parallel()
	f := newStreamWith(t, requireServer(t), func(sc *jetstream.StreamConfig) { sc.MaxMsgs = 150 })
	cfg := f.config()
	cfg.Subject = f.subject("ev.1")
	src := eventSource(t, cfg)
	st := open(t, src, nil)
	next := func() uint64 {
		var p struct{ Next uint64 }
		if err := json.Unmarshal(st.position(t), &p); err != nil {
			t.Fatal(err)
		}
		return p.Next
	}
	for step := range 3 {
		for i := range 100 {
			f.publish(f.subject("ev.0"), fmt.Appendf(nil, `{"id":%d,"ts":"2026-01-01T00:00:00Z"}`, step*100+i))
		}
		last := f.state().LastSeq
		for deadline := time.Now().Add(60 * time.Second); next() <= last; {
			if time.Now().After(deadline) {
				t.Fatalf("step %d: the position is at %d after 60s, the stream's last sequence %d", step, next(), last)
			}
			if res := st.read(t); res.Wait > 0 {
				time.Sleep(res.Wait)
			}
		}
	}
	f.publishEvents(1, 2, 5) // event 1: subject ev.1
	st.readUntil(t, 1)
	checkIDs(t, ids(st.out.recs), 1, 2)
	pos := st.position(t)
	_ = st.src.Close()
	if _, err := tryOpen(src, pos); err != nil {
		t.Fatalf("restoring the quiet source's position %s: %v", pos, err)
	}
}

// A stream deleted and recreated under the source (#12 item 4a): its new
// messages begin again at sequence 1, below the position, where a consumer
// at the position never looks. The source's look at the stream finds its
// last sequence gone back and stops the job (ErrPositionLost) instead of
// waiting forever past the new messages.
func TestGapStreamRecreated(t *testing.T) {
	t.Parallel()
	f := newStream(t, requireServer(t))
	f.publishEvents(0, 400, 5)
	cfg := f.config()
	cfg.BatchSize = 20
	st := open(t, eventSource(t, cfg), nil)
	st.readUntil(t, 20)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.js.DeleteStream(ctx, f.name); err != nil {
		t.Fatal(err)
	}
	if _, err := natstest.CreateStream(ctx, f.js, jetstream.StreamConfig{Name: f.name, Subjects: []string{f.name + ".>"}}); err != nil {
		t.Fatal(err)
	}
	f.publishEvents(1000, 1005, 5)
	err := st.readToEnd(t)
	if !errors.Is(err, nats.ErrPositionLost) || !errors.Is(err, runtime.ErrIncompatible) || !strings.Contains(err.Error(), "recreated") {
		t.Fatalf("Read: %v, want ErrPositionLost saying the stream was recreated", err)
	}
	t.Log(err)
	checkIDs(t, ids(st.out.recs), 0, 20)
}

// mirrorOf creates a mirror of f's stream that holds the subject's messages
// only, deleted when the test ends, and returns its name.
func (f *fixture) mirrorOf(t *testing.T, subject string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	mirror := f.name + "_M"
	if _, err := natstest.CreateStream(ctx, f.js, jetstream.StreamConfig{Name: mirror, Mirror: &jetstream.StreamSource{Name: f.name, FilterSubject: f.subject(subject)}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = f.js.DeleteStream(ctx, mirror)
	})
	return mirror
}

// waitCopied waits until the mirror holds msgs messages up to sequence
// last: the server copies a mirror's messages asynchronously, and a
// mirror that falls behind on a busy machine is the server's delay, not
// the source's. It fails the test with the mirror's state when the copy
// does not complete within a generous deadline.
func (f *fixture) waitCopied(t *testing.T, mirror string, msgs, last uint64) {
	t.Helper()
	var st jetstream.StreamState
	for deadline := time.Now().Add(2 * time.Minute); ; {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		s, err := f.js.Stream(ctx, mirror)
		cancel()
		if err != nil {
			t.Fatalf("looking at mirror %s: %v", mirror, err)
		}
		st = s.CachedInfo().State
		if st.Msgs >= msgs && st.LastSeq >= last {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("mirror %s holds %d messages up to sequence %d after 2 minutes, want %d up to %d: the server did not copy them",
				mirror, st.Msgs, st.LastSeq, msgs, last)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The same with the mirror created, and the source opened on it, before
// the origin has its messages: at the source's first look the mirror is
// empty, and when messages arrive it begins at its first copied one, past
// sequences it never held. That is no gap (it failed CI as one when the
// mirror of the test above had not copied anything yet at the source's
// Open).
func TestGapNoFalseAlarmMirrorEmptyAtOpen(t *testing.T) {
	t.Parallel()
	f := newStream(t, requireServer(t))
	cfg := f.config()
	cfg.Stream = f.mirrorOf(t, "ev.1")
	st := open(t, eventSource(t, cfg), nil)
	f.publishEvents(0, 400, 5)
	st.readUntil(t, 100)
	want := make([]int64, 0, 100)
	for id := int64(1); id < 400; id += 4 {
		want = append(want, id)
	}
	if got := ids(st.out.recs); !slices.Equal(got, want) {
		t.Fatalf("read ids %v,\nwant %v", got, want)
	}
}

// A mirror records the sequences of its origin it does not hold (here: the
// other subjects it filters out) as deleted ones, also while the source
// reads it: they are not gaps (#12 item 4a, no false alarm).
//
// The second half waits for the mirror to hold every message before it
// reads: the server copies them asynchronously, so a mirror still behind
// after readUntil's deadline would otherwise fail the test as if the
// source had stalled ("89 records after 30s, want 100" once in CI under
// load). The sequences the mirror skipped are still past the source's last
// look at the stream (198) when it reads them.
func TestGapNoFalseAlarmFilteredMirror(t *testing.T) {
	t.Parallel()
	f := newStream(t, requireServer(t))
	f.publishEvents(0, 200, 5)
	cfg := f.config()
	cfg.Stream = f.mirrorOf(t, "ev.1")
	st := open(t, eventSource(t, cfg), nil)
	st.readUntil(t, 50)
	f.publishEvents(200, 400, 5)
	// Event 397, the last of subject ev.1, is at sequence 398.
	f.waitCopied(t, cfg.Stream, 100, 398)
	st.readUntil(t, 100)
	want := make([]int64, 0, 100)
	for id := int64(1); id < 400; id += 4 {
		want = append(want, id)
	}
	if got := ids(st.out.recs); !slices.Equal(got, want) {
		t.Fatalf("read ids %v,\nwant %v", got, want)
	}
}
