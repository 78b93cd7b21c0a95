package config_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/config"
	"github.com/ingest-engine/ingest/internal/testkit"
)

// applyKeyed reads the committed changelog under dir in publication order
// and applies it by the JSON fields keys, failing on an insert of a present
// key, an update or delete of an absent one, a delete that is not of the
// present row, or a key written by two sink subtasks (its rows' order would
// then depend on how the files are read). It returns the table (each row
// without _op) and the rows read.
func applyKeyed(t *testing.T, dir string, keys ...string) (map[string]map[string]any, int) {
	t.Helper()
	lines, err := testkit.ReadCommitted(dir)
	if err != nil {
		t.Fatal(err)
	}
	table := map[string]map[string]any{}
	writer := map[string]string{}
	for i, l := range lines {
		var r map[string]any
		if err := json.Unmarshal(l.Text, &r); err != nil {
			t.Fatalf("line %d %q: %v", i, l.Text, err)
		}
		var k []string
		for _, f := range keys {
			k = append(k, fmt.Sprint(r[f]))
		}
		key := strings.Join(k, "|")
		sub, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(l.File), "part-"), "-")
		if w, seen := writer[key]; seen && w != sub {
			t.Fatalf("line %d: key %s is written by sink subtasks %s and %s", i, key, w, sub)
		}
		writer[key] = sub
		op := r["_op"]
		delete(r, "_op")
		cur, present := table[key]
		switch {
		case op == "insert" && !present, op == "update" && present:
			table[key] = r
		case op == "delete" && present:
			if !reflect.DeepEqual(cur, r) {
				t.Fatalf("line %d deletes %v, the key's row is %v", i, r, cur)
			}
			delete(table, key)
		default:
			t.Fatalf("line %d: %v of key %s, which is present: %v", i, op, key, present)
		}
	}
	return table, len(lines)
}

// top_n keeps the first rows of each key: applied by (key, rank), its
// changelog gives exactly each key's three largest values (ties by id); with
// limit 1 and no rank it deduplicates, keeping each key's first row.
func TestTopNKeepsTheFirstRowsOfEachKey(t *testing.T) {
	const count, keys = 2000, 6
	dir := runYAML(t, fmt.Sprintf(`pipeline: topn
checkpoint: {interval: 50ms, dir: ckpts}
restart: {delay: 10ms, max_attempts: 1}
sources:
  events: {type: datagen, parallelism: 2, count: %d, keys: %d}
transforms:
  top3:
    type: top_n
    input: events
    key: [key]
    order_by: [value desc, id]
    limit: 3
    rank: rn
    parallelism: 2
  first:
    type: top_n
    input: events
    key: [key]
    order_by: [id]
    limit: 1
sinks:
  top: {type: file, input: top3, path: top, parallelism: 3}
  dedup: {type: file, input: first, path: first}
`, count, keys))
	records := datagenRecords(count, keys, time.Time{}, 0)
	got, _ := applyKeyed(t, filepath.Join(dir, "top"), "key", "rn")
	for k := int64(0); k < keys; k++ {
		var of []datagenRecord
		for _, r := range records {
			if r.key == k {
				of = append(of, r)
			}
		}
		slices.SortFunc(of, func(a, b datagenRecord) int {
			if a.value != b.value {
				return int(b.value - a.value)
			}
			return int(a.id - b.id)
		})
		for rank, r := range of[:3] {
			row := got[fmt.Sprintf("%d|%d", k, rank+1)]
			if row == nil || row["id"] != float64(r.id) || row["value"] != float64(r.value) {
				t.Errorf("key %d rank %d: %v, want id %d value %d", k, rank+1, row, r.id, r.value)
			}
		}
	}
	if len(got) != 3*keys {
		t.Errorf("%d ranks, want %d", len(got), 3*keys)
	}
	first, _ := applyKeyed(t, filepath.Join(dir, "first"), "key")
	for k := int64(0); k < keys; k++ {
		if row := first[fmt.Sprint(k)]; row == nil || row["id"] != float64(k) {
			t.Errorf("first row of key %d: %v, want id %d", k, row, k)
		}
	}
	if len(first) != keys {
		t.Errorf("%d keys deduplicated, want %d", len(first), keys)
	}
}

// A processing-time window is tumbling and has no late records: the other
// shapes and the late-record fields are refused at load.
func TestProcessingTimeWindowRefusals(t *testing.T) {
	head := "pipeline: pt\nsources:\n  events: {type: datagen, count: 10}\nsinks:\n  out: {type: stdout, input: w}\ntransforms:\n  w: "
	for _, c := range []struct{ w, want string }{
		{"{type: window, input: events, key: key, kind: sliding, size: 2s, slide: 1s, time: processing, aggregates: {n: count()}}", "processing-time windows are tumbling"},
		{"{type: window, input: events, key: key, size: 1s, time: processing, allowed_lateness: 1s, aggregates: {n: count()}}", "a processing-time window has no late records"},
		{"{type: window, input: events, key: key, size: 1s, time: wall, aggregates: {n: count()}}", `unknown time "wall" (known: event, processing)`},
	} {
		_, err := config.Load(writeFile(t, "p.yaml", head+c.w+"\n"))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.w, err, c.want)
		}
	}
}
