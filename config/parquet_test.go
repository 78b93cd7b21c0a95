package config_test

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"github.com/ingest-engine/ingest/config"
	"github.com/ingest-engine/ingest/internal/testkit"
)

// parquetWindow is a window result as the Parquet file sink writes it: one
// optional column per field, times as nanosecond timestamps.
type parquetWindow struct {
	Key         *string  `parquet:"key,optional"`
	WindowStart *int64   `parquet:"window_start,optional"`
	WindowEnd   *int64   `parquet:"window_end,optional"`
	Count       *int64   `parquet:"count,optional"`
	Sum         *int64   `parquet:"sum,optional"`
	Mean        *float64 `parquet:"mean,optional"`
	Last        *int64   `parquet:"last,optional"`
	Big         *bool    `parquet:"big,optional"`
}

// String renders w for comparisons and messages.
func (w parquetWindow) String() string {
	show := func(p any) string {
		switch v := p.(type) {
		case *string:
			if v != nil {
				return *v
			}
		case *int64:
			if v != nil {
				return fmt.Sprint(*v)
			}
		case *float64:
			if v != nil {
				return fmt.Sprint(*v)
			}
		case *bool:
			if v != nil {
				return fmt.Sprint(*v)
			}
		}
		return "null"
	}
	return strings.Join([]string{show(w.Key), show(w.WindowStart), show(w.WindowEnd), show(w.Count), show(w.Sum), show(w.Mean), show(w.Last), show(w.Big)}, " ")
}

// committedParquetFiles lists the committed .parquet files under dir.
func committedParquetFiles(t *testing.T, dir string) []string {
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
		if !d.IsDir() {
			if !strings.HasSuffix(path, ".parquet") {
				t.Errorf("committed file %s is not Parquet", rel)
			}
			out = append(out, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// JSON Lines files → tumbling window → map → Parquet file sink, from YAML:
// the committed Parquet files hold exactly the windows the generated input
// implies, each once, with the columns in the output's field order and the
// int, string, float, bool and time types; every column chunk is
// compressed with the configured codec and no row group exceeds
// row_group_rows.
func TestConfigParquetSinkWindow(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a pipeline")
	}
	dir := t.TempDir()
	const keys, perFile, rowGroupRows = 6, 2000, 4
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	size := time.Second
	type wkey struct {
		key   string
		start int64
	}
	type agg struct{ count, sum, last int64 }
	want := map[wkey]agg{}
	if err := os.MkdirAll(filepath.Join(dir, "in"), 0o755); err != nil {
		t.Fatal(err)
	}
	for f := range 2 {
		var b strings.Builder
		for i := range perFile {
			at := base.Add(time.Duration(i*2+f) * time.Millisecond)
			key := fmt.Sprintf("k%d", (i*7+f)%keys)
			value := int64(i%50) * int64(f+1)
			fmt.Fprintf(&b, `{"key":%q,"value":%d,"ts":%q}`+"\n", key, value, at.Format(time.RFC3339Nano))
			k := wkey{key, at.Truncate(size).UnixNano()}
			a := want[k]
			a.count++
			a.sum += value
			a.last = max(a.last, at.UnixNano())
			want[k] = a
		}
		if err := os.WriteFile(filepath.Join(dir, "in", fmt.Sprintf("part-%d.jsonl", f)), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A checkpoint interval longer than the run: the final checkpoint
	// commits every window in one file, so row groups must split it.
	writePipeline(t, dir, fmt.Sprintf(`pipeline: parquet
checkpoint: {interval: 10s, dir: ckpts}
restart: {delay: 10ms, max_attempts: 0}
sources:
  files:
    type: file
    path: in/*.jsonl
    event_time: {field: ts}
    stop_at: latest
    parallelism: 2
transforms:
  w:
    type: window
    input: files
    key: key
    size: 1s
    parallelism: 2
    aggregates: {count: count(), sum: sum(value), mean: avg(value), last: max(ts)}
  tagged:
    type: map
    input: w
    keep_input: true
    select: {big: sum > 5000}
sinks:
  out:
    type: file
    input: tagged
    path: out
    format: parquet
    compression: zstd
    row_group_rows: %d
`, rowGroupRows))
	runYAMLIn(t, dir)

	files := committedParquetFiles(t, filepath.Join(dir, "out"))
	if len(files) == 0 {
		t.Fatal("no committed Parquet file")
	}
	var got []parquetWindow
	maxRows := 0
	for _, path := range files {
		rows, err := parquet.ReadFile[parquetWindow](path)
		if err != nil {
			t.Fatalf("reading %s: %v", path, err)
		}
		got = append(got, rows...)
		maxRows = max(maxRows, len(rows))

		pf := testkit.OpenParquet(t, path)
		var cols []string
		for _, fl := range pf.Schema().Fields() {
			cols = append(cols, fl.Name())
		}
		if wantCols := []string{"key", "window_start", "window_end", "count", "sum", "mean", "last", "big"}; !slices.Equal(cols, wantCols) {
			t.Errorf("%s: columns %v, want %v", path, cols, wantCols)
		}
		var inGroups int64
		for g, rg := range pf.Metadata().RowGroups {
			inGroups += rg.NumRows
			if rg.NumRows > rowGroupRows {
				t.Errorf("%s: row group %d has %d rows, more than row_group_rows %d", path, g, rg.NumRows, rowGroupRows)
			}
			for _, c := range rg.Columns {
				if c.MetaData.Codec != format.Zstd {
					t.Errorf("%s: row group %d column %v is compressed with %v, want ZSTD", path, g, c.MetaData.PathInSchema, c.MetaData.Codec)
				}
			}
		}
		if inGroups != int64(len(rows)) {
			t.Errorf("%s: row groups hold %d rows, the file %d", path, inGroups, len(rows))
		}
	}
	if maxRows <= rowGroupRows {
		t.Fatalf("no committed file has more than %d rows (largest %d): row_group_rows went untested", rowGroupRows, maxRows)
	}

	var wantRows []string
	for k, a := range want {
		key, start, end := k.key, k.start, k.start+int64(size)
		mean, big := float64(a.sum)/float64(a.count), a.sum > 5000
		count, sum, last := a.count, a.sum, a.last
		wantRows = append(wantRows, parquetWindow{&key, &start, &end, &count, &sum, &mean, &last, &big}.String())
	}
	var gotRows []string
	for _, w := range got {
		gotRows = append(gotRows, w.String())
	}
	slices.Sort(wantRows)
	slices.Sort(gotRows)
	sameLines(t, "committed Parquet rows", gotRows, wantRows)
}

// The file sink's format options are checked when the file is loaded: an
// unknown compression, Parquet options on a JSON Lines sink, a row group
// size that is not positive and an unknown format are errors at their
// lines.
func TestConfigParquetSinkErrors(t *testing.T) {
	const src = `pipeline: p
sources:
  events: {type: datagen, count: 10}
sinks:
  out:
    type: file
    input: events
    path: out
`
	for _, tc := range []struct {
		name, extra string
		want        []string
	}{
		{"compression", "    format: parquet\n    compression: lzo\n", []string{
			`p.yaml:10: sinks.out.compression: parquet compression "lzo": want one of snappy, zstd, gzip, none`}},
		{"compression on jsonl", "    compression: zstd\n", []string{
			`p.yaml:9: sinks.out.compression: applies to format: parquet only (this sink writes jsonl)`}},
		{"row_group_rows on jsonl", "    format: jsonl\n    row_group_rows: 10\n", []string{
			`p.yaml:10: sinks.out.row_group_rows: applies to format: parquet only (this sink writes jsonl)`}},
		{"row_group_rows", "    format: parquet\n    row_group_rows: 0\n", []string{
			`p.yaml:10: sinks.out.row_group_rows: must be positive`}},
		{"row_group_rows not a number", "    format: parquet\n    row_group_rows: many\n", []string{
			`p.yaml:10: sinks.out.row_group_rows: "many" is not a whole number`}},
		{"format", "    format: csv\n", []string{
			`p.yaml:9: sinks.out.format: unknown format "csv" (known: jsonl, parquet)`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := parseErrs(t, src+tc.extra)
			if !slices.Equal(got, tc.want) {
				t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
	// The valid options load.
	for _, c := range []string{"snappy", "zstd", "gzip", "none"} {
		if _, err := config.Parse("p.yaml", []byte(src+"    format: parquet\n    compression: "+c+"\n    row_group_rows: 1000\n")); err != nil {
			t.Errorf("compression %s: %v", c, err)
		}
	}
}
