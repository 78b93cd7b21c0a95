package config

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/connector"
	"github.com/ingest-engine/ingest/internal/testkit"
	"github.com/ingest-engine/ingest/row"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/stream"
)

// Late records need a source that breaks its watermark's promise. datagen
// does so only through idleness (idle_timeout), when the wall clock decides
// which records are late: each subtask is in event-time order and its
// watermark trails its last record. These tests register a source type "script" that
// replays fixed steps, each a batch of records followed by a watermark, and
// check the late side outputs of windows built from a pipeline file.

// scriptStep is one read of a script source: records, then a watermark.
type scriptStep struct {
	recs []runtime.Record[row.Row]
	wm   int64
}

// scriptSchema is the schema of script rows.
var scriptSchema = &row.Schema{Fields: []row.Field{{Name: "key", Kind: row.Int}, {Name: "value", Kind: row.Int}}}

// scriptSource replays steps; its replay position is the next step. It has
// parallelism 1: every subtask would replay every step.
type scriptSource struct{ steps []scriptStep }

func (s *scriptSource) NewSubtask() runtime.SourceSubtask[row.Row] {
	return &scriptSubtask{steps: s.steps}
}
func (s *scriptSource) Descriptor() connector.Descriptor {
	return connector.Descriptor{Capabilities: runtime.Capabilities{Replayable: true}}
}
func (s *scriptSource) Describe() string { return "script" }
func (t *scriptSubtask) Position() ([]byte, error) {
	return strconv.AppendInt(nil, int64(t.next), 10), nil
}
func (t *scriptSubtask) Close() error { return nil }
func (t *scriptSubtask) Open(ctx *runtime.Context, out runtime.Emitter[row.Row]) error {
	t.out = out
	return t.open(ctx)
}

type scriptSubtask struct {
	steps []scriptStep
	next  int
	out   runtime.Emitter[row.Row]
}

func (t *scriptSubtask) open(ctx *runtime.Context) error {
	if ctx.Restored != nil && len(ctx.Restored.Inline) > 0 {
		n, err := strconv.Atoi(string(ctx.Restored.Inline))
		if err != nil {
			return err
		}
		t.next = n
	}
	return nil
}

func (t *scriptSubtask) Read() (runtime.ReadResult, error) {
	if t.next >= len(t.steps) {
		return runtime.ReadResult{Watermark: runtime.MaxWatermark, Exhausted: true}, nil
	}
	s := t.steps[t.next]
	t.next++
	if err := t.out.Emit(slices.Clone(runtime.Batch[row.Row](s.recs))); err != nil {
		return runtime.ReadResult{}, err
	}
	return runtime.ReadResult{Watermark: s.wm, Exhausted: t.next == len(t.steps)}, nil
}

// withScriptSource registers source type "script", spec and builder,
// replaying steps for the duration of the test.
func withScriptSource(t *testing.T, steps []scriptStep) {
	t.Helper()
	connector.Register(connector.Spec{Role: connector.RoleSource, Type: "script", Summary: "Replays steps (tests only)."})
	sourceTypes["script"] = func(b *builder, name string, m *mapping, par stream.NodeOption) (named, bool) {
		return named{s: stream.From[row.Row](b.p, name, &scriptSource{steps: steps}, par), schema: scriptSchema}, true
	}
	t.Cleanup(func() {
		delete(sourceTypes, "script")
		connector.Unregister(connector.RoleSource, "script")
	})
}

// base is the event time the script's offsets count from.
var scriptBase = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()

// lateScript has records behind the watermark: within the allowed lateness
// of their windows, beyond it, and for windows never seen before. Record
// times are milliseconds after scriptBase; watermarks are durations after it,
// some exactly at a window's last instant (end - 1ns) or cleanup time.
var lateScript = func() []scriptStep {
	type r struct{ key, at, value int64 }
	const s, ms = time.Second, time.Millisecond
	steps := []struct {
		recs []r
		wm   time.Duration
	}{
		{[]r{{1, 100, 1}, {1, 900, 2}, {2, 500, 3}}, s - 1},            // tumbling [0s,1s) fires at its last instant
		{[]r{{1, 1200, 4}, {2, 200, 17}}, 1100 * ms},                   // 200: the watermark is at [0s,1s)'s last instant: it fires again
		{[]r{{1, 300, 5}, {2, 1999, 6}}, 1498 * ms},                    // 300: within the lateness: [0s,1s) fires again
		{[]r{{2, 700, 7}}, 1500*ms - 1},                                // the last record [0s,1s) takes, then its cleanup time
		{[]r{{1, 999, 8}, {2, 999, 9}, {1, 1500, 10}}, 2100 * ms},      // 999: late, the watermark is at [0s,1s)'s cleanup time
		{[]r{{1, 1999, 11}, {3, 400, 12}, {3, 2600, 13}}, 2500*ms - 1}, // 400: late, for a window never seen; 1999: fires again
		{[]r{{2, 2400, 14}, {1, 1000, 15}, {1, 2499, 16}}, 3000 * ms},  // 2499: in one live sliding window of its two
	}
	out := make([]scriptStep, len(steps))
	for i, st := range steps {
		for _, x := range st.recs {
			out[i].recs = append(out[i].recs, runtime.Record[row.Row]{Value: row.Row{row.IntValue(x.key), row.IntValue(x.value)}, Time: scriptBase + x.at*int64(ms)})
		}
		out[i].wm = scriptBase + int64(st.wm)
	}
	return out
}()

// windowModel computes, from the script alone, what a window of size and
// slide with allowed lateness emits (one row per firing: key, window start
// and end, count, sum of values) and which records are late, by Flink's
// event-time semantics as package window documents them: a window fires when
// the watermark reaches its end - 1; it takes records until the watermark
// reaches end - 1 + lateness, firing again at once for each record that
// comes after it fired; a record all of whose windows are past that is late.
func windowModel(steps []scriptStep, size, slide, lateness time.Duration) (results, late []row.Row) {
	type win struct{ key, start int64 }
	type acc struct {
		n, sum int64
		fired  bool
	}
	accs := map[win]*acc{}
	wm := int64(math.MinInt64)
	fire := func(w win, a *acc) {
		a.fired = true
		results = append(results, row.Row{row.IntValue(w.key), row.TimeValue(w.start), row.TimeValue(w.start + int64(size)), row.IntValue(a.n), row.IntValue(a.sum)})
	}
	for _, s := range steps {
		for _, rec := range s.recs {
			key, v := rec.Value[0].Int(), rec.Value[1].Int()
			var starts []int64
			for st := rec.Time - (rec.Time%int64(slide)+int64(slide))%int64(slide); st > rec.Time-int64(size); st -= int64(slide) {
				starts = append(starts, st)
			}
			live := false
			for _, st := range starts {
				end := st + int64(size)
				if end-1+int64(lateness) <= wm {
					continue // the window's state is gone
				}
				live = true
				w := win{key, st}
				a := accs[w]
				if a == nil {
					a = &acc{}
					accs[w] = a
				}
				a.n++
				a.sum += v
				if end-1 <= wm {
					fire(w, a)
				}
			}
			if !live && len(starts) > 0 {
				late = append(late, row.Row{row.IntValue(key), row.IntValue(v), row.TimeValue(rec.Time)})
			}
		}
		wm = max(wm, s.wm)
		for w, a := range accs {
			if !a.fired && w.start+int64(size)-1 <= wm {
				fire(w, a)
			}
		}
	}
	for w, a := range accs { // the source ends: the maximum watermark
		if !a.fired {
			fire(w, a)
		}
	}
	return results, late
}

// Windows built from a pipeline file route their late records, unchanged
// and with their event times, to the side output named by late_records,
// which a map and a file sink read as input: <window>.<name>; records within
// the allowed lateness make a window fire again. Output and late records are
// exactly the model's, for a tumbling window with lateness and a sliding one
// without.
func TestConfigLateRecordsToSideOutput(t *testing.T) {
	withScriptSource(t, lateScript)
	dir := t.TempDir()
	src := `pipeline: late
checkpoint:
  interval: 20ms
  dir: ckpts
restart:
  max_attempts: 0
sources:
  events:
    type: script
transforms:
  tumbling:
    type: window
    input: events
    key: key
    size: 1s
    allowed_lateness: 500ms
    late_records: late
    aggregates:
      n: count()
      sum: sum(value)
  sliding:
    type: window
    kind: sliding
    input: events
    key: key
    size: 1s
    slide: 500ms
    late_records: too_late
    aggregates:
      n: count()
      sum: sum(value)
  tumbling_late:
    type: map
    input: tumbling.late
    keep_input: true
    select:
      at: event_time
  sliding_late:
    type: map
    input: sliding.too_late
    keep_input: true
    select:
      at: event_time
sinks:
  tumbling_out: {type: file, input: tumbling, path: tumbling}
  tumbling_late_out: {type: file, input: tumbling_late, path: tumbling_late}
  sliding_out: {type: file, input: sliding, path: sliding}
  sliding_late_out: {type: file, input: sliding_late, path: sliding_late}
`
	path := filepath.Join(dir, "p.yaml")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.Stream.Run(ctx, p.RunOptions()); err != nil {
		t.Fatal(err)
	}

	results := &row.Schema{Fields: []row.Field{{Name: "key", Kind: row.Int}, {Name: "window_start", Kind: row.Time}, {Name: "window_end", Kind: row.Time},
		{Name: "n", Kind: row.Int}, {Name: "sum", Kind: row.Int}}}
	lateSchema := &row.Schema{Fields: []row.Field{{Name: "key", Kind: row.Int}, {Name: "value", Kind: row.Int}, {Name: "at", Kind: row.Time}}}
	for _, tc := range []struct {
		name                string
		size, slide, late   time.Duration
		out, lateOut        string
		minResults, minLate int
	}{
		{"tumbling", time.Second, time.Second, 500 * time.Millisecond, "tumbling", "tumbling_late", 9, 4},
		{"sliding", time.Second, 500 * time.Millisecond, 0, "sliding", "sliding_late", 10, 4},
	} {
		want, wantLate := windowModel(lateScript, tc.size, tc.slide, tc.late)
		// The script must exercise what the test claims.
		if len(want) < tc.minResults || len(wantLate) < tc.minLate {
			t.Fatalf("%s: the model has %d results and %d late records, want at least %d and %d", tc.name, len(want), len(wantLate), tc.minResults, tc.minLate)
		}
		compareLines(t, tc.name+" results", readLines(t, filepath.Join(dir, tc.out)), renderLines(results, want))
		compareLines(t, tc.name+" late records", readLines(t, filepath.Join(dir, tc.lateOut)), renderLines(lateSchema, wantLate))
	}
}

// readLines returns the committed lines under dir, sorted.
func readLines(t *testing.T, dir string) []string {
	t.Helper()
	lines, err := testkit.ReadCommitted(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range lines {
		out = append(out, string(l.Text))
	}
	slices.Sort(out)
	return out
}

// renderLines renders rows as the file sink writes them, sorted.
func renderLines(schema *row.Schema, rows []row.Row) []string {
	var out []string
	for _, r := range rows {
		out = append(out, string(schema.AppendJSON(nil, r)))
	}
	slices.Sort(out)
	return out
}

func compareLines(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s:\n  %s\nwant\n  %s", what, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}
