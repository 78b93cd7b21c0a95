package file

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/stream"
)

// lines is an Output keeping the lines emitted.
type lines struct{ got []string }

func (l *lines) Emit(r runtime.Records) error {
	for _, rec := range r.(runtime.Batch[string]) {
		l.got = append(l.got, rec.Value)
	}
	return nil
}

// openSkipping opens a reader of the JSON Lines files cfg selects under the
// skip policy with the given limit, restored from inline when not nil.
func openSkipping(t *testing.T, cfg SourceConfig, limit int, inline []byte) (*reader[string], *lines) {
	t.Helper()
	src, err := NewSource(cfg, func(l Line) (string, int64, error) { return string(l.JSON), 0, nil })
	if err != nil {
		t.Fatal(err)
	}
	r := src.NewSubtask().(*reader[string])
	r.SetBadRecords(stream.BadRecordSetup{Policy: stream.BadRecordPolicy{OnError: stream.OnErrorSkip, MaxRecordBytes: limit}})
	out := &lines{}
	ctx := &runtime.Context{Task: checkpoint.TaskID{Operator: "files"}, Parallelism: 1, MaxParallelism: 128, Output: out}
	if inline != nil {
		ctx.Restored = &checkpoint.SubtaskState{Task: ctx.Task, Inline: inline}
	}
	if err := r.Open(ctx, runtime.EmitTo[string](ctx.Output)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r, out
}

// readAll calls Read until it reports Exhausted (bounded) or, following,
// emits nothing with no file left to read, and returns the largest read
// buffer a file had after a Read.
func readAll(t *testing.T, r *reader[string], out *lines) (maxBuf int) {
	t.Helper()
	for range 10000 {
		n := len(out.got)
		res, err := r.Read()
		if err != nil {
			t.Fatal(err)
		}
		pending := false
		for _, s := range r.splits {
			maxBuf = max(maxBuf, cap(s.buf))
			pending = pending || s.pending
		}
		if res.Exhausted || (r.cfg.StopAt == StopNever && len(out.got) == n && !pending) {
			return maxBuf
		}
	}
	t.Fatal("the source never finished")
	return 0
}

// A line far longer than max_record_bytes is discarded as it is read, never
// buffered whole: the buffer stays near the limit while a 24 MiB line goes
// by, and the lines around it are read.
func TestOversizedLineIsNotBuffered(t *testing.T) {
	dir := t.TempDir()
	huge := `{"big":"` + strings.Repeat("x", 24<<20) + `"}`
	content := `{"a":1}` + "\n" + huge + "\n" + `{"b":2}` + "\n"
	if err := os.WriteFile(filepath.Join(dir, "a.jsonl"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	r, out := openSkipping(t, SourceConfig{Path: filepath.Join(dir, "*.jsonl"), StopAt: StopAtLatest}, 64<<10, nil)
	maxBuf := readAll(t, r, out)
	if strings.Join(out.got, " ") != `{"a":1} {"b":2}` {
		t.Fatalf("read %q", out.got)
	}
	if got := r.bad.Tally(); got.Skipped != 1 {
		t.Fatalf("tally %+v, want 1 skipped", got)
	}
	if maxBuf > 64<<10+4*readChunk {
		t.Fatalf("a read buffer grew to %d bytes for a limit of %d", maxBuf, 64<<10)
	}
}

// A following source that meets the start of an oversized line skips it as
// it is written: its position stays at the line's start until the line
// ends (a checkpoint meanwhile resumes there and skips the line again,
// once), then moves past it. The skip count is in the position.
func TestOversizedLineWhileFollowing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.jsonl")
	first := `{"a":1}` + "\n"
	if err := os.WriteFile(path, []byte(first+`{"big":"`+strings.Repeat("y", 3<<20)), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := SourceConfig{Path: filepath.Join(dir, "*.jsonl"), PollInterval: time.Millisecond}
	r, out := openSkipping(t, cfg, 4096, nil)
	readAll(t, r, out)
	mid, err := r.Position()
	if err != nil {
		t.Fatal(err)
	}
	var pos position
	if err := json.Unmarshal(mid, &pos); err != nil {
		t.Fatal(err)
	}
	if len(out.got) != 1 || len(pos.Files) != 1 || pos.Files[0].Offset != int64(len(first)) || pos.Bad != nil {
		t.Fatalf("mid-line: read %q, position %s; want the first line and the position at byte %d", out.got, mid, len(first))
	}
	if s := r.splits[0]; s.skip == nil || cap(s.buf) > 4096+4*readChunk {
		t.Fatalf("mid-line: skipping %v, buffer %d bytes", s.skip != nil, cap(s.buf))
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(strings.Repeat("y", 1<<20) + `"}` + "\n" + `{"b":2}` + "\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	time.Sleep(5 * time.Millisecond)
	readAll(t, r, out)
	if strings.Join(out.got, " ") != `{"a":1} {"b":2}` || r.bad.Tally().Skipped != 1 {
		t.Fatalf("read %q, tally %+v; want both lines and 1 skipped", out.got, r.bad.Tally())
	}
	end, _ := r.Position()
	size, _ := os.Stat(path)
	if !strings.Contains(string(end), `"offset":`+itoa(size.Size())) || !strings.Contains(string(end), `"bad":{"skipped":1}`) {
		t.Fatalf("position after the line %s: want offset %d and the skip counted", end, size.Size())
	}

	// Restored from the position inside the line: the line is skipped
	// once more (its skip was not in that checkpoint), and nothing else.
	r2, out2 := openSkipping(t, cfg, 4096, mid)
	readAll(t, r2, out2)
	if strings.Join(out2.got, " ") != `{"b":2}` || r2.bad.Tally().Skipped != 1 {
		t.Fatalf("restored mid-line: read %q, tally %+v; want the last line and 1 skipped", out2.got, r2.bad.Tally())
	}
	// Restored from after it: the count resumes, nothing is read again.
	r3, out3 := openSkipping(t, cfg, 4096, end)
	readAll(t, r3, out3)
	if len(out3.got) != 0 || r3.bad.Tally().Skipped != 1 {
		t.Fatalf("restored at the end: read %q, tally %+v; want nothing and the restored count 1", out3.got, r3.bad.Tally())
	}
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

// Without a limit of its own the policy uses MaxLineBytes, and errors name
// it; the policy's limit replaces it.
func TestBadRecordLimitDefaultsToMaxLineBytes(t *testing.T) {
	dir := t.TempDir()
	content := `{"a":1}` + "\n" + `{"long":"` + strings.Repeat("z", 100) + `"}` + "\n"
	if err := os.WriteFile(filepath.Join(dir, "a.jsonl"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := SourceConfig{Path: filepath.Join(dir, "*.jsonl"), StopAt: StopAtLatest, MaxLineBytes: 64}
	for _, tc := range []struct {
		policy, limit, skipped int
		name                   string
	}{{0, 64, 1, "max_line_bytes"}, {1000, 1000, 0, "max_record_bytes"}} {
		r, out := openSkipping(t, cfg, tc.policy, nil)
		readAll(t, r, out)
		if got := r.bad.Tally().Skipped; got != int64(tc.skipped) || r.maxLine != tc.limit || r.limitName != tc.name || r.bad.MaxRecordBytes() != tc.limit {
			t.Errorf("policy limit %d: %d skipped, limit %d named %s; want %d skipped, limit %d named %s", tc.policy, got, r.maxLine, r.limitName, tc.skipped, tc.limit, tc.name)
		}
	}
}
