package postgres

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"log/slog"
	"slices"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/internal/failpoint"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/jackc/pgx/v5"
)

// writer is one sink subtask. It numbers the rows it receives (its
// sequence), buffers them into chunks that its copier stages in the
// background, and at each barrier waits for the staging to be durable and
// turns the rows since the previous barrier into a committable.
type writer[T any] struct {
	sink *Sink[T]
	d    *destination
	task checkpoint.TaskID
	log  *slog.Logger

	release func() // releases the sink's connections; nil when not open
	cp      *copier

	// id is the writer's registered id: a random positive int64, unique in
	// ingest_sink_writers, so a writer's rows are told from every other's,
	// also from those of this subtask's earlier attempts.
	id    int64
	boxed any // id as an interface value, boxed once
	width int // values per staged row: the two tags and the columns

	buf   []any // the current chunk
	rows  int   // rows in buf
	seq   int64 // the next row's sequence number
	first int64 // sequence number of buf's first row
	// prepared is the sequence number at the previous barrier: the rows
	// [prepared, seq) are not in any committable yet.
	prepared int64
	// pending are the committables prepared and not yet known committed.
	// INVARIANT: reported in every Snapshot until NotifyComplete(id >= PreparedAt).
	pending []checkpoint.Committable
}

// registerAttempts bounds the search for an unused writer id: a collision of
// random 63-bit ids is practically impossible, so failing three times means
// something else is wrong.
const registerAttempts = 3

func (w *writer[T]) Open(ctx *runtime.Context) error {
	w.d = w.sink.d
	w.task = ctx.Task
	w.log = ctx.Log
	if w.log == nil {
		w.log = slog.New(slog.DiscardHandler)
	}
	w.width = 2 + len(w.d.columns)
	if w.d.cfg.Deletes {
		w.width++ // the delete flag
	}
	release, err := w.d.use(context.Background())
	if err != nil {
		return w.d.errorf("subtask %v: %w", w.task, err)
	}
	w.release = release
	id, conn, err := w.register(ctx.JobID)
	if err != nil {
		return err
	}
	w.id, w.boxed = id, id
	w.cp = newCopier(w.d, conn, id, w.log)
	w.buf = w.cp.buffer(w.d.cfg.FlushRows * w.width)
	return nil
}

// register connects and records the writer in ingest_sink_writers under a
// fresh random id, so Abandon can find its staged rows. It returns the id and
// the connection, which the writer's copier then owns.
func (w *writer[T]) register(job string) (int64, *pgx.Conn, error) {
	d := w.d
	var conn *pgx.Conn
	for range registerAttempts {
		id := randomID()
		var registered bool
		err := retry(context.Background(), d.cfg.CommitRetries, d.cfg.RetryBackoff, func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, d.cfg.OpTimeout)
			defer cancel()
			if conn == nil || conn.IsClosed() {
				c, err := d.conns.connect(ctx)
				if err != nil {
					return err
				}
				conn = c
			}
			tag, err := conn.Exec(ctx, d.sql.register, id, d.cfg.Pipeline, w.task.Operator, job, int32(w.task.Subtask), d.staging.String())
			registered = err == nil && tag.RowsAffected() == 1
			return err
		})
		if err != nil {
			if conn != nil {
				closeConn(conn)
			}
			return 0, nil, d.errorf("subtask %v: registering in %s: %w", w.task, d.sql.writers, classify(err))
		}
		if registered {
			return id, conn, nil
		}
	}
	closeConn(conn)
	return 0, nil, d.errorf("subtask %v: no unused writer id in %d attempts", w.task, registerAttempts)
}

// randomID returns a random positive int64.
func randomID() int64 {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	id := int64(binary.LittleEndian.Uint64(b[:]) >> 1)
	if id == 0 {
		id = 1
	}
	return id
}

// BorrowsBatches implements runtime.BorrowingSink: the records' values
// are copied into the pending rows.
func (w *writer[T]) BorrowsBatches() {}

func (w *writer[T]) Write(batch runtime.Batch[T]) error {
	if err := w.cp.err(); err != nil {
		return err
	}
	ncols := len(w.d.columns)
	for _, rec := range batch {
		start := len(w.buf)
		w.buf = append(w.buf, w.boxed, w.seq)
		w.buf = w.sink.values(w.buf, rec.Value)
		if n := len(w.buf) - start; n != w.width {
			flag := ""
			if w.d.cfg.Deletes {
				flag = " and the delete flag"
			}
			return w.d.errorf("subtask %v: the record with event time %s gave %d values for the %d columns %q%s",
				w.task, formatTime(rec.Time), n-2, ncols, names(w.d.columns), flag)
		}
		if w.d.cfg.Deletes {
			if _, ok := w.buf[len(w.buf)-1].(bool); !ok {
				return w.d.errorf("subtask %v: the record with event time %s gave %T as its delete flag, not a bool",
					w.task, formatTime(rec.Time), w.buf[len(w.buf)-1])
			}
		}
		for _, k := range w.d.keyIndex {
			if w.buf[start+2+k] == nil {
				return w.d.errorf("subtask %v: the record with event time %s has a NULL key column %q: upserts need a key",
					w.task, formatTime(rec.Time), w.d.columns[k].Name)
			}
		}
		w.seq++
		w.rows++
		if w.rows >= w.d.cfg.FlushRows {
			w.flush()
		}
	}
	return nil
}

// flush hands the current chunk to the copier.
func (w *writer[T]) flush() {
	if w.rows == 0 {
		return
	}
	w.cp.send(w.buf, w.rows, w.first)
	w.buf = w.cp.buffer(w.d.cfg.FlushRows * w.width)
	w.rows = 0
	w.first = w.seq
}

func formatTime(ns int64) string { return time.Unix(0, ns).UTC().Format(time.RFC3339Nano) }

func (w *writer[T]) ProcessWatermark(int64) error { return nil }

// Snapshot prepares: it stages the rest of the rows since the previous
// barrier and waits until every chunk is committed, so they are durable
// before the subtask acknowledges; they become a committable of checkpoint
// id. An error fails the subtask: staged rows may be lost, and the job must
// replay from the last complete checkpoint.
func (w *writer[T]) Snapshot(id int64) (runtime.Snapshot, error) {
	w.flush()
	if err := w.cp.sync(); err != nil {
		return runtime.Snapshot{}, err
	}
	if w.seq > w.prepared {
		if err := failpoint.Inject("sink/postgres/prepare"); err != nil {
			return runtime.Snapshot{}, w.d.errorf("subtask %v: preparing rows %d to %d for checkpoint %d: %w", w.task, w.prepared, w.seq-1, id, err)
		}
		b := batch{Prepared: id, Subtask: int32(w.task.Subtask), Writer: w.id, First: w.prepared, End: w.seq}
		w.pending = append(w.pending, checkpoint.Committable{PreparedAt: id, Data: b.encode()})
		w.prepared = w.seq
	}
	return runtime.Snapshot{Committables: slices.Clone(w.pending)}, nil
}

// NotifyComplete drops the committables a complete checkpoint publishes.
func (w *writer[T]) NotifyComplete(id int64) error {
	w.pending = slices.DeleteFunc(w.pending, func(c checkpoint.Committable) bool { return c.PreparedAt <= id })
	return nil
}

// Close stops the copier, aborting a copy in flight, and releases the
// sink's connections.
// Rows not prepared belong to no checkpoint: what was staged of them is
// deleted by the next recovery's Abandon.
func (w *writer[T]) Close() error {
	if w.cp != nil {
		w.cp.close()
		w.cp = nil
	}
	if w.release != nil {
		w.release()
		w.release = nil
	}
	return nil
}
