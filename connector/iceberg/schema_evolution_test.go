//go:build iceberg

package iceberg_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ingest-engine/ingest/row"
)

// A field added to the input (a column added to a CDC source's table, and
// the pipeline loaded again) flows on into a table the sink creates
// (create_table): the table gains an optional column, the rows written
// before read it as NULL, and a changelog's updates and deletes of rows
// written before the change apply to them. Two subtasks opening at once
// both add it (one wins the race, the other finds it added). A table the
// sink does not create is left alone: the new field is refused, naming it.
func TestIcebergInputGainsAColumn(t *testing.T) {
	f := newFixture(t)
	before := changelogSchema
	after := &row.Schema{Fields: []row.Field{{Name: "k", Kind: row.Int}, {Name: "v", Kind: row.Int}, {Name: "note", Kind: row.String}, {Name: "_op", Kind: row.String}}}
	ctx := context.Background()

	cfg := f.config("grows", before)
	cfg.Key, cfg.Op = []string{"k"}, "_op"
	h := newHarness(t, cfg, "job1", 1)
	h.write(0, change(1, 10, "insert"), change(2, 20, "insert"), change(3, 30, "insert"))
	if err := h.commit(ctx, h.barrier(1)); err != nil {
		t.Fatal(err)
	}

	cfg.Schema = after
	h2 := newHarness(t, cfg, "job1", 2)
	note := func(k, v int64, n, op string) row.Row {
		return row.Row{row.IntValue(k), row.IntValue(v), row.StringValue(n), row.StringValue(op)}
	}
	h2.write(0, note(2, 21, "updated", "update"), note(4, 40, "new", "insert"))
	h2.write(1, note(3, 30, "", "delete"))
	if err := h2.commit(ctx, h2.barrier(2)); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range f.scan(t, "grows", "k", "v", "note") {
		got = append(got, fmt.Sprintf("%v %v %v", r...))
	}
	slices.Sort(got)
	want := []string{"1 10 <nil>", "2 21 updated", "4 40 new"}
	if !slices.Equal(got, want) {
		t.Fatalf("table rows %q, want %q", got, want)
	}
	if n := len(f.table(t, "grows").Metadata().Schemas()); n != 2 {
		t.Errorf("%d schemas, want 2 (the created one and the one with note)", n)
	}

	// Not created by the sink: refused.
	cfg.CreateTable = false
	cfg.Schema = &row.Schema{Fields: append(slices.Clone(after.Fields[:3]), row.Field{Name: "extra", Kind: row.Int}, after.Fields[3])}
	if err := openErr(t, cfg, "job1"); err == nil || !strings.Contains(err.Error(), `the table has no column "extra"`) {
		t.Fatalf("a new field without create_table: %v, want it refused", err)
	}
}
