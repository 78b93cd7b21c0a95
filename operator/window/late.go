package window

import (
	"github.com/ingest-engine/ingest/runtime"
)

// lateRecords applies the late-record policy of one operator subtask: send
// to the side output when one is configured and consumed, else drop; count
// either way. A drop is reported to the runtime (Context.DroppedLate), which
// counts it for ingest_late_records_total and warns about it.
type lateRecords[T any] struct {
	ctx *runtime.Context
	// out is the late side output; nil drops.
	out runtime.Output
	// buf holds the late records of the batch being processed; flush emits
	// them as one batch.
	buf runtime.Batch[T]
	// batches emits buf on out and gives the next (runtime.BatchBuffer).
	batches runtime.BatchBuffer[T]
	// dropped and sent count late records since Open.
	dropped, sent int64
}

// open resolves the side output named name ("" for none) on ctx.
func (l *lateRecords[T]) open(ctx *runtime.Context, name string) {
	l.ctx = ctx
	if name != "" {
		l.out = ctx.SideOutput(name)
		if l.out != nil {
			l.batches.Open(l.out)
		}
	}
}

// add handles one late record, behind watermark wm.
func (l *lateRecords[T]) add(r runtime.Record[T], wm int64) {
	if l.out == nil {
		l.dropped++
		l.ctx.DroppedLate(r.Time, wm)
		return
	}
	l.buf = append(l.buf, r)
}

// flush emits the buffered late records and starts the next buffer.
func (l *lateRecords[T]) flush() error {
	if len(l.buf) == 0 {
		return nil
	}
	l.sent += int64(len(l.buf))
	err := l.batches.Emit(l.buf)
	l.buf = l.batches.Get(0)
	return err
}

// close logs the subtask's counts, if any, on ctx's logger: a warning when
// it dropped records (the same words as the join's), else a note of those
// sent to the side output.
func (l *lateRecords[T]) close(ctx *runtime.Context, name string) {
	if ctx == nil || ctx.Log == nil {
		return
	}
	switch {
	case l.dropped > 0:
		ctx.Log.Warn("late records dropped since the subtask opened", "operator", ctx.Task.Operator, "dropped", l.dropped, "side_output", l.sent)
	case l.sent > 0:
		ctx.Log.Info("late records sent to the side output since the subtask opened", "operator", ctx.Task.Operator, "side_output", l.sent, "side_output_name", name)
	}
}
