package config_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/config"
	"github.com/ingest-engine/ingest/internal/failpoint"
	"github.com/ingest-engine/ingest/row"
)

// This file tests the aggregate transform's closes_at (groups that close)
// and the join transform's unique: left, from YAML.

// closingPipeline is datagen (count records, rate-limited so that
// checkpoints and failures happen while it runs) → map (each record's
// group closes at the end of its 100ms of event time) → aggregate by
// [key, expires] closing at expires, with having when set → map stamping
// each result's event time → file sink out.
func closingPipeline(count, keys int64, having string) string {
	h := ""
	if having != "" {
		h = "    having: " + having + "\n"
	}
	return fmt.Sprintf(`pipeline: closing
checkpoint: {interval: 10ms, dir: ckpts}
restart: {delay: 10ms, max_attempts: 10}
sources:
  events:
    type: datagen
    parallelism: 1
    count: %d
    keys: %d
    rate: 20000
transforms:
  bids:
    type: map
    input: events
    select:
      key: key
      value: value
      expires: "event_time.Truncate(duration('100ms')) + duration('99ms')"
  g:
    type: aggregate
    input: bids
    key: [key, expires]
    closes_at: expires
    parallelism: 2
    aggregates:
      n: count()
      total: sum(value)
      hi: max(value)
%s  stamped:
    type: map
    input: g
    keep_input: true
    select: {at: event_time}
sinks:
  out: {type: file, input: stamped, path: out}
`, count, keys, h)
}

// closingWant is the exact output of closingPipeline: per key and 100ms of
// event time, the count, sum and max of the values, at the group's close
// time (the last instant of its 100ms), for the groups keep accepts.
func closingWant(count, keys int64, keep func(n, total int64) bool) []string {
	type group struct{ key, expires int64 }
	type agg struct{ n, total, hi int64 }
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	groups := map[group]agg{}
	for _, r := range datagenRecords(count, keys, start, time.Millisecond) {
		g := group{r.key, floorTo(r.time, 100*time.Millisecond) + 99*int64(time.Millisecond)}
		a := groups[g]
		a.n, a.total, a.hi = a.n+1, a.total+r.value, max(a.hi, r.value)
		groups[g] = a
	}
	schema := &row.Schema{Fields: []row.Field{{Name: "key", Kind: row.Int}, {Name: "expires", Kind: row.Time},
		{Name: "n", Kind: row.Int}, {Name: "total", Kind: row.Int}, {Name: "hi", Kind: row.Int}, {Name: "at", Kind: row.Time}}}
	var rows []row.Row
	for g, a := range groups {
		if keep == nil || keep(a.n, a.total) {
			rows = append(rows, row.Row{i64(g.key), tval(g.expires), i64(a.n), i64(a.total), i64(a.hi), tval(g.expires)})
		}
	}
	return jsonLines(schema, rows)
}

// Groups that close, through failures: each group of closingPipeline is
// committed exactly once, with exactly its records, at its close time as
// event time, with no _op field, although the job fails twice while
// processing records (between checkpoints, after 3 and then 8 completed)
// and restarts from its last checkpoint each time. With HAVING, exactly
// the groups it accepts. Nothing is late: datagen is in order.
func TestConfigClosingGroupsExactlyOnceUnderFailures(t *testing.T) {
	if testing.Short() {
		t.Skip("runs pipelines")
	}
	const count, keys = 20000, 5
	for _, c := range []struct {
		having string
		keep   func(n, total int64) bool
	}{
		{"", nil},
		{"total % 3 != 0", func(_, total int64) bool { return total%3 != 0 }},
	} {
		t.Run(fmt.Sprintf("having=%q", c.having), func(t *testing.T) {
			dir := t.TempDir()
			p, err := config.Parse(filepath.Join(dir, "p.yaml"), []byte(closingPipeline(count, keys, c.having)))
			if err != nil {
				t.Fatalf("Parse:\n%v", err)
			}
			if d := planText(t, p); !strings.Contains(d, "each group once, when the watermark passes its expires") {
				t.Fatalf("plan:%s\nwant the closing aggregate", d)
			}
			job, err := p.Stream.NewJob(p.RunOptions())
			if err != nil {
				t.Fatal(err)
			}
			after := []int64{3, 8}
			var fired int
			var mu sync.Mutex
			t.Cleanup(failpoint.Enable("task/process-batch", func() error {
				mu.Lock()
				defer mu.Unlock()
				if fired < len(after) && job.Stats().Completed >= after[fired] {
					fired++
					return failpoint.ErrInjected
				}
				return nil
			}))
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if err := job.Run(ctx); err != nil {
				t.Fatalf("Run: %v", err)
			}
			st := job.Stats()
			mu.Lock()
			defer mu.Unlock()
			if fired != len(after) || st.Restarts < 2 || st.RestoredFrom == 0 {
				t.Fatalf("%d failures injected, stats %+v: want 2 restarts from checkpoints before the input ended", fired, st)
			}
			got := committedLines(t, dir, "out")
			for _, l := range got {
				if strings.Contains(l, "_op") {
					t.Fatalf("a closed group's row has an operation field: %s", l)
				}
			}
			sameLines(t, "closed groups", sortedCopy(got), closingWant(count, keys, c.keep))
			if late := job.Observe().LateRecords["g"]; late != 0 {
				t.Errorf("%d late records from an in-order source", late)
			}
		})
	}
}

func sortedCopy(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

// closingFilePipeline reads bids.jsonl (auction, expires, price, ts) and
// aggregates them by [auction, expires], closing at expires.
const closingFilePipeline = `pipeline: late
checkpoint: {interval: 50ms, dir: ckpts}
restart: {delay: 10ms, max_attempts: 0}
sources:
  bids:
    type: file
    path: bids.jsonl
    stop_at: latest
    fields: {auction: int, expires: time, price: int, ts: time}
    event_time: {field: ts}
transforms:
  g:
    type: aggregate
    input: bids
    key: [auction, expires]
    closes_at: expires
    aggregates: {n: count(), hi: max(price)}
sinks:
  out: {type: file, input: g, path: out}
`

// closingT0 is where the file pipelines' event times start.
var closingT0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func closingTS(d time.Duration) string { return closingT0.Add(d).Format(time.RFC3339Nano) }

// runClosingFile writes lines as bids.jsonl, runs closingFilePipeline over
// it and returns the directory, the job's late-record count of g and
// Run's error.
func runClosingFile(t *testing.T, lines []string) (string, int64, error) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "bids.jsonl"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := config.Parse(filepath.Join(dir, "p.yaml"), []byte(closingFilePipeline))
	if err != nil {
		t.Fatalf("Parse:\n%v", err)
	}
	job, err := p.Stream.NewJob(p.RunOptions())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err = job.Run(ctx)
	return dir, job.Observe().LateRecords["g"], err
}

// A record of a group whose close time the watermark passed is late,
// whatever its own event time: dropped, counted in the aggregate's late
// records (ingest_late_records_total), and the group is committed once,
// without it. Auction a's 100 bids are 1ms apart from a*100ms, the last
// exactly at its close time; two bids of closed auctions (one on time by
// its own event time, one not) come thousands of records later, several
// reads after the watermark passed their close.
func TestConfigClosingLateRecordsDroppedAndCounted(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a pipeline")
	}
	var lines []string
	schema := &row.Schema{Fields: []row.Field{{Name: "auction", Kind: row.Int}, {Name: "expires", Kind: row.Time}, {Name: "n", Kind: row.Int}, {Name: "hi", Kind: row.Int}}}
	var want []row.Row
	const auctions = 50
	for a := range int64(auctions) {
		expires := time.Duration(a*100+99) * time.Millisecond
		for i := range int64(100) {
			lines = append(lines, fmt.Sprintf(`{"auction":%d,"expires":%q,"price":%d,"ts":%q}`, a, closingTS(expires), a+i, closingTS(time.Duration(a*100+i)*time.Millisecond)))
		}
		want = append(want, row.Row{i64(a), tval(closingT0.Add(expires).UnixNano()), i64(100), i64(a + 99)})
	}
	end := time.Duration(auctions*100) * time.Millisecond
	lines = append(lines,
		fmt.Sprintf(`{"auction":3,"expires":%q,"price":999999,"ts":%q}`, closingTS(399*time.Millisecond), closingTS(end)),
		fmt.Sprintf(`{"auction":10,"expires":%q,"price":999999,"ts":%q}`, closingTS(1099*time.Millisecond), closingTS(1000*time.Millisecond)))
	dir, late, err := runClosingFile(t, lines)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	sameLines(t, "closed groups", sortedCopy(committedLines(t, dir, "out")), jsonLines(schema, want))
	if late != 2 {
		t.Fatalf("%d late records counted for g, want 2", late)
	}
}

// A record whose close time is null fails the job with an error naming
// the field: its group would never close.
func TestConfigClosingNullCloseTimeFails(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a pipeline")
	}
	lines := []string{
		fmt.Sprintf(`{"auction":1,"expires":%q,"price":1,"ts":%q}`, closingTS(time.Second), closingTS(0)),
		fmt.Sprintf(`{"auction":2,"expires":null,"price":1,"ts":%q}`, closingTS(time.Millisecond)),
	}
	_, _, err := runClosingFile(t, lines)
	if err == nil || !strings.Contains(err.Error(), "expires") || !strings.Contains(err.Error(), "never close") {
		t.Fatalf("Run: %v, want an error naming expires, whose group would never close", err)
	}
	t.Logf("failed: %v", err)
}

// closes_at and unique: left are refused, naming the file, line and
// field, where they cannot mean what they say.
func TestConfigClosingAndUniqueRefusals(t *testing.T) {
	head := `pipeline: refused
sources:
  events: {type: datagen, count: 10}
transforms:
  timed: {type: map, input: events, select: {id: id, key: key, value: value, expires: "event_time + duration('50ms')"}}
`
	for _, c := range []struct{ name, rest, want string }{
		{"closes_at not in key",
			"  g:\n    type: aggregate\n    input: timed\n    key: [key]\n    closes_at: expires\n    aggregates: {n: count()}\nsinks:\n  out: {type: stdout, input: g}\n",
			`p.yaml:10: transforms.g.closes_at: "expires" is not in key: the close time is part of each group (key: [key, expires])`},
		{"closes_at not a time",
			"  g:\n    type: aggregate\n    input: timed\n    key: [key, value]\n    closes_at: value\n    aggregates: {n: count()}\nsinks:\n  out: {type: stdout, input: g}\n",
			"p.yaml:10: transforms.g.closes_at: value is a int field: a group closes at a time (time fields of timed: expires)"},
		{"closes_at over a changelog",
			"  totals: {type: aggregate, input: timed, key: [key, expires], aggregates: {n: count()}}\n" +
				"  g:\n    type: aggregate\n    input: totals\n    key: [key, expires]\n    closes_at: expires\n    aggregates: {c: count()}\nsinks:\n  out: {type: stdout, input: g}\n",
			"p.yaml:11: transforms.g.closes_at: input totals is a changelog, whose updates can reopen any group: groups that close read an append-only input"},
		{"unique: left with a duration upper",
			"  j:\n    type: join\n    kind: interval\n    left: timed\n    right: events\n    on: key\n    lower: 0s\n    upper: 1s\n    unique: left\n    select: {id: left.id}\nsinks:\n  out: {type: stdout, input: j}\n",
			"p.yaml:14: transforms.j.unique: is taken only by an interval join bounded by a left field (upper: left.<field>)"},
		{"unique: left on a window join",
			"  j:\n    type: join\n    kind: window\n    left: timed\n    right: events\n    on: key\n    size: 1s\n    unique: left\n    select: {id: left.id}\nsinks:\n  out: {type: stdout, input: j}\n",
			"p.yaml:13: transforms.j.unique: is taken only by an interval join bounded by a left field"},
		{"unique: right",
			"  j:\n    type: join\n    kind: interval\n    left: timed\n    right: events\n    on: key\n    lower: 0s\n    upper: left.expires\n    unique: right\n    select: {id: left.id}\nsinks:\n  out: {type: stdout, input: j}\n",
			`p.yaml:14: transforms.j.unique: "right": want left (no two left records share a key)`},
	} {
		t.Run(c.name, func(t *testing.T) {
			lines := parseErrs(t, head+c.rest)
			if !hasLine(lines, c.want) {
				t.Fatalf("errors:\n  %s\nwant a line starting %q", strings.Join(lines, "\n  "), c.want)
			}
		})
	}
	// The accepted forms: the plan says what they declare.
	for _, c := range []struct{ name, rest, want string }{
		{"closes_at", "  g:\n    type: aggregate\n    input: timed\n    key: [key, expires]\n    closes_at: expires\n    aggregates: {n: count()}\nsinks:\n  out: {type: stdout, input: g}\n",
			"each group once, when the watermark passes its expires"},
		{"unique: left", "  j:\n    type: join\n    kind: interval\n    left: timed\n    right: events\n    on: key\n    lower: 0s\n    upper: left.expires\n    unique: left\n    select: {id: left.id}\nsinks:\n  out: {type: stdout, input: j}\n",
			"left unique by key (declared)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := config.Parse("p.yaml", []byte(head+c.rest))
			if err != nil {
				t.Fatalf("Parse:\n%v", err)
			}
			if d := planText(t, p); !strings.Contains(d, c.want) {
				t.Fatalf("plan:%s\nwant %q", d, c.want)
			}
		})
	}
}

// The output of groups that close is append-only: a transform that
// refuses a changelog (a filter) reads it.
func TestConfigClosingOutputIsAppendOnly(t *testing.T) {
	src := `pipeline: appendonly
sources:
  events: {type: datagen, count: 10}
transforms:
  timed: {type: map, input: events, select: {key: key, expires: "event_time + duration('50ms')"}}
  g: {type: aggregate, input: timed, key: [key, expires], closes_at: expires, aggregates: {n: count()}}
  f: {type: filter, input: g, where: n > 0}
sinks:
  out: {type: stdout, input: f}
`
	if _, err := config.Parse("p.yaml", []byte(src)); err != nil {
		t.Fatalf("a filter over a closing aggregate: %v", err)
	}
}
