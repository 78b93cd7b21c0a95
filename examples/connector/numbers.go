// Package connector is the worked example of docs/connectors.md: a small
// replayable source (Numbers) and a small transactional sink (Dir), written
// against the connector SPI alone. Its tests run them under failures and
// check the output is exact, and that the page quotes this code verbatim.
package connector

import (
	"fmt"
	"strconv"

	"github.com/ingest-engine/ingest/connector"
	"github.com/ingest-engine/ingest/runtime"
)

// Numbers is a bounded source of the integers 0 … count-1, number i at
// event time i ms. Subtask s of P emits the numbers i with i % P == s, in
// order; its replay position is the next number it would emit.
type Numbers struct{ count int64 }

// NewNumbers returns a source of count numbers.
func NewNumbers(count int64) (*Numbers, error) {
	if count <= 0 {
		return nil, fmt.Errorf("numbers: count %d, want at least 1", count)
	}
	return &Numbers{count: count}, nil
}

// Descriptor: the source re-reads exactly from a position, so it is
// replayable, and has no limit on its parallelism. Its positions are not
// rescalable: a position means "the next number of residue s modulo P",
// which says nothing at another P.
func (n *Numbers) Descriptor() connector.Descriptor {
	return connector.Descriptor{Type: "numbers", Capabilities: runtime.Capabilities{Replayable: true}}
}

// Describe is the one line plans show.
func (n *Numbers) Describe() string { return fmt.Sprintf("numbers 0…%d", n.count-1) }

// NewSubtask makes a subtask; it does no I/O (Open does).
func (n *Numbers) NewSubtask() runtime.SourceSubtask[int64] { return &numbersSubtask{count: n.count} }

// numbersSubtask is one subtask of Numbers.
type numbersSubtask struct {
	count int64
	out   runtime.Emitter[int64]
	// next is the next number to emit; step is the parallelism.
	// INVARIANT: next % step is the subtask's index.
	next, step int64
}

// Open starts at the subtask's first number, or at the restored position.
func (t *numbersSubtask) Open(ctx *runtime.Context, out runtime.Emitter[int64]) error {
	t.out = out
	t.next, t.step = int64(ctx.Task.Subtask), int64(ctx.Parallelism)
	if ctx.Restored != nil && len(ctx.Restored.Inline) > 0 {
		next, err := strconv.ParseInt(string(ctx.Restored.Inline), 10, 64)
		if err != nil || next%t.step != int64(ctx.Task.Subtask) {
			return fmt.Errorf("numbers: subtask %d of %d cannot resume at position %q", ctx.Task.Subtask, ctx.Parallelism, ctx.Restored.Inline)
		}
		t.next = next
	}
	return nil
}

// Read emits up to 100 numbers and says how far event time has come.
func (t *numbersSubtask) Read() (runtime.ReadResult, error) {
	batch := make(runtime.Batch[int64], 0, 100)
	for ; t.next < t.count && len(batch) < cap(batch); t.next += t.step {
		batch = append(batch, runtime.Record[int64]{Value: t.next, Time: t.next * 1e6})
	}
	if len(batch) > 0 {
		if err := t.out.Emit(batch); err != nil {
			return runtime.ReadResult{}, err
		}
	}
	// Every number this subtask emits from now on is next or more, so its
	// time is later than the last one's: the watermark is that time.
	wm := runtime.MinWatermark
	if t.next >= t.step {
		wm = (t.next - t.step) * 1e6
	}
	return runtime.ReadResult{Watermark: wm, Exhausted: t.next >= t.count}, nil
}

// Position is the next number, stored with each checkpoint.
func (t *numbersSubtask) Position() ([]byte, error) {
	return strconv.AppendInt(nil, t.next, 10), nil
}

// Close has nothing to release.
func (t *numbersSubtask) Close() error { return nil }
