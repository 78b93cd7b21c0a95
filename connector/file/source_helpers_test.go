package file_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/connector/file"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/stream"
)

// rec is what the source tests decode lines into.
type rec struct {
	ID    int64  `json:"id"`
	Key   string `json:"key"`
	Value int64  `json:"value"`
	// Where is the line's location, path:line@offset, set by the decoder.
	Where string `json:"-"`
}

// recDecoder decodes JSON lines into rec with event time from "ts" (epoch
// ms), or CSV lines with columns id,key,value,ts.
func recDecoder(t testing.TB) file.Decoder[rec] {
	t.Helper()
	d, err := file.WithEventTime(func(l file.Line) (rec, error) {
		var r rec
		if l.Header != nil {
			id, _ := l.Field("id")
			key, _ := l.Field("key")
			val, _ := l.Field("value")
			if _, err := fmt.Sscan(id, &r.ID); err != nil {
				return r, fmt.Errorf("id %q: %w", id, err)
			}
			if _, err := fmt.Sscan(val, &r.Value); err != nil {
				return r, fmt.Errorf("value %q: %w", val, err)
			}
			r.Key = key
		} else if err := json.Unmarshal(l.JSON, &r); err != nil {
			return r, err
		}
		r.Where = fmt.Sprintf("%s:%d@%d", filepath.Base(l.Path), l.Number, l.Offset)
		return r, nil
	}, "ts", file.TimeEpochMillis)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// collector is a runtime.Output keeping the records emitted.
type collector[T any] struct {
	recs    []runtime.Record[T]
	batches int
}

func (c *collector[T]) Emit(r runtime.Records) error {
	c.recs = append(c.recs, r.(runtime.Batch[T])...)
	c.batches++
	return nil
}

// srcTask is one opened source subtask and what it emitted.
type srcTask[T any] struct {
	t   testing.TB
	src runtime.Source
	out *collector[T]
}

// openSource opens subtask sub of p of src, restored from inline when it
// is not nil.
func openSource[T any](t testing.TB, src *file.Source[T], sub, p int, inline []byte) *srcTask[T] {
	t.Helper()
	out := &collector[T]{}
	st := runtime.EraseSource(src.NewSubtask())
	ctx := &runtime.Context{Task: checkpoint.TaskID{Operator: "files", Subtask: sub}, Parallelism: p, MaxParallelism: 128, Output: out, JobID: "job"}
	if inline != nil {
		ctx.Restored = &checkpoint.SubtaskState{Task: ctx.Task, Inline: inline}
	}
	if err := st.Open(ctx); err != nil {
		t.Fatalf("Open subtask %d of %d: %v", sub, p, err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return &srcTask[T]{t: t, src: st, out: out}
}

// read calls Read once.
func (s *srcTask[T]) read() runtime.ReadResult {
	s.t.Helper()
	res, err := s.src.Read()
	if err != nil {
		s.t.Fatalf("Read: %v", err)
	}
	return res
}

// drain reads until Exhausted.
func (s *srcTask[T]) drain() runtime.ReadResult {
	s.t.Helper()
	for range 100000 {
		if res := s.read(); res.Exhausted {
			return res
		}
	}
	s.t.Fatal("the source never reported Exhausted")
	return runtime.ReadResult{}
}

// readUntilQuiet reads until a Read emits nothing.
func (s *srcTask[T]) readUntilQuiet() {
	s.t.Helper()
	for range 100000 {
		n := len(s.out.recs)
		s.read()
		if len(s.out.recs) == n {
			return
		}
	}
	s.t.Fatal("the source never ran out of records")
}

func (s *srcTask[T]) position() []byte {
	s.t.Helper()
	b, err := s.src.Position()
	if err != nil {
		s.t.Fatalf("Position: %v", err)
	}
	return b
}

func (s *srcTask[T]) values() []T {
	out := make([]T, len(s.out.recs))
	for i, r := range s.out.recs {
		out[i] = r.Value
	}
	return out
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func appendFile(t testing.TB, path, content string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(content); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func newSource[T any](t testing.TB, cfg file.SourceConfig, d file.Decoder[T]) *file.Source[T] {
	t.Helper()
	s, err := file.NewSource(cfg, d)
	if err != nil {
		t.Fatalf("NewSource(%+v): %v", cfg, err)
	}
	return s
}

// jsonLine is the JSON line of record id with event time ts (ms).
func jsonLine(id int64, key string, value, ts int64) string {
	return fmt.Sprintf(`{"id":%d,"key":%q,"value":%d,"ts":%d}`+"\n", id, key, value, ts)
}

// csvLine is the CSV line of the same record (columns id,key,value,ts).
func csvLine(id int64, key string, value, ts int64) string {
	return fmt.Sprintf("%d,%s,%d,%d\n", id, key, value, ts)
}

// tryOpen opens subtask 0 of 1 of src restored from inline; the error is
// Open's.
func tryOpen[T any](t testing.TB, src *file.Source[T], inline []byte) (*srcTask[T], error) {
	out := &collector[T]{}
	st := runtime.EraseSource(src.NewSubtask())
	ctx := &runtime.Context{Task: checkpoint.TaskID{Operator: "files"}, Parallelism: 1, MaxParallelism: 128, Output: out, JobID: "job"}
	if inline != nil {
		ctx.Restored = &checkpoint.SubtaskState{Task: ctx.Task, Inline: inline}
	}
	err := st.Open(ctx)
	t.Cleanup(func() { _ = st.Close() })
	return &srcTask[T]{t: t, src: st, out: out}, err
}

// logRecords is a slog.Handler keeping the records logged.
type logRecords struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (h *logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (h *logRecords) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recs = append(h.recs, r.Clone())
	return nil
}
func (h *logRecords) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logRecords) WithGroup(string) slog.Handler      { return h }

// find returns the first record at level whose message contains msg, with
// its attributes rendered key=value.
func (h *logRecords) find(level slog.Level, msg string) (string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.recs {
		if r.Level == level && strings.Contains(r.Message, msg) {
			s := r.Message
			r.Attrs(func(a slog.Attr) bool { s += " " + a.String(); return true })
			return s, true
		}
	}
	return "", false
}

// openLogged opens subtask 0 of 1 of src, restored from inline when not nil,
// logging to the returned handler.
func openLogged[T any](t testing.TB, src *file.Source[T], inline []byte) (*srcTask[T], *logRecords) {
	t.Helper()
	h := &logRecords{}
	out := &collector[T]{}
	st := runtime.EraseSource(src.NewSubtask())
	ctx := &runtime.Context{Task: checkpoint.TaskID{Operator: "files"}, Parallelism: 1, MaxParallelism: 128, Output: out, JobID: "job", Log: slog.New(h)}
	if inline != nil {
		ctx.Restored = &checkpoint.SubtaskState{Task: ctx.Task, Inline: inline}
	}
	if err := st.Open(ctx); err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return &srcTask[T]{t: t, src: st, out: out}, h
}

// openPolicy opens subtask 0 of 1 of src under the bad-record policy p,
// restored from inline when not nil.
func openPolicy[T any](t testing.TB, src *file.Source[T], p stream.BadRecordPolicy, inline []byte) *srcTask[T] {
	t.Helper()
	out := &collector[T]{}
	st := runtime.EraseSource(src.NewSubtask())
	runtime.Unerase(st).(stream.BadRecordReader).SetBadRecords(stream.BadRecordSetup{Policy: p})
	ctx := &runtime.Context{Task: checkpoint.TaskID{Operator: "files"}, Parallelism: 1, MaxParallelism: 128, Output: out, JobID: "job"}
	if inline != nil {
		ctx.Restored = &checkpoint.SubtaskState{Task: ctx.Task, Inline: inline}
	}
	if err := st.Open(ctx); err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return &srcTask[T]{t: t, src: st, out: out}
}
