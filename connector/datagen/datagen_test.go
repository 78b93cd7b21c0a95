package datagen_test

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/connector/datagen"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/watermark"
)

// collector is a runtime.Output that keeps every batch it is given.
type collector struct {
	batches []runtime.Batch[datagen.Event]
}

func (c *collector) Emit(r runtime.Records) error {
	b, ok := r.(runtime.Batch[datagen.Event])
	if !ok {
		return errors.New("collector: unexpected batch type")
	}
	c.batches = append(c.batches, b)
	return nil
}

func (c *collector) records() []runtime.Record[datagen.Event] {
	var out []runtime.Record[datagen.Event]
	for _, b := range c.batches {
		out = append(out, b...)
	}
	return out
}

// subtask is one opened generator subtask with its collected output.
type subtask struct {
	src runtime.Source
	out *collector
}

// subtaskContext is the runtime.Context of subtask s of p writing to out,
// restored from restored and, at another parallelism, union.
func subtaskContext(s, p int, out runtime.Output, restored *checkpoint.SubtaskState, union [][]byte) *runtime.Context {
	return &runtime.Context{
		Task:           checkpoint.TaskID{Operator: "events", Subtask: s},
		Parallelism:    p,
		MaxParallelism: 128,
		Output:         out,
		Restored:       restored,
		RestoredUnion:  union,
		JobID:          "job",
	}
}

func open(t *testing.T, src *datagen.Source[datagen.Event], s, p int, restored *checkpoint.SubtaskState) subtask {
	t.Helper()
	out := &collector{}
	st := runtime.EraseSource(src.NewSubtask())
	if err := st.Open(subtaskContext(s, p, out, restored, nil)); err != nil {
		t.Fatalf("Open subtask %d of %d: %v", s, p, err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return subtask{src: st, out: out}
}

// drain reads until the subtask reports exhaustion, failing after too many reads.
func drain(t *testing.T, st subtask) runtime.ReadResult {
	t.Helper()
	for range 1_000_000 {
		res, err := st.src.Read()
		if err != nil {
			t.Fatalf("Read: %v", err)
		}
		if res.Exhausted {
			return res
		}
	}
	t.Fatal("source never reported Exhausted")
	return runtime.ReadResult{}
}

func newEvents(t *testing.T, cfg datagen.Config) *datagen.Source[datagen.Event] {
	t.Helper()
	src, err := datagen.Events(cfg)
	if err != nil {
		t.Fatalf("Events(%+v): %v", cfg, err)
	}
	return src
}

// expect checks that rec is datagen record i of cfg (with defaults filled).
func expect(t *testing.T, cfg datagen.Config, i int64, rec runtime.Record[datagen.Event]) {
	t.Helper()
	want := datagen.Event{ID: i, Key: i % cfg.Keys, Value: i % 1000}
	if rec.Value != want {
		t.Fatalf("record %d: got %+v, want %+v", i, rec.Value, want)
	}
	if wantTime := cfg.StartTime.UnixNano() + i*int64(cfg.EventInterval); rec.Time != wantTime {
		t.Fatalf("record %d: time %d (%v), want %d (%v)", i, rec.Time, time.Unix(0, rec.Time).UTC(), wantTime, time.Unix(0, wantTime).UTC())
	}
}

func TestRecordContract(t *testing.T) {
	cfg := datagen.Config{
		Count:         5000, // > batch size and > 1000, so values wrap
		Keys:          7,
		StartTime:     time.Date(2030, 5, 6, 7, 8, 9, 123, time.UTC),
		EventInterval: 3 * time.Millisecond,
	}
	src := newEvents(t, cfg)
	st := open(t, src, 0, 1, nil)
	drain(t, st)
	recs := st.out.records()
	if len(recs) != int(cfg.Count) {
		t.Fatalf("emitted %d records, want %d", len(recs), cfg.Count)
	}
	for i, rec := range recs {
		expect(t, cfg, int64(i), rec)
	}
}

func TestDefaults(t *testing.T) {
	src := newEvents(t, datagen.Config{})
	got := src.Config()
	if got.Keys != 100 {
		t.Errorf("default keys = %d, want 100", got.Keys)
	}
	if !got.StartTime.Equal(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("default start time = %v, want 2026-01-01T00:00:00Z", got.StartTime)
	}
	if got.EventInterval != time.Millisecond {
		t.Errorf("default event interval = %v, want 1ms", got.EventInterval)
	}
	if got.Count != 0 || got.Rate != 0 {
		t.Errorf("default count/rate = %d/%v, want 0/0 (unbounded, as fast as possible)", got.Count, got.Rate)
	}
	if src.Descriptor().Capabilities.SourceGuarantee() != runtime.ExactlyOnce {
		t.Errorf("Guarantee = %v, want exactly-once (replayable)", src.Descriptor().Capabilities.SourceGuarantee())
	}
	if src.Descriptor().Type != "datagen" {
		t.Errorf("Type = %q, want datagen", src.Descriptor().Type)
	}

	// Record 1 of the defaults: key 1, value 1, one millisecond after 2026-01-01.
	st := open(t, src, 0, 1, nil)
	if _, err := st.src.Read(); err != nil {
		t.Fatal(err)
	}
	recs := st.out.records()
	if len(recs) < 2 {
		t.Fatalf("unbounded, unthrottled read emitted %d records", len(recs))
	}
	expect(t, got, 1, recs[1])
	if want := time.Date(2026, 1, 1, 0, 0, 0, int(time.Millisecond), time.UTC).UnixNano(); recs[1].Time != want {
		t.Errorf("record 1 time = %d, want %d", recs[1].Time, want)
	}
}

// Subtask s of P emits exactly the i with i % P == s, increasing, and the
// count bounds the total over all subtasks, also when P does not divide it.
func TestSubtasksPartitionTheRecords(t *testing.T) {
	for _, tc := range []struct {
		count int64
		p     int
	}{
		{10007, 1}, {10007, 2}, {10007, 3}, {10007, 4}, {10007, 7},
		{3000, 3}, // divisible
		{2, 5},    // fewer records than subtasks
		{1, 2},
	} {
		cfg := datagen.Config{Count: tc.count, Keys: 13}
		src := newEvents(t, cfg)
		cfg = src.Config()
		seen := make([]int, tc.count)
		for s := range tc.p {
			st := open(t, src, s, tc.p, nil)
			drain(t, st)
			prev := int64(-1)
			for _, rec := range st.out.records() {
				i := rec.Value.ID
				if i < 0 || i >= tc.count {
					t.Fatalf("count %d, P %d: subtask %d emitted id %d outside [0,%d)", tc.count, tc.p, s, i, tc.count)
				}
				if i%int64(tc.p) != int64(s) {
					t.Fatalf("count %d, P %d: subtask %d emitted id %d (id %% P = %d)", tc.count, tc.p, s, i, i%int64(tc.p))
				}
				if i <= prev {
					t.Fatalf("count %d, P %d: subtask %d emitted id %d after %d", tc.count, tc.p, s, i, prev)
				}
				prev = i
				seen[i]++
				expect(t, cfg, i, rec)
			}
			// Once exhausted, further reads emit nothing and stay exhausted.
			before := len(st.out.records())
			res, err := st.src.Read()
			if err != nil || !res.Exhausted || len(st.out.records()) != before {
				t.Fatalf("count %d, P %d: subtask %d read after exhaustion: %+v, %v, emitted %d more", tc.count, tc.p, s, res, err, len(st.out.records())-before)
			}
		}
		for i, n := range seen {
			if n != 1 {
				t.Fatalf("count %d, P %d: id %d emitted %d times over all subtasks, want 1", tc.count, tc.p, i, n)
			}
		}
	}
}

// The watermark after a read is the event time of the last record the
// subtask emitted; MinWatermark before it emitted any.
func TestWatermarkIsLastEmittedEventTimeMinus1ns(t *testing.T) {
	cfg := datagen.Config{Count: 3000, EventInterval: 5 * time.Millisecond}
	src := newEvents(t, cfg)
	const p = 2
	for s := range p {
		st := open(t, src, s, p, nil)
		for {
			n := len(st.out.records())
			res, err := st.src.Read()
			if err != nil {
				t.Fatal(err)
			}
			recs := st.out.records()
			if len(recs) > n {
				if last := recs[len(recs)-1]; res.Watermark != last.Time-1 {
					t.Fatalf("subtask %d: watermark %d, want the last emitted record's time - 1ns %d", s, res.Watermark, last.Time-1)
				}
			} else if len(recs) == 0 && res.Watermark != runtime.MinWatermark {
				t.Fatalf("subtask %d: watermark %d before any record, want MinWatermark", s, res.Watermark)
			}
			if res.Exhausted {
				last := recs[len(recs)-1]
				if res.Watermark != last.Time-1 {
					t.Fatalf("subtask %d exhausted: watermark %d, want %d", s, res.Watermark, last.Time-1)
				}
				break
			}
		}
	}

	// A subtask that owns no record has no watermark.
	src = newEvents(t, datagen.Config{Count: 1})
	st := open(t, src, 1, 2, nil)
	res, err := st.src.Read()
	if err != nil {
		t.Fatal(err)
	}
	if !res.Exhausted || res.Watermark != runtime.MinWatermark || len(st.out.records()) != 0 {
		t.Fatalf("subtask 1 of 2 with count 1: %+v, %d records; want exhausted, MinWatermark, none", res, len(st.out.records()))
	}
}

// Position, then restoring it into a new subtask, continues with the next i:
// nothing skipped, nothing repeated.
func TestPositionRestoreContinues(t *testing.T) {
	cfg := datagen.Config{Count: 9001, Keys: 10}
	src := newEvents(t, cfg)
	const p = 3
	for s := range p {
		for _, reads := range []int{0, 1, 2, 100} {
			first := open(t, src, s, p, nil)
			for range reads {
				if _, err := first.src.Read(); err != nil {
					t.Fatal(err)
				}
			}
			pos, err := first.src.Position()
			if err != nil {
				t.Fatal(err)
			}
			before := first.out.records()
			// The position is the next i this subtask would emit.
			var decoded struct{ Next int64 }
			if err := json.Unmarshal(pos, &decoded); err != nil {
				t.Fatalf("position %q is not JSON: %v", pos, err)
			}
			wantNext := int64(s)
			if len(before) > 0 {
				wantNext = before[len(before)-1].Value.ID + p
			}
			if decoded.Next != wantNext {
				t.Fatalf("subtask %d after %d reads: position %s, want next %d", s, reads, pos, wantNext)
			}

			second := open(t, src, s, p, &checkpoint.SubtaskState{Task: checkpoint.TaskID{Operator: "events", Subtask: s}, Inline: pos})
			res := drain(t, second)
			after := second.out.records()
			all := append(append([]runtime.Record[datagen.Event]{}, before...), after...)
			want := (cfg.Count - int64(s) + p - 1) / p
			if int64(len(all)) != want {
				t.Fatalf("subtask %d restored after %d reads: %d+%d records, want %d in all", s, reads, len(before), len(after), want)
			}
			for k, rec := range all {
				if id := int64(s) + int64(k)*p; rec.Value.ID != id {
					t.Fatalf("subtask %d restored after %d reads: record %d has id %d, want %d (gap or repeat at the restore point %d)", s, reads, k, rec.Value.ID, id, len(before))
				}
			}
			// Even a restored subtask that emits nothing more reports the time - 1ns
			// of the last record before the restore point as its watermark.
			if last := all[len(all)-1]; res.Watermark != last.Time-1 {
				t.Fatalf("subtask %d restored after %d reads: watermark %d, want %d", s, reads, res.Watermark, last.Time-1)
			}

			// Restoring the final position: nothing more, exhausted.
			end, err := second.src.Position()
			if err != nil {
				t.Fatal(err)
			}
			third := open(t, src, s, p, &checkpoint.SubtaskState{Inline: end})
			res, err = third.src.Read()
			if err != nil {
				t.Fatal(err)
			}
			if !res.Exhausted || len(third.out.records()) != 0 {
				t.Fatalf("restored at the end: %+v, %d records; want exhausted, none", res, len(third.out.records()))
			}
		}
	}
}

// An empty restored state (no inline position) starts from the beginning.
func TestRestoreWithoutPositionStartsFresh(t *testing.T) {
	src := newEvents(t, datagen.Config{Count: 10})
	st := open(t, src, 1, 2, &checkpoint.SubtaskState{})
	drain(t, st)
	recs := st.out.records()
	if len(recs) != 5 || recs[0].Value.ID != 1 {
		t.Fatalf("got %d records starting at %+v; want 5 starting at id 1", len(recs), recs)
	}
}

func TestRestoreRejectsForeignOrGarbledPosition(t *testing.T) {
	src := newEvents(t, datagen.Config{Count: 100})
	for _, inline := range []string{`{"next":5}`, `{"next":-2}`, `not json`} {
		st := runtime.EraseSource(src.NewSubtask())
		ctx := &runtime.Context{
			Task:        checkpoint.TaskID{Operator: "events", Subtask: 1},
			Parallelism: 3,
			Output:      &collector{},
			Restored:    &checkpoint.SubtaskState{Inline: []byte(inline)},
		}
		if err := st.Open(ctx); err == nil {
			t.Errorf("Open subtask 1 of 3 with position %s: no error", inline)
		}
	}
}

// The rate limit spreads rate over the subtasks; a subtask never emits more
// than rate/P per second since it opened (plus the first record), and when it
// is ahead it asks to be called again after Wait.
func TestRateLimit(t *testing.T) {
	const (
		rate = 2000.0
		p    = 2
		per  = rate / p // records per second per subtask
		run  = 300 * time.Millisecond
	)
	src := newEvents(t, datagen.Config{Rate: rate})
	begin := time.Now() // before Open: elapsed here >= elapsed the source sees
	st := open(t, src, 0, p, nil)
	sawWait := false
	for {
		res, err := st.src.Read()
		if err != nil {
			t.Fatal(err)
		}
		elapsed := time.Since(begin)
		emitted := len(st.out.records())
		if limit := int(elapsed.Seconds()*per) + 1; emitted > limit {
			t.Fatalf("after %v emitted %d records, more than the schedule allows (%d at %v/s per subtask)", elapsed, emitted, limit, per)
		}
		if res.Wait < 0 || res.Wait > 3*time.Second/time.Duration(per) {
			t.Fatalf("Wait %v; want in (0, ~1/%v s]", res.Wait, per)
		}
		if res.Wait > 0 {
			sawWait = true
			time.Sleep(res.Wait)
		}
		if elapsed >= run {
			break
		}
	}
	if !sawWait {
		t.Error("the rate-limited source never returned a Wait")
	}
	emitted := len(st.out.records())
	if min := int(run.Seconds() * per * 0.9); emitted < min {
		t.Errorf("emitted %d records in %v at %v/s; want at least %d", emitted, run, per, min)
	}
	for i, rec := range st.out.records() {
		if rec.Value.ID != int64(i*p) {
			t.Fatalf("record %d has id %d, want %d", i, rec.Value.ID, i*p)
		}
	}
}

// A rate-limited read that is not yet due emits nothing and asks to wait
// about one record period.
func TestRateLimitWaitWhenAhead(t *testing.T) {
	src := newEvents(t, datagen.Config{Rate: 10}) // one record per 100ms
	begin := time.Now()
	st := open(t, src, 0, 1, nil)
	res, err := st.src.Read()
	if err != nil {
		t.Fatal(err)
	}
	if n := len(st.out.records()); n != 1 {
		t.Fatalf("first read emitted %d records; want 1 (the first is due at once)", n)
	}
	res, err = st.src.Read()
	if err != nil {
		t.Fatal(err)
	}
	if time.Since(begin) > 90*time.Millisecond {
		t.Skip("the machine is too slow to observe the schedule")
	}
	if n := len(st.out.records()); n != 1 {
		t.Fatalf("second immediate read emitted; have %d records, want 1", n)
	}
	if res.Wait <= 50*time.Millisecond || res.Wait > 100*time.Millisecond {
		t.Fatalf("Wait = %v, want about 100ms (one record at 10/s)", res.Wait)
	}
	if res.Exhausted {
		t.Fatal("unbounded source reported exhausted")
	}
}

func TestRateLimitWithCountStopsAtCount(t *testing.T) {
	src := newEvents(t, datagen.Config{Count: 21, Rate: 1e6})
	total := 0
	for s := range 2 {
		st := open(t, src, s, 2, nil)
		for range 100000 {
			res, err := st.src.Read()
			if err != nil {
				t.Fatal(err)
			}
			if res.Exhausted {
				break
			}
			time.Sleep(res.Wait)
		}
		total += len(st.out.records())
	}
	if total != 21 {
		t.Fatalf("emitted %d records over 2 subtasks, want 21", total)
	}
}

func TestInvalidConfigNamesField(t *testing.T) {
	for _, tc := range []struct {
		cfg   datagen.Config
		field string
	}{
		{datagen.Config{Count: -1}, "count"},
		{datagen.Config{Rate: -0.5}, "rate"},
		{datagen.Config{Keys: -3}, "keys"},
		{datagen.Config{EventInterval: -time.Millisecond}, "event_interval"},
		{datagen.Config{Rate: math.Inf(-1)}, "rate"},
	} {
		_, err := datagen.Events(tc.cfg)
		if err == nil {
			t.Errorf("Events(%+v): no error", tc.cfg)
			continue
		}
		if !strings.Contains(err.Error(), tc.field) {
			t.Errorf("Events(%+v): error %q does not name %s", tc.cfg, err, tc.field)
		}
	}

	// All problems are reported at once.
	_, err := datagen.Events(datagen.Config{Count: -1, Rate: -1, Keys: -1, EventInterval: -1})
	if err == nil {
		t.Fatal("no error")
	}
	for _, f := range []string{"count", "rate", "keys", "event_interval"} {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("error %q does not name %s", err, f)
		}
	}
}

func TestNewBuildsRecordsWithConstructor(t *testing.T) {
	type pair struct{ id, key int64 }
	src, err := datagen.New(datagen.Config{Count: 4, Keys: 3}, func(id, key, value int64) pair { return pair{id, key} })
	if err != nil {
		t.Fatal(err)
	}
	var got []runtime.Batch[pair]
	out := outputFunc(func(r runtime.Records) error { got = append(got, r.(runtime.Batch[pair])); return nil })
	st := runtime.EraseSource(src.NewSubtask())
	if err := st.Open(&runtime.Context{Parallelism: 1, Output: out}); err != nil {
		t.Fatal(err)
	}
	for {
		res, err := st.Read()
		if err != nil {
			t.Fatal(err)
		}
		if res.Exhausted {
			break
		}
	}
	var ids []pair
	for _, b := range got {
		for _, r := range b {
			ids = append(ids, r.Value)
		}
	}
	want := []pair{{0, 0}, {1, 1}, {2, 2}, {3, 0}}
	if len(ids) != len(want) {
		t.Fatalf("got %v, want %v", ids, want)
	}
	for i := range want {
		if ids[i] != want[i] {
			t.Fatalf("got %v, want %v", ids, want)
		}
	}
}

type outputFunc func(runtime.Records) error

func (f outputFunc) Emit(r runtime.Records) error { return f(r) }

// A rate so high it cannot be a limit (+Inf, or one whose schedule overflows
// int64 after a moment) must either be rejected naming rate or emit like an
// unthrottled source; it must not silently stall.
func TestHugeRateDoesNotStall(t *testing.T) {
	for _, rate := range []float64{math.Inf(1), 1e300} {
		src, err := datagen.Events(datagen.Config{Rate: rate, Count: 10})
		if err != nil {
			if !strings.Contains(err.Error(), "rate") {
				t.Errorf("rate %v: error %q does not name rate", rate, err)
			}
			continue
		}
		st := open(t, src, 0, 1, nil)
		for range 100 {
			res, err := st.src.Read()
			if err != nil {
				t.Fatal(err)
			}
			if res.Exhausted {
				break
			}
			if res.Wait > time.Second {
				t.Fatalf("rate %v: asked to wait %v", rate, res.Wait)
			}
			time.Sleep(res.Wait)
		}
		if n := len(st.out.records()); n != 10 {
			t.Errorf("rate %v, count 10: emitted %d records after 100 reads; want 10 (the source stalls)", rate, n)
		}
	}
}

// TestIdleTimeout: a rate-limited subtask that emits nothing for the idle
// timeout reports Idle, and is active again with its next record.
func TestIdleTimeout(t *testing.T) {
	src, err := datagen.Events(datagen.Config{Rate: 20, Watermark: watermark.Strategy{IdleTimeout: 10 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	st := runtime.EraseSource(src.NewSubtask())
	out := &collector{}
	if err := st.Open(&runtime.Context{Task: checkpoint.TaskID{Operator: "g"}, Parallelism: 1, Output: out}); err != nil {
		t.Fatal(err)
	}
	sawIdle, sawActiveAfter := false, false
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) && !sawActiveAfter {
		n := len(out.records())
		res, err := st.Read()
		if err != nil {
			t.Fatal(err)
		}
		if res.Idle {
			sawIdle = true
		} else if sawIdle && len(out.records()) > n {
			sawActiveAfter = true
		}
		time.Sleep(time.Millisecond)
	}
	if !sawIdle || !sawActiveAfter {
		t.Fatalf("idle seen %v, active again after a record %v", sawIdle, sawActiveAfter)
	}
}
