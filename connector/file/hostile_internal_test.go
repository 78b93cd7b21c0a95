package file

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/watermark"
)

// Hostile cases of the file source. Each names the sentence of
// checkpointing.txt it defends and the issue item.

// timedLines keeps what a reader emits: line numbers n with event time n ms.
type timedLines struct{ recs []runtime.Record[int64] }

func (c *timedLines) Emit(r runtime.Records) error {
	b, ok := r.(runtime.Batch[int64])
	if !ok {
		return errors.New("unexpected batch type")
	}
	c.recs = append(c.recs, b...)
	return nil
}

// A 3s stall of the engine with idle_timeout 2s, while three followed files
// grow: the first read after it reads one file only, and the files it did
// not read yet must not count as idle, or their lines of the stall come in
// behind the watermark and are dropped as late. A file that stays at its end
// while the others grow does become idle, and all do once drained.
// Processing time is the test's clock.
//
// checkpointing.txt: "A restart must not lose accepted data" — nor may a
// run without any failure; #12 item 4c.
func TestStallDoesNotMakeFilesIdle(t *testing.T) {
	dir := t.TempDir()
	names := []string{"a.jsonl", "b.jsonl", "c.jsonl"}
	// write appends lines from..to-1, line n to file n % files of a, b, c:
	// {"n":n}, event time n ms.
	write := func(from, to int64, files int64) {
		t.Helper()
		for n := from; n < to; n++ {
			f, err := os.OpenFile(filepath.Join(dir, names[n%files]), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := fmt.Fprintf(f, "{\"n\":%d}\n", n); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(0, 30, 3)
	cfg := SourceConfig{Path: filepath.Join(dir, "*.jsonl"), BatchSize: 5, PollInterval: 100 * time.Millisecond,
		Watermark: watermark.Strategy{IdleTimeout: 2 * time.Second}}
	src, err := NewSource(cfg, func(l Line) (int64, int64, error) {
		var n int64
		_, err := fmt.Sscanf(string(l.JSON), `{"n":%d}`, &n)
		return n, n * int64(time.Millisecond), err
	})
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Now()
	r := src.NewSubtask().(*reader[int64])
	r.clock = func() time.Time { return clock }
	out := &timedLines{}
	if err := r.Open(&runtime.Context{Task: checkpoint.TaskID{Operator: "files"}, Parallelism: 1, MaxParallelism: 128}, runtime.EmitTo[int64](out)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })

	wm := runtime.MinWatermark
	var last runtime.ReadResult
	late := 0
	readUntil := func(what string, cond func() bool) {
		t.Helper()
		for range 100000 {
			if cond() {
				return
			}
			clock = clock.Add(10 * time.Millisecond)
			from := len(out.recs)
			res, err := r.Read()
			if err != nil {
				t.Fatal(err)
			}
			for _, rec := range out.recs[from:] {
				if rec.Time <= wm {
					late++
					if late == 1 {
						t.Errorf("line %d (event time %v) is late: an earlier read reported watermark %v", rec.Value, time.Duration(rec.Time), time.Duration(wm))
					}
				}
			}
			wm, last = res.Watermark, res
		}
		t.Fatalf("%s: not reached after 100000 reads (%d lines read, watermark %v idle %v)", what, len(out.recs), time.Duration(wm), last.Idle)
	}
	readUntil("reading the first lines", func() bool { return len(out.recs) == 30 })
	// The files grow; the engine stalls for 3s before it reads again.
	write(30, 90, 3)
	clock = clock.Add(3 * time.Second)
	readUntil("reading after the stall", func() bool { return len(out.recs) == 90 })
	if late > 0 {
		t.Fatalf("%d of 60 lines written during a 3s stall were late (idle_timeout 2s)", late)
	}
	// c.jsonl stays at its end while a and b grow: after the timeout and a
	// poll that finds it unchanged, it no longer holds the watermark.
	cMax := int64(89) * int64(time.Millisecond)
	next := int64(90)
	readUntil("c.jsonl idle while a and b grow", func() bool {
		if last.Watermark > cMax && !last.Idle {
			return true
		}
		if int64(len(out.recs)) == next {
			write(next, next+2, 2)
			next += 2
		}
		return false
	})
	// Everything drained: after the timeout the subtask is idle.
	readUntil("every file idle", func() bool { return last.Idle })
	if want := (next-1)*int64(time.Millisecond) - 1; last.Watermark != want {
		t.Fatalf("idle watermark %v, want the newest line's %v", time.Duration(last.Watermark), time.Duration(want))
	}
	if late > 0 {
		t.Fatalf("%d lines late", late)
	}
	if int64(len(out.recs)) != next {
		t.Fatalf("%d lines read, want %d", len(out.recs), next)
	}
}
