package stdout_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/connector/stdout"
	"github.com/ingest-engine/ingest/runtime"
)

type event struct {
	ID   int64  `json:"id"`
	Name string `json:"name"`
}

func jsonEncoder(dst []byte, v event) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return append(dst, b...)
}

func open(t *testing.T, s *stdout.Sink[event], subtask int) runtime.SinkSubtask[event] {
	t.Helper()
	p := s.NewSubtask()
	if err := p.Open(&runtime.Context{Task: checkpoint.TaskID{Operator: "log", Subtask: subtask}, Parallelism: 2}); err != nil {
		t.Fatal(err)
	}
	return p
}

func batch(vs ...event) runtime.Batch[event] {
	b := make(runtime.Batch[event], len(vs))
	for i, v := range vs {
		b[i] = runtime.Record[event]{Value: v, Time: int64(i)}
	}
	return b
}

func TestPrintsJSONLinesAtOnce(t *testing.T) {
	var buf bytes.Buffer
	s := stdout.NewWriter(&buf, jsonEncoder)
	p := open(t, s, 0)
	if err := p.Write(batch(event{1, "a"}, event{2, "b \"quoted\"\nnewline"})); err != nil {
		t.Fatal(err)
	}
	// Printed at once: no barrier, no commit needed.
	want := `{"id":1,"name":"a"}` + "\n" + `{"id":2,"name":"b \"quoted\"\nnewline"}` + "\n"
	if buf.String() != want {
		t.Fatalf("printed %q, want %q", buf.String(), want)
	}
	if err := p.Write(batch(event{3, "c"})); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("lines %q, want 3", lines)
	}
	for _, l := range lines {
		var e event
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("line %q is not JSON: %v", l, err)
		}
	}
	snap, err := p.Snapshot(1)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Committables) != 0 || len(snap.Inline) != 0 {
		t.Fatalf("stdout sink snapshot %+v, want empty (nothing staged)", snap)
	}
	if err := p.NotifyComplete(1); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestDeclaresAtLeastOnceWithoutCommitter(t *testing.T) {
	s := stdout.NewWriter(&bytes.Buffer{}, jsonEncoder)
	if g := s.Descriptor().Capabilities.SinkGuarantee(); g != runtime.AtLeastOnce {
		t.Errorf("Guarantee = %v, want at-least-once", g)
	}
	if c := s.Committer(); c != nil {
		t.Errorf("Committer = %#v, want nil (nothing is staged)", c)
	}
	if s.Descriptor().Type != "stdout" {
		t.Errorf("Type = %q, want stdout", s.Descriptor().Type)
	}
	if s2 := stdout.New(jsonEncoder); s2.Descriptor().Capabilities.SinkGuarantee() != runtime.AtLeastOnce || s2.Committer() != nil {
		t.Error("New: want at-least-once and no committer")
	}
}

// Subtasks share the writer; their lines never interleave.
func TestConcurrentSubtasksWriteWholeLines(t *testing.T) {
	var buf bytes.Buffer
	s := stdout.NewWriter(&buf, jsonEncoder)
	const subtasks, batches, per = 4, 50, 20
	var wg sync.WaitGroup
	errs := make(chan error, subtasks)
	for i := range subtasks {
		p := open(t, s, i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range batches {
				vs := make([]event, per)
				for k := range vs {
					vs[k] = event{ID: int64(i*1_000_000 + b*per + k), Name: strings.Repeat("x", 100)}
				}
				if err := p.Write(batch(vs...)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var ids []int64
	sc := bufio.NewScanner(&buf)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("line %q is not JSON: %v", sc.Text(), err)
		}
		ids = append(ids, e.ID)
	}
	if len(ids) != subtasks*batches*per {
		t.Fatalf("%d lines, want %d", len(ids), subtasks*batches*per)
	}
	slices.Sort(ids)
	if len(slices.Compact(ids)) != subtasks*batches*per {
		t.Fatal("duplicate lines")
	}
}

// A bufio.Writer is flushed after every batch, so output appears at once.
func TestFlushesBufferedWriter(t *testing.T) {
	var buf bytes.Buffer
	w := bufio.NewWriterSize(&buf, 1<<16)
	p := open(t, stdout.NewWriter(w, jsonEncoder), 0)
	if err := p.Write(batch(event{7, "z"})); err != nil {
		t.Fatal(err)
	}
	if buf.String() != `{"id":7,"name":"z"}`+"\n" {
		t.Fatalf("underlying writer holds %q after a batch", buf.String())
	}
}

type failing struct{}

func (failing) Write([]byte) (int, error) { return 0, errors.New("disk on fire") }

func TestWriteErrorFailsBatch(t *testing.T) {
	p := open(t, stdout.NewWriter(failing{}, jsonEncoder), 0)
	err := p.Write(batch(event{1, "a"}))
	if err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Fatalf("Write to a failing writer: %v", err)
	}
}
