package config_test

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/config"
	"github.com/ingest-engine/ingest/connector/file"
	"github.com/ingest-engine/ingest/internal/testkit"
	"github.com/ingest-engine/ingest/row"
)

// writeCSV writes records (the header first) to dir/rel with encoding/csv,
// which quotes fields holding commas, quotes and line breaks.
func writeCSV(t *testing.T, dir, rel string, records [][]string) {
	t.Helper()
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	if err := w.WriteAll(records); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// writePipeline writes src as dir/p.yaml.
func writePipeline(t *testing.T, dir, src string) string {
	t.Helper()
	path := filepath.Join(dir, "p.yaml")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// CSV files → tumbling window → file sink, from YAML: three files matched by
// a glob, columns found by the header (the event time is not the first),
// types inferred from the first record, event times in RFC 3339 in some
// files and epoch milliseconds in another, records out of order by up to
// 30 ms with watermark.max_delay 50ms, quoted notes with commas, quotes and
// line breaks, stop_at: latest. The committed windows are exactly those the generated
// input implies: none missing (a late record would be), none twice.
func TestConfigCSVSourceWindow(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a pipeline")
	}
	dir := t.TempDir()
	const keys, perFile = 5, 1500
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	size := time.Second
	want := map[testkit.WindowKey]testkit.WindowAgg{}
	rng := rand.New(rand.NewPCG(1, 2))
	for f := range 3 {
		records := [][]string{{"id", "key", "value", "note", "ts"}}
		for i := range perFile {
			// 2 ms apart, up to 30 ms out of order: max_delay 50ms keeps
			// every record on time.
			at := base.Add(time.Duration(i*2+f)*time.Millisecond - time.Duration(rng.IntN(30))*time.Millisecond)
			key, value := rng.Int64N(keys), rng.Int64N(1000)-100
			ts := at.Format(time.RFC3339Nano)
			if f == 2 {
				ts = strconv.FormatInt(at.UnixMilli(), 10)
			}
			note := fmt.Sprintf("file %d, record %d", f, i)
			if i%7 == 0 {
				note += "\nsaid \"hi\", twice\r\nend"
			}
			records = append(records, []string{strconv.Itoa(f*perFile + i), strconv.FormatInt(key, 10), strconv.FormatInt(value, 10), note, ts})
			k := testkit.WindowKey{Key: key, Start: at.Truncate(size)}
			a := want[k]
			a.Count++
			a.Sum += value
			want[k] = a
		}
		writeCSV(t, dir, fmt.Sprintf("in/part-%d.csv", f), records)
	}
	writePipeline(t, dir, `pipeline: csv
checkpoint: {interval: 50ms, dir: ckpts}
restart: {delay: 10ms, max_attempts: 0}
sources:
  files:
    type: file
    format: csv
    path: in/part-*.csv
    event_time: {field: ts}
    watermark: {max_delay: 50ms}
    stop_at: latest
    parallelism: 2
transforms:
  w:
    type: window
    input: files
    key: key
    size: 1s
    parallelism: 2
    aggregates: {count: count(), sum: sum(value)}
sinks:
  out: {type: file, input: w, path: out}
`)
	runYAMLIn(t, dir)
	lines, err := testkit.ReadCommitted(filepath.Join(dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	if r := testkit.CheckWindows(lines, want, size); !r.OK() {
		t.Fatalf("committed windows: %v", r)
	}
}

// watermark.max_delay works on a CSV source as on JSON Lines: a record
// 58 ms behind the newest one before it, at the start of the source's second
// read batch (after which the source reports its watermark) and in the
// previous window, is on time with max_delay 100ms and lands in its window;
// with max_delay 0 that window has fired and the record goes to the late
// side output instead.
func TestConfigCSVWatermarkMaxDelay(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a pipeline")
	}
	const n, keys = 1500, 3
	straggler := file.DefaultBatchSize // the first record of the second batch
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	size := time.Second
	at := func(i int) time.Time {
		if i == straggler {
			return base.Add(time.Duration(2*(i-1)-56) * time.Millisecond)
		}
		return base.Add(time.Duration(2*i) * time.Millisecond)
	}
	if at(straggler).Truncate(size) == at(straggler-1).Truncate(size) {
		t.Fatalf("the straggler at %v is in the window of the record before it, %v", at(straggler), at(straggler-1))
	}
	records := [][]string{{"id", "key", "value", "ts"}}
	for i := range n {
		records = append(records, []string{strconv.Itoa(i), strconv.Itoa(i % keys), strconv.Itoa(i % 100), at(i).Format(time.RFC3339Nano)})
	}
	schema := &row.Schema{Fields: []row.Field{{Name: "id", Kind: row.Int}, {Name: "key", Kind: row.Int}, {Name: "value", Kind: row.Int}, {Name: "ts", Kind: row.Time}}}
	for _, tc := range []struct {
		maxDelay string
		late     bool
	}{{"100ms", false}, {"0s", true}} {
		t.Run("max_delay "+tc.maxDelay, func(t *testing.T) {
			dir := t.TempDir()
			writeCSV(t, dir, "in/a.csv", records)
			writePipeline(t, dir, `pipeline: csv
checkpoint: {interval: 50ms, dir: ckpts}
restart: {delay: 10ms, max_attempts: 0}
sources:
  files:
    type: file
    format: csv
    path: in/a.csv
    event_time: {field: ts}
    watermark: {max_delay: `+tc.maxDelay+`}
    stop_at: latest
transforms:
  w:
    type: window
    input: files
    key: key
    size: 1s
    late_records: late
    aggregates: {count: count(), sum: sum(value)}
sinks:
  out: {type: file, input: w, path: out}
  late: {type: file, input: w.late, path: late}
`)
			runYAMLIn(t, dir)
			want := map[testkit.WindowKey]testkit.WindowAgg{}
			var late []row.Row
			for i := range n {
				if i == straggler && tc.late {
					late = append(late, row.Row{row.IntValue(int64(i)), row.IntValue(int64(i % keys)), row.IntValue(int64(i % 100)), row.TimeValue(at(i).UnixNano())})
					continue
				}
				k := testkit.WindowKey{Key: int64(i % keys), Start: at(i).Truncate(size)}
				a := want[k]
				a.Count++
				a.Sum += int64(i % 100)
				want[k] = a
			}
			lines, err := testkit.ReadCommitted(filepath.Join(dir, "out"))
			if err != nil {
				t.Fatal(err)
			}
			if r := testkit.CheckWindows(lines, want, size); !r.OK() {
				t.Errorf("committed windows: %v", r)
			}
			sameLines(t, "late records", committedLines(t, dir, "late"), jsonLines(schema, late))
		})
	}
}

// A CSV record's quoted fields keep their commas, doubled quotes and line
// breaks (LF and CRLF), an empty value is null (the empty string in a
// string column), and the fields are found by name whatever the order of
// fields: — declared, or inferred from the first record as JSON's are
// (ints, floats, bools, strings; "007" stays a string; the event-time
// field a time).
func TestConfigCSVQuotedFieldsAndTypes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a pipeline")
	}
	header := []string{"id", "name", "score", "ok", "code", "ts"}
	type rec struct {
		id         int64
		name       string
		score      *float64
		ok         bool
		code       string
		at         time.Time
		epochMilli bool
	}
	f := func(v float64) *float64 { return &v }
	base := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	recs := []rec{
		{1, "plain", f(1.5), true, "007", base, false},
		{2, "with, a comma", f(-2.25), false, "12a", base.Add(time.Millisecond), true},
		{3, "a \"quoted\" word", nil, true, "x", base.Add(1500 * time.Microsecond), false},
		{4, "two\nlines, and \"more\"", f(3e10), false, "", base.Add(3 * time.Millisecond), true},
		{5, "crlf\r\ninside", f(0), true, "42", base.Add(4 * time.Millisecond), false},
		{6, "", f(7), false, "y", base.Add(5 * time.Millisecond), false},
		{7, "ünïcode ✓", f(1e-3), true, "z", base.Add(6*time.Millisecond + 250*time.Microsecond), true},
	}
	records := [][]string{header}
	for _, r := range recs {
		score := ""
		if r.score != nil {
			score = strconv.FormatFloat(*r.score, 'g', -1, 64)
		}
		ts := r.at.Format(time.RFC3339Nano)
		if r.epochMilli {
			ts = strconv.FormatFloat(float64(r.at.UnixMicro())/1000, 'f', -1, 64)
		}
		records = append(records, []string{strconv.FormatInt(r.id, 10), r.name, score, strconv.FormatBool(r.ok), r.code, ts})
	}
	// toRow renders a record as a row of schema, by field name.
	toRow := func(schema *row.Schema, r rec) row.Row {
		out := make(row.Row, len(schema.Fields))
		for i, fl := range schema.Fields {
			switch fl.Name {
			case "id":
				out[i] = row.IntValue(r.id)
			case "name":
				out[i] = row.StringValue(r.name)
			case "score":
				if r.score != nil {
					out[i] = row.FloatValue(*r.score)
				}
			case "ok":
				out[i] = row.BoolValue(r.ok)
			case "code":
				out[i] = row.StringValue(r.code)
			case "ts":
				out[i] = row.TimeValue(r.at.UnixNano())
			}
		}
		return out
	}
	for _, tc := range []struct {
		name, fields string
		schema       *row.Schema
	}{
		{"inferred", "", &row.Schema{Fields: []row.Field{{Name: "id", Kind: row.Int}, {Name: "name", Kind: row.String}, {Name: "score", Kind: row.Float}, {Name: "ok", Kind: row.Bool}, {Name: "code", Kind: row.String}, {Name: "ts", Kind: row.Time}}}},
		{"declared", "    fields: {ts: time, code: string, ok: bool, name: string, id: int, score: float}\n",
			&row.Schema{Fields: []row.Field{{Name: "ts", Kind: row.Time}, {Name: "code", Kind: row.String}, {Name: "ok", Kind: row.Bool}, {Name: "name", Kind: row.String}, {Name: "id", Kind: row.Int}, {Name: "score", Kind: row.Float}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeCSV(t, dir, "in/a.csv", records)
			writePipeline(t, dir, `pipeline: csv
checkpoint: {interval: 50ms, dir: ckpts}
restart: {delay: 10ms, max_attempts: 0}
sources:
  files:
    type: file
    format: csv
    path: in/*.csv
    event_time: {field: ts}
    stop_at: latest
`+tc.fields+`sinks:
  out: {type: file, input: files, path: out}
`)
			runYAMLIn(t, dir)
			var rows []row.Row
			for _, r := range recs {
				rows = append(rows, toRow(tc.schema, r))
			}
			sameLines(t, "committed rows", committedLines(t, dir, "out"), jsonLines(tc.schema, rows))
		})
	}
}

// A value that does not parse as its field's type fails the job with an
// error naming the file, the line the record starts on (counting the line
// breaks inside quotes before it) and the column.
func TestConfigCSVBadValue(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a pipeline")
	}
	for _, tc := range []struct {
		name, fields, value, ts, want string
	}{
		{"int", "", "x12", "2026-01-01T00:00:01Z", `column 3 "value": "x12" is not an int`},
		{"declared float", "    fields: {key: int, value: float, ts: time}\n", "1.5.2", "2026-01-01T00:00:01Z", `column 3 "value": "1.5.2" is not a finite float`},
		{"time", "", "7", "yesterday", `column 4 "ts": "yesterday" is not a time`},
		{"missing event time", "", "7", "", `column 4 "ts": event time field "ts" is missing or null`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeCSV(t, dir, "in/bad.csv", [][]string{
				{"key", "note", "value", "ts"},                         // line 1
				{"1", "spans\ntwo lines", "5", "2026-01-01T00:00:00Z"}, // lines 2-3
				{"2", "fine", "6", "2026-01-01T00:00:00.5Z"},           // line 4
				{"3", "bad", tc.value, tc.ts},                          // line 5
				{"4", "never read", "8", "2026-01-01T00:00:02Z"},       // line 6
			})
			path := writePipeline(t, dir, `pipeline: csv
checkpoint: {interval: 50ms, dir: ckpts}
restart: {delay: 10ms, max_attempts: 0}
sources:
  files:
    type: file
    format: csv
    path: in/*.csv
    event_time: {field: ts}
    stop_at: latest
`+tc.fields+`sinks:
  out: {type: file, input: files, path: out}
`)
			p, err := config.Load(path)
			if err != nil {
				t.Fatalf("Load:\n%v", err)
			}
			err = runToEnd(t, p)
			where := filepath.Join(dir, "in", "bad.csv") + ":5 "
			if err == nil || !strings.Contains(err.Error(), where) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run: %v\nwant an error naming %s and containing %s", err, where, tc.want)
			}
		})
	}
}

// fields: naming a column that a file's header lacks is a configuration
// error at the field's line, naming the file and its columns; so are a CSV
// source without event_time and an unknown format.
func TestConfigCSVConfigErrors(t *testing.T) {
	dir := t.TempDir()
	writeCSV(t, dir, "in/a.csv", [][]string{{"ts", "key", "value"}, {"2026-01-01T00:00:00Z", "1", "2"}})
	writeCSV(t, dir, "in/b.csv", [][]string{{"ts", "key", "amount"}, {"2026-01-01T00:00:00Z", "1", "2"}})
	src := func(extra string) string {
		return `pipeline: csv
sources:
  files:
    type: file
    format: csv
    path: in/*.csv
    stop_at: latest
` + extra + `sinks:
  out: {type: file, input: files, path: out}
`
	}
	lineOf := func(src, text string) int {
		before, _, ok := strings.Cut(src, text)
		if !ok {
			t.Fatalf("%q not in\n%s", text, src)
		}
		return strings.Count(before, "\n") + 1
	}
	type wantErr struct{ at, msg string } // at: the text on the error's line
	for _, tc := range []struct {
		name, yaml string
		want       []wantErr
	}{
		{"missing column", src("    event_time: {field: ts}\n    fields:\n      ts: time\n      key: int\n      amount: float\n      value: int\n"), []wantErr{
			{"      amount:", `sources.files.fields.amount: no column "amount" in the header of ` + filepath.Join("in", "a.csv") + ` (columns: ts, key, value)`},
			{"      value:", `sources.files.fields.value: no column "value" in the header of ` + filepath.Join("in", "b.csv") + ` (columns: ts, key, amount)`},
		}},
		{"no event time", src("    fields: {ts: time, key: int}\n"), []wantErr{
			{"    type: file", `sources.files.event_time: is required for this source: name the column with the event time, e.g. event_time: {field: ts}`},
		}},
		{"unknown format", strings.Replace(src("    event_time: {field: ts}\n"), "format: csv", "format: tsv", 1), []wantErr{
			{"    format: tsv", `sources.files.format: unknown format "tsv" (known: csv, jsonl)`},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writePipeline(t, dir, tc.yaml)
			_, err := config.Load(path)
			if err == nil {
				t.Fatal("Load succeeded")
			}
			errs := configErrors(err)
			if len(errs) != len(tc.want) {
				t.Fatalf("errors:\n%v\nwant %d", err, len(tc.want))
			}
			for i, w := range tc.want {
				want := fmt.Sprintf("%s:%d: %s", path, lineOf(tc.yaml, w.at), w.msg)
				if errs[i].Error() != want {
					t.Errorf("error %d:\n%v\nwant\n%s", i, errs[i], want)
				}
			}
		})
	}
}
