package postgres_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/connector/postgres"
	"github.com/ingest-engine/ingest/row"
)

// The dynamic rows of YAML pipelines: one column per schema field, typed by
// the field's kind, values converted as pgx encodes them, NULLs included.
func TestRowSink(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	schema := &row.Schema{Fields: []row.Field{
		{Name: "id", Kind: row.Int}, {Name: "score", Kind: row.Float}, {Name: "name", Kind: row.String},
		{Name: "ok", Kind: row.Bool}, {Name: "at", Kind: row.Time}, {Name: "note", Kind: row.String}, {Name: "raw", Kind: row.Bytes},
	}}
	if got := postgres.RowColumns(schema); got[1].Type != "double precision" || got[4].Type != "timestamptz" || got[3].Type != "boolean" || got[6].Type != "bytea" {
		t.Fatalf("RowColumns = %+v", got)
	}
	s, err := postgres.NewRowSink(f.config("rows", postgres.Upsert, "id"), schema, nil)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 3, 4, 5, 6, 7, 123456000, time.UTC)
	w := openWriter(t, s, 0, testJob)
	write(t, w,
		row.Row{row.IntValue(1), row.FloatValue(1.5), row.StringValue("é ☃ \"q\""), row.BoolValue(true), row.TimeValue(at.UnixNano()), {}, row.BytesValue("a\xff\x00")},
		row.Row{row.IntValue(2), row.FloatValue(math.Inf(-1)), row.StringValue(""), row.BoolValue(false), row.TimeValue(0), row.StringValue("n"), {}},
	)
	commit(t, s.Committer(), testJob, commitOf(1, 0, snapshot(t, w, 1)))

	var score float64
	var name string
	var ok bool
	var got time.Time
	var note *string
	var raw []byte
	if err := f.conn.QueryRow(context.Background(), "SELECT score, name, ok, at, note, raw FROM "+f.quoted("rows")+" WHERE id = 1").Scan(&score, &name, &ok, &got, &note, &raw); err != nil {
		t.Fatal(err)
	}
	if score != 1.5 || name != "é ☃ \"q\"" || !ok || !got.Equal(at) || note != nil || string(raw) != "a\xff\x00" {
		t.Errorf("row 1 = %v %q %v %v %v %q", score, name, ok, got, note, raw)
	}
	if err := f.conn.QueryRow(context.Background(), "SELECT score FROM "+f.quoted("rows")+" WHERE id = 2").Scan(&score); err != nil || !math.IsInf(score, -1) {
		t.Errorf("row 2 score = %v, %v", score, err)
	}
	if _, err := postgres.NewRowSink(f.config("rows", postgres.Append), schema, []postgres.Column{{Name: "id", Type: "bigint"}}); err == nil {
		t.Error("NewRowSink accepted 1 column for 7 fields")
	}
}
