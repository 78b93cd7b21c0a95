package window

import (
	"github.com/ingest-engine/ingest/runtime"
)

// lateRecords applies the late-record policy of one operator subtask: send
// to the side output when one is configured and consumed, else drop; count
// either way.
type lateRecords[T any] struct {
	// out is the late side output; nil drops.
	out runtime.Output
	// buf holds the late records of the batch being processed; flush emits
	// them as one batch.
	buf runtime.Batch[T]
	// dropped and sent count late records since Open.
	dropped, sent int64
}

// open resolves the side output named name ("" for none) on ctx.
func (l *lateRecords[T]) open(ctx *runtime.Context, name string) {
	if name != "" {
		l.out = ctx.SideOutput(name)
	}
}

// add handles one late record.
func (l *lateRecords[T]) add(r runtime.Record[T]) {
	if l.out == nil {
		l.dropped++
		return
	}
	l.buf = append(l.buf, r)
}

// flush emits the buffered late records; the batch belongs to the receiver
// from then on, so a new buffer starts.
func (l *lateRecords[T]) flush() error {
	if len(l.buf) == 0 {
		return nil
	}
	b := l.buf
	l.buf = nil
	l.sent += int64(len(b))
	return l.out.Emit(b)
}

// close logs the counts, if any, on ctx's logger.
func (l *lateRecords[T]) close(ctx *runtime.Context, name string) {
	if ctx == nil || ctx.Log == nil || (l.dropped == 0 && l.sent == 0) {
		return
	}
	ctx.Log.Info("window late records", "dropped", l.dropped, "side_output", l.sent, "side_output_name", name)
}
