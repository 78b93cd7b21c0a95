// Package nexmark_test runs the Nexmark queries written in SQL (q*.sql here)
// against the same queries written with the Go API (package
// nexmark/query), over the same events, and requires the same rows.
package nexmark_test

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/config"
	"github.com/ingest-engine/ingest/internal/testkit"
	"github.com/ingest-engine/ingest/nexmark"
	"github.com/ingest-engine/ingest/nexmark/query"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/stream"
)

// events is each run's event count: Beam's default timeline, 300 s of event
// time, about 27,600 bids.
const events = 30_000

// committed returns the JSON objects committed under dir.
func committed(t *testing.T, dir string) []map[string]any {
	t.Helper()
	lines, err := testkit.ReadCommitted(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, l := range lines {
		var m map[string]any
		dec := json.NewDecoder(strings.NewReader(string(l.Text)))
		dec.UseNumber()
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("%s: %q: %v", l.File, l.Text, err)
		}
		out = append(out, m)
	}
	return out
}

// goRows runs the Go API query name over the events.
func goRows(t *testing.T, name string) []map[string]any {
	t.Helper()
	q, err := query.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p, err := query.Pipeline(q, nexmark.SourceConfig{Generator: nexmark.DefaultConfig(), Events: events, MaxDelay: query.WatermarkDelay}, 1, filepath.Join(dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	ck := checkpoint.DefaultOptions()
	ck.Interval = 50 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := p.Run(ctx, stream.RunOptions{CheckpointDir: filepath.Join(dir, "ck"), Checkpoint: ck, Restart: runtime.RestartOptions{MaxAttempts: 1}}); err != nil {
		t.Fatal(err)
	}
	return committed(t, filepath.Join(dir, "out"))
}

// sqlRows runs examples/nexmark/<name>.sql over the events.
func sqlRows(t *testing.T, name string) []map[string]any {
	t.Helper()
	text, err := os.ReadFile(name + ".sql")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, name+".sql")
	if err := os.WriteFile(path, text, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("NEXMARK_EVENTS", "30000")
	p, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := p.Stream.Run(ctx, p.RunOptions()); err != nil {
		t.Fatal(err)
	}
	return committed(t, filepath.Join(dir, "data", name))
}

// canonical renders a row with the Go API's names and units: times (RFC 3339
// in SQL rows) as epoch milliseconds, date_time as dateTime, numbers to three
// decimals
// (q1's DECIMAL(23, 3) price; SQL computes it as a double).
func canonical(t *testing.T, m map[string]any) string {
	t.Helper()
	out := map[string]any{}
	for k, v := range m {
		if k == "date_time" {
			k = "dateTime"
		}
		switch {
		case k == "dateTime" || k == "starttime" || k == "endtime" || k == "stime":
			if n, ok := v.(json.Number); ok {
				ms, _ := n.Int64()
				out[k] = ms
				continue
			}
			ts, err := time.Parse(time.RFC3339Nano, v.(string))
			if err != nil {
				t.Fatalf("%s %v: %v", k, v, err)
			}
			out[k] = ts.UnixMilli()
		default:
			if n, ok := v.(json.Number); ok {
				f, _ := n.Float64()
				out[k] = math.Round(f*1000) / 1000
				continue
			}
			out[k] = v
		}
	}
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The SQL versions of q0, q1, q2, q3, q8 and q11 give the Go API versions' rows.
func TestSQLQueriesMatchTheGoAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("runs pipelines")
	}
	for _, name := range []string{"q0", "q1", "q2", "q3", "q8", "q11"} {
		t.Run(name, func(t *testing.T) {
			var want, got []string
			for _, r := range goRows(t, name) {
				want = append(want, canonical(t, r))
			}
			for _, r := range sqlRows(t, name) {
				got = append(got, canonical(t, r))
			}
			slices.Sort(want)
			slices.Sort(got)
			if len(want) == 0 {
				t.Fatal("the Go API query gave no rows")
			}
			if !slices.Equal(got, want) {
				t.Fatalf("SQL gave %d rows, the Go API %d; first SQL %s, first Go %s", len(got), len(want), got[0], want[0])
			}
			t.Logf("%d rows alike", len(got))
		})
	}
}

// q8's join of two windowed views is planned as an interval join of [0, 0]
// (whose state the watermark frees), not as an inner join that keeps every
// window's results forever; no warning.
func TestQ8PairsWindowsWithAnIntervalJoin(t *testing.T) {
	t.Setenv("NEXMARK_EVENTS", "1000")
	p, err := config.Load("q8.sql")
	if err != nil {
		t.Fatal(err)
	}
	plan, err := p.Stream.Plan()
	if err != nil {
		t.Fatal(err)
	}
	if d := plan.Describe(); !strings.Contains(d, "interval join [0s, 0s]") {
		t.Errorf("plan:\n%s\nwant an interval join of [0s, 0s]", d)
	}
	if len(p.Warnings) != 0 {
		t.Errorf("warnings %v", p.Warnings)
	}
}

// q10, which has no Go API version, gives what a direct computation over
// the generator's events gives: every bid with its day, minute and hour.
func TestSQLQ10AgainstTheGenerator(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a pipeline")
	}
	g, err := nexmark.NewGenerator(nexmark.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for n := range int64(events) {
		e := g.Event(n)
		if e.Type != nexmark.BidEvent {
			continue
		}
		b := e.Bid
		at := time.UnixMilli(b.DateTime).UTC()
		row := map[string]any{"auction": b.Auction, "bidder": b.Bidder, "price": b.Price, "date_time": at.Format(time.RFC3339Nano),
			"extra": b.Extra, "dt": at.Format("2006-01-02"), "hm": at.Format("15:04"), "hour": at.Hour()}
		data, err := json.Marshal(row)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, string(data))
	}
	var got []string
	for _, r := range sqlRows(t, "q10") {
		data, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(data))
	}
	slices.Sort(want)
	slices.Sort(got)
	if len(want) == 0 || !slices.Equal(got, want) {
		t.Fatalf("SQL gave %d rows, the generator %d; first %s, want %s", len(got), len(want), first(got), first(want))
	}
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}
