package file

import (
	"fmt"
	"io"
	"time"

	"github.com/ingest-engine/ingest/runtime"
)

// format is how a sink encodes its staging files. The staging, prepare and
// commit protocol is the same for every format; only the bytes differ.
type format[T any] interface {
	// ext is the staging file name's extension, with its dot.
	ext() string
	// describe names the format for plans.
	describe() string
	// newEncoder returns the encoder of one sink subtask writing under dir.
	newEncoder(dir string) encoder[T]
}

// encoder writes the records of one staging file at a time. A sink subtask
// calls it from its own goroutine.
type encoder[T any] interface {
	// reset starts a new file written to w, dropping anything buffered for
	// a previous file that was never finished.
	reset(w io.Writer)
	// write encodes a batch. An error fails the sink subtask: a record is
	// never replaced or dropped.
	write(b runtime.Batch[T]) error
	// finish writes everything still buffered (a Parquet footer) to w; the
	// caller then flushes, fsyncs and closes the file.
	finish() error
}

// jsonLines is the JSON Lines format: one encoded record and '\n' per
// record.
type jsonLines[T any] struct{ encode Encoder[T] }

func (jsonLines[T]) ext() string      { return ".jsonl" }
func (jsonLines[T]) describe() string { return "JSON lines" }
func (f jsonLines[T]) newEncoder(dir string) encoder[T] {
	return &jsonLinesEncoder[T]{encode: f.encode, dir: dir}
}

type jsonLinesEncoder[T any] struct {
	encode Encoder[T]
	dir    string
	w      io.Writer
	buf    []byte
}

func (e *jsonLinesEncoder[T]) reset(w io.Writer) { e.w = w }

func (e *jsonLinesEncoder[T]) write(b runtime.Batch[T]) error {
	for _, rec := range b {
		var err error
		if e.buf, err = e.encode(e.buf[:0], rec.Value); err != nil {
			return fmt.Errorf("file sink %s: encoding record with event time %s: %w", e.dir, time.Unix(0, rec.Time).UTC().Format(time.RFC3339Nano), err)
		}
		e.buf = append(e.buf, '\n')
		if _, err := e.w.Write(e.buf); err != nil {
			return err
		}
	}
	return nil
}

func (e *jsonLinesEncoder[T]) finish() error { return nil }
