package file_test

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/ingest-engine/ingest/connector/datagen"
	"github.com/ingest-engine/ingest/connector/file"
	"github.com/ingest-engine/ingest/internal/testkit"
	"github.com/ingest-engine/ingest/row"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/stream"
)

// pqRec is a typed Parquet record.
type pqRec struct {
	ID    int64     `parquet:"id"`
	Key   string    `parquet:"key"`
	Score float64   `parquet:"score"`
	At    time.Time `parquet:"at"`
	Note  *string   `parquet:"note,optional"`
}

// committedParquet lists the committed .parquet files under dir.
func committedParquet(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if rel != "." && !testkit.IsCommitted(rel) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.IsDir() && strings.HasSuffix(path, ".parquet") {
			out = append(out, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// readParquet reads every committed file under dir as T.
func readParquet[T any](t *testing.T, dir string) []T {
	t.Helper()
	var all []T
	for _, f := range committedParquet(t, dir) {
		rows, err := parquet.ReadFile[T](f)
		if err != nil {
			t.Fatalf("reading %s: %v", f, err)
		}
		all = append(all, rows...)
	}
	return all
}

func writeBatch[T any](t *testing.T, w runtime.SinkSubtask[T], values ...T) {
	t.Helper()
	b := make(runtime.Batch[T], len(values))
	for i, v := range values {
		b[i] = runtime.Record[T]{Value: v}
	}
	if err := w.Write(b); err != nil {
		t.Fatalf("Write: %v", err)
	}
}

// The Parquet sink stages one file per subtask per checkpoint, invisible
// until the commit, which publishes the checkpoint's files from all
// subtasks at once; the files read back with parquet-go hold exactly the
// rows written.
func TestParquetSinkStagesAndCommits(t *testing.T) {
	dir := t.TempDir()
	s, err := file.Parquet[pqRec](dir, file.WithCompression(file.Zstd), file.RowGroupRows(7))
	if err != nil {
		t.Fatal(err)
	}
	if s.Descriptor().Capabilities.SinkGuarantee() != runtime.ExactlyOnce || s.Committer() == nil || !strings.Contains(s.Describe(), "parquet") {
		t.Fatalf("Guarantee %v, committer %v, Describe %q", s.Descriptor().Capabilities.SinkGuarantee(), s.Committer(), s.Describe())
	}
	w0, w1 := openWriter(t, s, 0), openWriter(t, s, 1)
	note := "é \"quoted\"\n"
	var want []pqRec
	for i := range 50 {
		r := pqRec{ID: int64(i), Key: fmt.Sprintf("k%d", i%3), Score: float64(i) / 4, At: time.Unix(1_767_225_600, int64(i)).UTC()}
		if i%5 == 0 {
			r.Note = &note
		}
		want = append(want, r)
		if i%2 == 0 {
			writeBatch(t, w0, r)
		} else {
			writeBatch(t, w1, r)
		}
	}
	c0, c1 := snapshot(t, w0, 1), snapshot(t, w1, 1)
	if len(c0) != 1 || !strings.HasSuffix(file.StagedName(c0[0].Data), ".parquet") {
		t.Fatalf("committables %+v, want one .parquet file", c0)
	}
	if got := committedParquet(t, dir); len(got) != 0 {
		t.Fatalf("before the commit a reader sees %v", got)
	}
	if err := s.Committer().Commit(context.Background(), job, commitOf(1, c0, c1)); err != nil {
		t.Fatal(err)
	}
	files := committedParquet(t, dir)
	if len(files) != 2 {
		t.Fatalf("committed files %v, want 2", files)
	}
	for _, f := range files {
		if filepath.Dir(f) != file.CommittedDir(dir, job, 1) {
			t.Errorf("%s is not in the checkpoint's directory", f)
		}
		pf := testkit.OpenParquet(t, f)
		if n := len(pf.RowGroups()); n < 3 {
			t.Errorf("%s has %d row groups, want >= 3 at 7 rows per group", f, n)
		}
		if codec := pf.Metadata().RowGroups[0].Columns[0].MetaData.Codec.String(); codec != "ZSTD" {
			t.Errorf("%s column chunk codec %s, want ZSTD", f, codec)
		}
	}
	got := readParquet[pqRec](t, dir)
	slices.SortFunc(got, func(a, b pqRec) int { return int(a.ID - b.ID) })
	if len(got) != len(want) {
		t.Fatalf("read back %d rows, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.ID != w.ID || g.Key != w.Key || g.Score != w.Score || !g.At.Equal(w.At) || (g.Note == nil) != (w.Note == nil) || (g.Note != nil && *g.Note != *w.Note) {
			t.Fatalf("row %d: got %+v, want %+v", i, g, w)
		}
	}
	// Later records go to new files; an empty interval stages nothing.
	writeBatch(t, w0, pqRec{ID: 100})
	if cs := snapshot(t, w0, 2); len(cs) != 2 {
		t.Fatalf("committables after a second file %+v", cs)
	}
}

// Types parquet-go cannot map are an error from the constructor, not a
// panic at run time.
func TestParquetRejectsUnsupportedTypes(t *testing.T) {
	if _, err := file.Parquet[int64](t.TempDir()); err == nil || !strings.Contains(err.Error(), "not a struct") {
		t.Errorf("Parquet[int64]: %v", err)
	}
	type withChan struct{ C chan int }
	if _, err := file.Parquet[withChan](t.TempDir()); err == nil {
		t.Error("Parquet of a struct with a channel: no error")
	}
	if _, err := file.Parquet[*pqRec](t.TempDir()); err != nil {
		t.Errorf("Parquet[*pqRec]: %v", err)
	}
	if _, err := file.Parquet[pqRec](t.TempDir(), file.WithCompression(file.Compression(42))); err == nil {
		t.Error("an unknown compression was accepted")
	}
}

func TestParseCompression(t *testing.T) {
	for _, name := range []string{"snappy", "zstd", "gzip", "none", "ZSTD"} {
		c, err := file.ParseCompression(name)
		if err != nil || c.String() != strings.ToLower(name) {
			t.Errorf("ParseCompression(%q) = %v, %v", name, c, err)
		}
	}
	if _, err := file.ParseCompression("lzo"); err == nil || !strings.Contains(err.Error(), "snappy, zstd, gzip, none") {
		t.Errorf("ParseCompression(lzo): %v", err)
	}
}

// rowRead is how a test reads ParquetRows output back.
type rowRead struct {
	ID    *int64   `parquet:"id,optional"`
	Name  *string  `parquet:"name,optional"`
	Score *float64 `parquet:"score,optional"`
	OK    *bool    `parquet:"ok,optional"`
	At    *int64   `parquet:"at,optional"`
	Raw   []byte   `parquet:"raw,optional"`
}

// Dynamic rows: one nullable column per field in the fields' order, nulls
// as nulls, ints widened into float columns, and a value of another kind
// an error naming the column.
func TestParquetRowsSchemaAndValues(t *testing.T) {
	dir := t.TempDir()
	fields := []row.Field{{Name: "id", Kind: row.Int}, {Name: "name", Kind: row.String}, {Name: "score", Kind: row.Float}, {Name: "ok", Kind: row.Bool}, {Name: "at", Kind: row.Time}, {Name: "raw", Kind: row.Bytes}}
	s, err := file.ParquetRows(dir, fields)
	if err != nil {
		t.Fatal(err)
	}
	w := openWriter(t, s, 0)
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC).UnixNano()
	writeBatch(t, w,
		row.Row{row.IntValue(1), row.StringValue("one"), row.FloatValue(1.5), row.BoolValue(true), row.TimeValue(at), row.BytesValue("a\xff\x00")},
		row.Row{row.IntValue(2), row.Value{}, row.IntValue(3), row.BoolValue(false), row.Value{}},
		row.Row{row.IntValue(3)}, // short: the rest is null
	)
	if err := s.Committer().Commit(context.Background(), job, commitOf(1, snapshot(t, w, 1))); err != nil {
		t.Fatal(err)
	}
	files := committedParquet(t, dir)
	if len(files) != 1 {
		t.Fatalf("committed %v", files)
	}
	var names []string
	for _, f := range testkit.OpenParquet(t, files[0]).Schema().Fields() {
		names = append(names, f.Name())
	}
	if !slices.Equal(names, []string{"id", "name", "score", "ok", "at", "raw"}) {
		t.Errorf("columns %v, want the fields' order", names)
	}
	if sc := testkit.OpenParquet(t, files[0]).Schema().String(); !strings.Contains(sc, "TIMESTAMP(isAdjustedToUTC=true,unit=NANOS)") || !strings.Contains(sc, "optional binary name (STRING)") || !strings.Contains(sc, "optional binary raw;") {
		t.Errorf("schema %s", sc)
	}
	got := readParquet[rowRead](t, dir)
	if len(got) != 3 {
		t.Fatalf("read %d rows", len(got))
	}
	r0, r1, r2 := got[0], got[1], got[2]
	if *r0.ID != 1 || *r0.Name != "one" || *r0.Score != 1.5 || !*r0.OK || *r0.At != at || string(r0.Raw) != "a\xff\x00" {
		t.Errorf("row 0: %+v", r0)
	}
	if *r1.ID != 2 || r1.Name != nil || *r1.Score != 3 || *r1.OK || r1.At != nil {
		t.Errorf("row 1: %+v", r1)
	}
	if *r2.ID != 3 || r2.Name != nil || r2.Score != nil || r2.OK != nil || r2.At != nil {
		t.Errorf("row 2: %+v", r2)
	}

	// A value of the wrong kind fails the subtask with the column's name.
	w2 := openWriter(t, s, 1)
	b := runtime.Batch[row.Row]{{Value: row.Row{row.StringValue("x")}}}
	if err := w2.Write(b); err == nil || !strings.Contains(err.Error(), `column "id"`) || !strings.Contains(err.Error(), "string value") {
		t.Errorf("a string in an int column: %v", err)
	}

	for _, bad := range [][]row.Field{nil, {{Name: "a", Kind: row.Null}}, {{Name: "a", Kind: row.Int}, {Name: "a", Kind: row.Float}}, {{Name: "", Kind: row.Int}}} {
		if _, err := file.ParquetRows(dir, bad); err == nil {
			t.Errorf("ParquetRows(%v) accepted", bad)
		}
	}
}

// pqEvent is datagen's event as a Parquet record.
type pqEvent struct {
	ID    int64 `parquet:"id"`
	Key   int64 `parquet:"key"`
	Value int64 `parquet:"value"`
	Time  int64 `parquet:"time,timestamp(nanosecond)"`
}

// datagen → failing pass-through → Parquet sink, with failures after
// checkpoints and at the sink's prepare and mid-commit: the committed
// Parquet files, read back, hold every record exactly once.
func TestParquetPipelineExactlyOnceWithFailures(t *testing.T) {
	for _, tc := range []struct {
		name  string
		point string
		at    []int64
	}{
		{"operator fails after checkpoints", "", nil},
		{"prepare fails", "sink/file/prepare", []int64{2, 6}},
		{"mid commit fails", "sink/file/mid-commit", []int64{1, 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const n = 20000
			out := t.TempDir()
			src, err := datagen.Events(datagen.Config{Count: n, Rate: 100000, Keys: 7})
			if err != nil {
				t.Fatal(err)
			}
			var plan *failPlan
			if tc.point == "" {
				plan = newFailPlan(0, 3000, 2000)
			} else {
				failOn(t, tc.point, tc.at...)
			}
			p := stream.New("parquet")
			evs := failing(stream.From[datagen.Event](p, "events", src, stream.Parallelism(2)), "fail", plan, stream.Parallelism(2))
			recs := stream.Map(evs, "to_parquet", func(e datagen.Event) pqEvent { return pqEvent{ID: e.ID, Key: e.Key, Value: e.Value} })
			sink, err := file.Parquet[pqEvent](out)
			if err != nil {
				t.Fatal(err)
			}
			stream.To(recs, "out", sink, stream.Parallelism(2))
			stats := runJob(t, newJob(t, p, memStorage(t), 10*time.Millisecond))
			got := readParquet[pqEvent](t, out)
			counts := map[int64]int{}
			for _, r := range got {
				counts[r.ID]++
				if r.Key != r.ID%7 || r.Value != r.ID%1000 {
					t.Fatalf("row %+v is not datagen's record %d", r, r.ID)
				}
			}
			checkIDs(t, counts, n)
			if stats.Restarts == 0 {
				t.Errorf("no restart: the test injected no failure")
			}
			t.Logf("%d rows in %d files, %d checkpoints, %d restarts", len(got), len(committedParquet(t, out)), stats.Completed, stats.Restarts)
		})
	}
}
