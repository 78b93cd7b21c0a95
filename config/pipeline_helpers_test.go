package config_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/config"
	"github.com/ingest-engine/ingest/row"
)

// runYAML writes src as p.yaml in a new directory, runs the bounded
// pipeline it describes to the end and returns the directory.
func runYAML(t *testing.T, src string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("runs a pipeline")
	}
	path := writeFile(t, "p.yaml", src)
	p, err := config.Load(path)
	if err != nil {
		t.Fatalf("Load:\n%v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := p.Stream.Run(ctx, p.RunOptions()); err != nil {
		t.Fatalf("Run: %v", err)
	}
	return filepath.Dir(path)
}

// jsonLines renders rows of schema as the file sink writes them, sorted.
func jsonLines(schema *row.Schema, rows []row.Row) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = string(schema.AppendJSON(nil, r))
	}
	slices.Sort(out)
	return out
}

// sameLines compares two sorted multisets of lines and reports the
// difference: lines missing from got, and lines got has too many of.
func sameLines(t *testing.T, what string, got, want []string) {
	t.Helper()
	if slices.Equal(got, want) {
		return
	}
	count := map[string]int{}
	for _, l := range want {
		count[l]++
	}
	for _, l := range got {
		count[l]--
	}
	var missing, extra []string
	for l, n := range count {
		for ; n > 0; n-- {
			missing = append(missing, l)
		}
		for ; n < 0; n++ {
			extra = append(extra, l)
		}
	}
	slices.Sort(missing)
	slices.Sort(extra)
	show := func(ls []string) string {
		if len(ls) > 5 {
			return strings.Join(ls[:5], "\n    ") + "\n    …"
		}
		return strings.Join(ls, "\n    ")
	}
	t.Errorf("%s: %d lines, want %d; %d missing:\n    %s\n%d unexpected:\n    %s", what, len(got), len(want),
		len(missing), show(missing), len(extra), show(extra))
}

// datagenRecord is datagen record i: its key, value and event time in Unix
// ns, by the README's contract.
type datagenRecord struct {
	id, key, value, time int64
}

// datagenRecords returns the records of a datagen source.
func datagenRecords(count, keys int64, start time.Time, interval time.Duration) []datagenRecord {
	out := make([]datagenRecord, count)
	for i := range out {
		id := int64(i)
		out[i] = datagenRecord{id: id, key: id % keys, value: id % 1000, time: start.UnixNano() + id*int64(interval)}
	}
	return out
}

// floorTo returns the largest multiple of d that is <= t.
func floorTo(t int64, d time.Duration) int64 {
	r := t % int64(d)
	if r < 0 {
		r += int64(d)
	}
	return t - r
}

var (
	i64  = row.IntValue
	tval = row.TimeValue
	fval = row.FloatValue
)
