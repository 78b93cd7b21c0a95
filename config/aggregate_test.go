package config_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/config"
)

// changeRow is one row of the table an aggregate by key of datagen
// records makes.
type changeRow struct {
	Key   int64   `json:"key"`
	N     int64   `json:"n"`
	Total int64   `json:"total"`
	Hi    int64   `json:"hi"`
	Mean  float64 `json:"mean"`
}

// An aggregate without a window emits a changelog: per key, an insert and
// then an update per record that changes the result, and with having a
// delete when the result stops qualifying. Applied in order it gives
// exactly the results over all records, and no record is missed or seen
// twice (the count of rows is exact). One source subtask makes each key's
// records arrive in id order, on which the row where having stops holding
// depends.
func TestAggregateEmitsAnExactChangelog(t *testing.T) {
	const count, keys = 3000, 7
	for _, having := range []string{"", "total < 100000"} {
		t.Run(fmt.Sprintf("having=%q", having), func(t *testing.T) {
			h := ""
			if having != "" {
				h = "    having: " + having + "\n"
			}
			dir := runYAML(t, fmt.Sprintf(`pipeline: updating
checkpoint:
  interval: 50ms
  dir: ckpts
restart:
  delay: 10ms
  max_attempts: 1
sources:
  events:
    type: datagen
    parallelism: 1
    count: %d
    keys: %d
transforms:
  totals:
    type: aggregate
    input: events
    key: [key]
    parallelism: 2
    aggregates:
      n: count()
      total: sum(value)
      hi: max(value)
      mean: avg(value)
%ssinks:
  out:
    type: file
    input: totals
    path: out
    parallelism: 3
`, count, keys, h))
			limit := int64(0)
			if having != "" {
				limit = 100000
			}
			checkTotalsChangelog(t, filepath.Join(dir, "out"), count, keys, limit)
		})
	}
}

// checkTotalsChangelog checks the committed changelog under dir of an
// aggregate of count datagen records over keys keys, read by one source
// subtask, of n: count(), total: sum(value), hi: max(value), mean:
// avg(value) by key; with limit > 0, having total < limit.
func checkTotalsChangelog(t *testing.T, dir string, count, keys, limit int64) {
	t.Helper()
	applied, rows := applyKeyed(t, dir, "key")
	got := map[int64]changeRow{}
	for _, m := range applied {
		data, _ := json.Marshal(m)
		var r changeRow
		if err := json.Unmarshal(data, &r); err != nil {
			t.Fatal(err)
		}
		got[r.Key] = r
	}
	shows := func(r changeRow) bool { return limit == 0 || r.Total < limit }
	want := map[int64]changeRow{}
	wantRows := 0
	for _, r := range datagenRecords(count, keys, time.Time{}, 0) {
		w, had := want[r.key]
		wasShown := had && shows(w)
		w.Key, w.N, w.Total, w.Hi = r.key, w.N+1, w.Total+r.value, max(w.Hi, r.value)
		w.Mean = float64(w.Total) / float64(w.N)
		want[r.key] = w
		if shows(w) || wasShown {
			wantRows++ // every record changes n: an insert, update or delete
		}
	}
	for k, w := range want {
		if !shows(w) {
			delete(want, k)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%d keys after the changelog, want %d: %v", len(got), len(want), got)
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("key %d: %+v, want %+v", k, got[k], w)
		}
	}
	if rows != wantRows {
		t.Errorf("%d changelog rows, want %d", rows, wantRows)
	}
}

// An aggregate over a changelog takes each update's previous row back out
// of its group: per key its sums and counts are those of the rows the
// changelog holds at the end, and a group left without rows is deleted.
func TestAggregateOverAChangelogRetracts(t *testing.T) {
	const count, keys = 3000, 7
	run := func(having string) map[string]map[string]any {
		dir := runYAML(t, fmt.Sprintf(`pipeline: retract
checkpoint: {interval: 50ms, dir: ckpts}
restart: {delay: 10ms, max_attempts: 1}
sources:
  events: {type: datagen, parallelism: 2, count: %d, keys: %d}
transforms:
  totals:
    type: aggregate
    input: events
    key: [key]
    aggregates: {n: count(), total: sum(value)}
%s  bucketed: {type: map, input: totals, select: {key: key, bucket: key %% 3, total: total, _op: _op}}
  per_bucket:
    type: aggregate
    input: bucketed
    key: [bucket]
    parallelism: 2
    aggregates: {keys: count(), sum: sum(total), mean: avg(total)}
sinks:
  out: {type: file, input: per_bucket, path: out, parallelism: 2}
`, count, keys, having))
		got, _ := applyKeyed(t, filepath.Join(dir, "out"), "bucket")
		return got
	}
	// Each key has 428 or 429 records, so having n < 400 deletes them all
	// in the end, and every bucket with them: nothing stays.
	if got := run("    having: n < 400\n"); len(got) != 0 {
		t.Fatalf("buckets left: %v, want none (every key was deleted)", got)
	}
	got := run("")

	totals := map[int64]int64{}
	for _, r := range datagenRecords(count, keys, time.Time{}, 0) {
		totals[r.key] += r.value
	}
	want := map[string][3]float64{}
	for k, total := range totals {
		w := want[fmt.Sprint(k%3)]
		w[0]++
		w[1] += float64(total)
		want[fmt.Sprint(k%3)] = w
	}
	if len(got) != len(want) {
		t.Fatalf("%d buckets, want %d: %v", len(got), len(want), got)
	}
	for b, w := range want {
		r := got[b]
		if r["keys"] != w[0] || r["sum"] != w[1] || r["mean"] != w[1]/w[0] {
			t.Errorf("bucket %s: %v, want keys %v sum %v mean %v", b, r, w[0], w[1], w[1]/w[0])
		}
	}
}

// A changelog goes only where it is applied by its key: a filter, window,
// join or aggregate reading it, a map dropping its key or _op, and a
// postgres sink appending it or upserting on another key are refused at
// load, each with the reason.
func TestChangelogIsRefusedWhereItWouldBeMisread(t *testing.T) {
	head := `pipeline: refused
sources:
  events:
    type: datagen
    count: 10
transforms:
  totals:
    type: aggregate
    input: events
    key: [key]
    aggregates:
      n: count()
`
	for _, c := range []struct{ name, rest, want string }{
		{"filter", "  f:\n    type: filter\n    input: totals\n    where: n > 1\nsinks:\n  out: {type: stdout, input: f}\n",
			"totals is a changelog (rows inserted, updated and deleted by [key], in field _op): a filter would take its updates for new records"},
		{"window", "  w:\n    type: window\n    input: totals\n    key: key\n    size: 1s\n    aggregates: {c: count()}\nsinks:\n  out: {type: stdout, input: w}\n",
			"a window would take its updates"},
		{"top_n", "  a:\n    type: top_n\n    input: totals\n    key: [n]\n    order_by: [key]\n    limit: 1\nsinks:\n  out: {type: stdout, input: a}\n",
			"a top_n would take its updates"},
		{"an aggregate that cannot retract", "  a:\n    type: aggregate\n    input: totals\n    key: [n]\n    aggregates: {c: max(key)}\nsinks:\n  out: {type: stdout, input: a}\n",
			"input totals is a changelog, whose updates and deletes take rows back out of their groups: aggregate c: max cannot take back a row"},
		{"map without the key", "  m:\n    type: map\n    input: totals\n    select: {n: n, _op: _op}\nsinks:\n  out: {type: stdout, input: m}\n",
			"select key field key unchanged"},
		{"map computing the key", "  m:\n    type: map\n    input: totals\n    select: {key: key + 1, n: n, _op: _op}\nsinks:\n  out: {type: stdout, input: m}\n",
			"select key field key unchanged"},
		{"map without _op", "  m:\n    type: map\n    input: totals\n    select: {key: key, n: n}\nsinks:\n  out: {type: stdout, input: m}\n",
			"select _op unchanged"},
		{"postgres append", "sinks:\n  out: {type: postgres, input: totals, dsn: 'postgres://x@127.0.0.1/test', table: t}\n",
			"totals is a changelog keyed by [key]: write it with mode: upsert and key: [key]"},
		{"postgres upsert on another key", "sinks:\n  out: {type: postgres, input: totals, dsn: 'postgres://x@127.0.0.1/test', table: t, mode: upsert, key: [n]}\n",
			"key [n] is not the key of the changelog totals, [key]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := writeFile(t, "p.yaml", head+c.rest)
			_, err := config.Load(path)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Load: %v\nwant an error containing %q", err, c.want)
			}
		})
	}
	// A map renaming the key keeps the changelog, keyed by the new name.
	path := writeFile(t, "p.yaml", head+"  m:\n    type: map\n    input: totals\n    select: {id: key, n: n, _op: _op}\nsinks:\n  out: {type: postgres, input: m, dsn: 'postgres://x@127.0.0.1/test', table: t, mode: upsert, key: [key]}\n")
	if _, err := config.Load(path); err == nil || !strings.Contains(err.Error(), "the changelog m, [id]") {
		t.Fatalf("Load: %v\nwant the renamed key [id]", err)
	}
}

// An input field named _op would make a result with two operation fields,
// of which a sink reads the input's: top_n and an aggregate refuse it. A
// kafka key listing a field twice is not the changelog's key.
func TestOperationFieldIsNotAnInputField(t *testing.T) {
	head := `pipeline: op
sources:
  events: {type: datagen, count: 10}
transforms:
  tagged: {type: map, input: events, select: {key: key, value: value, _op: "'delete'"}}
`
	for _, c := range []struct{ name, rest, want string }{
		{"top_n", "  t: {type: top_n, input: tagged, key: [key], order_by: [value], limit: 1}\nsinks:\n  out: {type: stdout, input: t}\n",
			"input tagged has a field _op, the name of the operation in a changelog's rows"},
		{"aggregate", "  t: {type: aggregate, input: tagged, key: [key], aggregates: {n: count()}}\nsinks:\n  out: {type: stdout, input: t}\n",
			"input tagged has a field _op"},
		{"kafka key twice", "  t: {type: aggregate, input: events, key: [key, value], aggregates: {n: count()}}\nsinks:\n  out: {type: kafka, input: t, brokers: [127.0.0.1:9092], topic: x, transactional_id_prefix: p, key: [key, key]}\n",
			"key [key, key] is not the key of the changelog t, [key, value]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := config.Load(writeFile(t, "p.yaml", head+c.rest))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Load: %v\nwant an error containing %q", err, c.want)
			}
		})
	}
}
