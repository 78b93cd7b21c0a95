package nexmark_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/nexmark"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/stream"
)

// The source is a typed stream source.
var _ stream.Source[nexmark.Event] = (*nexmark.Source)(nil)

// collector is a runtime.Output that keeps every record it is given.
type collector struct {
	records []runtime.Record[nexmark.Event]
	batches int
}

func (c *collector) Emit(r runtime.Records) error {
	b, ok := r.(runtime.Batch[nexmark.Event])
	if !ok {
		return errors.New("collector: unexpected batch type")
	}
	c.records = append(c.records, b...)
	c.batches++
	return nil
}

// subtask is one opened source subtask with its collected output.
type subtask struct {
	src runtime.Source
	out *collector
}

func newSource(t *testing.T, cfg nexmark.SourceConfig) *nexmark.Source {
	t.Helper()
	src, err := nexmark.NewSource(cfg)
	if err != nil {
		t.Fatalf("NewSource: %v", err)
	}
	return src
}

func openSubtask(t *testing.T, src *nexmark.Source, s, p int, position []byte) subtask {
	t.Helper()
	out := &collector{}
	st := runtime.EraseSource(src.NewSubtask())
	ctx := &runtime.Context{
		Task:           checkpoint.TaskID{Operator: "nexmark", Subtask: s},
		Parallelism:    p,
		MaxParallelism: 128,
		Output:         out,
		JobID:          "job",
	}
	if position != nil {
		ctx.Restored = &checkpoint.SubtaskState{Inline: position}
	}
	if err := st.Open(ctx); err != nil {
		t.Fatalf("Open subtask %d of %d: %v", s, p, err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return subtask{src: st, out: out}
}

// read calls Read once and checks the watermark never decreases.
func (st subtask) read(t *testing.T, prevWM *int64) runtime.ReadResult {
	t.Helper()
	res, err := st.src.Read()
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if res.Watermark < *prevWM {
		t.Fatalf("watermark went back from %d to %d", *prevWM, res.Watermark)
	}
	*prevWM = res.Watermark
	return res
}

// drain reads until the subtask reports exhaustion.
func (st subtask) drain(t *testing.T) {
	t.Helper()
	wm := runtime.MinWatermark
	for range 1_000_000 {
		if st.read(t, &wm).Exhausted {
			return
		}
	}
	t.Fatal("source never reported Exhausted")
}

// expectEvent checks that rec is event n of g.
func expectEvent(t *testing.T, g *nexmark.Generator, n int64, rec runtime.Record[nexmark.Event]) {
	t.Helper()
	want := g.Event(n)
	if !reflect.DeepEqual(rec.Value, want) {
		t.Fatalf("record is %s, want event %d: %s", nexmark.AppendJSON(nil, rec.Value), n, nexmark.AppendJSON(nil, want))
	}
	if rec.Time != want.EventTimeNanos() || rec.Time != want.DateTime()*1_000_000 {
		t.Fatalf("event %d: record time %d, want date_time %d ms in ns", n, rec.Time, want.DateTime())
	}
}

// TestSourceSplits: the union over P subtasks is exactly events 0..N-1,
// subtask s emitting n % P == s in increasing order, in batches of at most
// 1024.
func TestSourceSplits(t *testing.T) {
	const events = 5003
	for _, p := range []int{1, 2, 3, 7} {
		src := newSource(t, nexmark.SourceConfig{Events: events})
		g := src.Generator()
		seen := make([]bool, events)
		for s := range p {
			st := openSubtask(t, src, s, p, nil)
			st.drain(t)
			want := int64(s)
			for _, rec := range st.out.records {
				expectEvent(t, g, want, rec)
				seen[want] = true
				want += int64(p)
			}
			if want < events {
				t.Fatalf("subtask %d of %d stopped before event %d", s, p, want)
			}
			if min := (len(st.out.records) + 1023) / 1024; st.out.batches > min+1 {
				t.Errorf("subtask %d of %d: %d batches for %d records", s, p, st.out.batches, len(st.out.records))
			}
		}
		for n, ok := range seen {
			if !ok {
				t.Fatalf("P=%d: event %d was not emitted", p, n)
			}
		}
	}
}

// TestSourceReplay: a subtask restored from a saved position emits exactly
// the events the original emitted after that position, with the same
// watermarks, for every position a checkpoint could have taken.
func TestSourceReplay(t *testing.T) {
	for _, c := range []struct {
		name     string
		gen      func(*nexmark.Config)
		maxDelay time.Duration
	}{
		{"in order", func(*nexmark.Config) {}, 0},
		// Groups larger than a batch: the restored watermark must come from
		// the events emitted before the checkpoint.
		{"out of order groups", func(c *nexmark.Config) { c.OutOfOrderGroupSize = 5000 }, 2 * time.Second},
		{"events per second", func(c *nexmark.Config) { c.EventsPerSecond = 10_000_000 }, time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			gen := nexmark.DefaultConfig()
			c.gen(&gen)
			const events, p, s = 20_000, 3, 1
			src := newSource(t, nexmark.SourceConfig{Generator: gen, Events: events, MaxDelay: c.maxDelay})
			orig := openSubtask(t, src, s, p, nil)
			type step struct {
				position []byte
				emitted  int
				wm       int64
			}
			pos, err := orig.src.Position()
			if err != nil {
				t.Fatal(err)
			}
			steps := []step{{position: pos, wm: runtime.MinWatermark}}
			wm := runtime.MinWatermark
			for {
				res := orig.read(t, &wm)
				pos, err := orig.src.Position()
				if err != nil {
					t.Fatal(err)
				}
				steps = append(steps, step{position: pos, emitted: len(orig.out.records), wm: res.Watermark})
				if res.Exhausted {
					break
				}
			}
			for i, st := range steps {
				restored := openSubtask(t, src, s, p, st.position)
				restored.drain(t)
				rest := orig.out.records[st.emitted:]
				if len(restored.out.records) != len(rest) || len(rest) > 0 && !reflect.DeepEqual(restored.out.records, rest) {
					t.Fatalf("restored at %s: %d records differ from the original's remaining %d", st.position, len(restored.out.records), len(rest))
				}
				if i+1 < len(steps) {
					// Reading once more from the restored subtask ends where the
					// original's next read ended, watermark included.
					again := openSubtask(t, src, s, p, st.position)
					w := runtime.MinWatermark
					if res := again.read(t, &w); res.Watermark != steps[i+1].wm {
						t.Fatalf("restored at %s: watermark after one read %d, the original's %d", st.position, res.Watermark, steps[i+1].wm)
					}
				}
			}
		})
	}
}

// TestSourceWatermark: MinWatermark before any record, then the largest
// record time emitted minus MaxDelay minus 1ns.
func TestSourceWatermark(t *testing.T) {
	gen := nexmark.DefaultConfig()
	gen.OutOfOrderGroupSize = 100
	const delay = 3 * time.Second
	src := newSource(t, nexmark.SourceConfig{Generator: gen, Events: 10_000, MaxDelay: delay})
	st := openSubtask(t, src, 0, 2, nil)
	if pos, _ := st.src.Position(); string(pos) != `{"next":0}` {
		t.Errorf("initial position %s, want {\"next\":0}", pos)
	}
	wm := runtime.MinWatermark
	maxTime := int64(-1 << 63)
	for {
		before := len(st.out.records)
		res := st.read(t, &wm)
		for _, rec := range st.out.records[before:] {
			maxTime = max(maxTime, rec.Time)
		}
		if want := maxTime - int64(delay) - 1; res.Watermark != want {
			t.Fatalf("watermark %d, want max record time %d - %v - 1ns = %d", res.Watermark, maxTime, delay, want)
		}
		if res.Exhausted {
			break
		}
	}
	// A subtask with nothing to emit (more subtasks than events) says nothing.
	empty := openSubtask(t, newSource(t, nexmark.SourceConfig{Events: 2}), 2, 3, nil)
	res, err := empty.src.Read()
	if err != nil || !res.Exhausted || res.Watermark != runtime.MinWatermark || len(empty.out.records) != 0 {
		t.Errorf("subtask without events: %+v, %v, %d records; want exhausted at MinWatermark", res, err, len(empty.out.records))
	}
}

func TestSourceUnboundedAndRate(t *testing.T) {
	src := newSource(t, nexmark.SourceConfig{})
	if got := src.Config().Generator; got != nexmark.DefaultConfig() {
		t.Errorf("zero Generator config became %+v, want DefaultConfig()", got)
	}
	st := openSubtask(t, src, 0, 1, nil)
	wm := runtime.MinWatermark
	for range 5 {
		if st.read(t, &wm).Exhausted {
			t.Fatal("unbounded source exhausted")
		}
	}
	if len(st.out.records) != 5*1024 {
		t.Errorf("5 reads emitted %d records, want 5 batches of 1024", len(st.out.records))
	}
	// 10 events a second: the first read emits one event, the next waits.
	limited := openSubtask(t, newSource(t, nexmark.SourceConfig{Rate: 10}), 0, 1, nil)
	wm = runtime.MinWatermark
	limited.read(t, &wm)
	res := limited.read(t, &wm)
	if len(limited.out.records) > 2 || res.Wait <= 0 || res.Wait > 200*time.Millisecond {
		t.Errorf("rate 10/s: %d records, wait %v; want 1 or 2 records and a wait up to 100ms", len(limited.out.records), res.Wait)
	}
	if d := src.Describe(); !strings.Contains(d, "unbounded") || !strings.Contains(d, "first_event_rate=10000") {
		t.Errorf("Describe() = %q", d)
	}
	if src.Descriptor().Type != "nexmark" || src.Descriptor().Capabilities.SourceGuarantee() != runtime.ExactlyOnce {
		t.Errorf("Type %q, Guarantee %v", src.Descriptor().Type, src.Descriptor().Capabilities.SourceGuarantee())
	}
}

func TestSourceConfigErrors(t *testing.T) {
	bad := nexmark.DefaultConfig()
	bad.HotAuctionRatio = 0
	for _, c := range []struct {
		cfg  nexmark.SourceConfig
		want string
	}{
		{nexmark.SourceConfig{Events: -1}, "events -1"},
		{nexmark.SourceConfig{Events: 1 << 62}, "more than"},
		{nexmark.SourceConfig{Rate: -1}, "rate -1"},
		{nexmark.SourceConfig{Rate: 2e12}, "rate 2e+12"},
		{nexmark.SourceConfig{MaxDelay: -time.Second}, "max_delay -1s"},
		{nexmark.SourceConfig{Generator: bad}, "hot_auction_ratio 0"},
	} {
		if _, err := nexmark.NewSource(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewSource(%+v) = %v, want an error containing %q", c.cfg, err, c.want)
		}
	}
}

func TestSourceBadPosition(t *testing.T) {
	src := newSource(t, nexmark.SourceConfig{Events: 100})
	for _, c := range []struct {
		position string
		want     string
	}{
		{`{"next":5}`, "does not belong to subtask 1 of 3"},
		{`{"next":-2}`, "does not belong"},
		{`nonsense`, "restoring position"},
		{`{"next":9223372036854775807}`, "beyond"},
	} {
		st := src.NewSubtask()
		err := st.Open(&runtime.Context{
			Task:        checkpoint.TaskID{Operator: "nexmark", Subtask: 1},
			Parallelism: 3,
			Restored:    &checkpoint.SubtaskState{Inline: []byte(c.position)},
		}, runtime.EmitTo[nexmark.Event](&collector{}))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Open at %s: %v, want an error containing %q", c.position, err, c.want)
		}
	}
}

// TestSourceUnboundedEnd: an unbounded source emits every event up to the
// generator's Limit and then fails rather than wrap event time.
func TestSourceUnboundedEnd(t *testing.T) {
	gen := nexmark.DefaultConfig()
	const maxMillis = (1<<63 - 1) / 1_000_000
	gen.BaseTime = maxMillis - 2*(16660+10*5000) // room for about 5,000 events
	src := newSource(t, nexmark.SourceConfig{Generator: gen})
	limit := src.Generator().Limit()
	if limit < 4000 || limit > 6000 {
		t.Fatalf("Limit() = %d, want about 5000", limit)
	}
	total := int64(0)
	for s := range 2 {
		st := openSubtask(t, src, s, 2, nil)
		var err error
		for range 100 {
			if _, err = st.src.Read(); err != nil {
				break
			}
		}
		if err == nil || !strings.Contains(err.Error(), "reached the last") {
			t.Fatalf("subtask %d: %v, want an error at the limit", s, err)
		}
		for i, rec := range st.out.records {
			expectEvent(t, src.Generator(), int64(s+2*i), rec)
		}
		total += int64(len(st.out.records))
	}
	if total != limit {
		t.Errorf("emitted %d events, want Limit() = %d", total, limit)
	}
}
