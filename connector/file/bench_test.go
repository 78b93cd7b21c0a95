package file_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/connector/file"
	"github.com/ingest-engine/ingest/row"
	"github.com/ingest-engine/ingest/runtime"
)

// Throughput of the file connector, one subtask on one core:
//
//	go test ./connector/file -run '^$' -bench . -benchtime 2s
//
// The source benchmarks read 4 files of 50 000 lines (from the page cache)
// to their ends with stop_at latest; "lines/s" counts records emitted. The
// sink benchmarks write batches of 1024 records and prepare (finish, flush,
// fsync, close) a file every 100 000; "rows/s" counts records written.

const benchLines = 50000

// benchInput writes 4 files of benchLines records each and returns the glob.
func benchInput(b *testing.B, format file.Format) string {
	b.Helper()
	dir := b.TempDir()
	ext := ".jsonl"
	if format == file.FormatCSV {
		ext = ".csv"
	}
	for f := range 4 {
		var sb strings.Builder
		if format == file.FormatCSV {
			sb.WriteString("id,key,value,ts\n")
		}
		for i := range benchLines {
			id := int64(f*benchLines + i)
			if format == file.FormatCSV {
				sb.WriteString(csvLine(id, fmt.Sprintf("key-%d", id%100), id%1000, baseMs+id))
			} else {
				sb.WriteString(jsonLine(id, fmt.Sprintf("key-%d", id%100), id%1000, baseMs+id))
			}
		}
		writeFile(b, filepath.Join(dir, fmt.Sprintf("f%d%s", f, ext)), sb.String())
	}
	return filepath.Join(dir, "*"+ext)
}

func benchSource[T any](b *testing.B, cfg file.SourceConfig, d file.Decoder[T]) {
	src := newSource(b, cfg, d)
	total := 0
	for b.Loop() {
		out := &discardOut{}
		st := runtime.EraseSource(src.NewSubtask())
		if err := st.Open(&runtime.Context{Task: checkpoint.TaskID{Operator: "files"}, Parallelism: 1, MaxParallelism: 128, Output: out}); err != nil {
			b.Fatal(err)
		}
		for {
			res, err := st.Read()
			if err != nil {
				b.Fatal(err)
			}
			if res.Exhausted {
				break
			}
		}
		_ = st.Close()
		if out.n != 4*benchLines {
			b.Fatalf("read %d records, want %d", out.n, 4*benchLines)
		}
		total += out.n
	}
	b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "lines/s")
}

// discardOut counts records.
type discardOut struct{ n int }

func (d *discardOut) Emit(r runtime.Records) error { d.n += r.Len(); return nil }

// benchEvent is what the JSON benchmark decodes into.
type benchEvent struct {
	ID    int64  `json:"id"`
	Key   string `json:"key"`
	Value int64  `json:"value"`
}

// BenchmarkSourceJSONLines reads JSON lines: "raw" with a decoder that only
// takes the event time from the line (the source's own cost: reading,
// splitting, locating), "decoded" with DecodeJSON into a struct.
func BenchmarkSourceJSONLines(b *testing.B) {
	glob := benchInput(b, file.FormatJSONLines)
	cfg := file.SourceConfig{Path: glob, StopAt: file.StopAtLatest}
	b.Run("raw", func(b *testing.B) {
		d, err := file.WithEventTime(func(l file.Line) (int, error) { return len(l.JSON), nil }, "ts", file.TimeEpochMillis)
		if err != nil {
			b.Fatal(err)
		}
		benchSource(b, cfg, d)
	})
	b.Run("decoded", func(b *testing.B) {
		d, err := file.DecodeJSON[benchEvent]("ts", file.TimeEpochMillis)
		if err != nil {
			b.Fatal(err)
		}
		benchSource(b, cfg, d)
	})
}

// BenchmarkSourceCSV reads CSV with a decoder that builds a struct from
// three fields and the event time from the fourth.
func BenchmarkSourceCSV(b *testing.B) {
	glob := benchInput(b, file.FormatCSV)
	d, err := file.WithEventTime(func(l file.Line) (benchEvent, error) {
		return benchEvent{Key: l.Fields[1]}, nil
	}, "ts", file.TimeEpochMillis)
	if err != nil {
		b.Fatal(err)
	}
	benchSource(b, file.SourceConfig{Path: glob, Format: file.FormatCSV, StopAt: file.StopAtLatest}, d)
}

// benchSink writes batches of 1024 records from mk through one writer
// subtask of s, preparing a file every 100 000 records.
func benchSink[T any](b *testing.B, s interface{ NewSubtask() runtime.SinkSubtask[T] }, mk func(i int) T) {
	w := s.NewSubtask()
	if err := w.Open(&runtime.Context{Task: checkpoint.TaskID{Operator: "out"}, Parallelism: 1, JobID: "bench"}); err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	batch := make(runtime.Batch[T], 1024)
	for i := range batch {
		batch[i] = runtime.Record[T]{Value: mk(i), Time: int64(i)}
	}
	rows, id := 0, int64(0)
	for b.Loop() {
		if err := w.Write(batch); err != nil {
			b.Fatal(err)
		}
		rows += len(batch)
		if rows%(100*1024) == 0 {
			id++
			if _, err := w.Snapshot(id); err != nil {
				b.Fatal(err)
			}
			if err := w.NotifyComplete(id); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkSink compares the formats on a 5-column record: Parquet from a
// struct (snappy, zstd), Parquet from dynamic rows, and JSON Lines.
func BenchmarkSink(b *testing.B) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	mk := func(i int) pqRec {
		return pqRec{ID: int64(i), Key: fmt.Sprintf("key-%d", i%100), Score: float64(i) / 3, At: at.Add(time.Duration(i) * time.Millisecond)}
	}
	for _, c := range []file.Compression{file.Snappy, file.Zstd} {
		b.Run("parquet-struct-"+c.String(), func(b *testing.B) {
			s, err := file.Parquet[pqRec](b.TempDir(), file.WithCompression(c))
			if err != nil {
				b.Fatal(err)
			}
			benchSink(b, s, mk)
		})
	}
	b.Run("parquet-rows-snappy", func(b *testing.B) {
		s, err := file.ParquetRows(b.TempDir(), []row.Field{{Name: "id", Kind: row.Int}, {Name: "key", Kind: row.String}, {Name: "score", Kind: row.Float}, {Name: "at", Kind: row.Time}, {Name: "note", Kind: row.String}})
		if err != nil {
			b.Fatal(err)
		}
		benchSink(b, s, func(i int) row.Row {
			r := mk(i)
			return row.Row{row.IntValue(r.ID), row.StringValue(r.Key), row.FloatValue(r.Score), row.TimeValue(r.At.UnixNano()), {}}
		})
	})
	b.Run("jsonl", func(b *testing.B) {
		benchSink(b, file.JSONLines[pqRec](b.TempDir()), mk)
	})
}
