package kafka

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/internal/failpoint"
	"github.com/ingest-engine/ingest/runtime"
)

// sinkCloseTimeout bounds the best-effort abort of the open transaction when
// a subtask closes.
const sinkCloseTimeout = 5 * time.Second

// sinkWriter is one sink subtask: it writes the records it receives into an
// open transaction, prepares that transaction at every barrier and reports it
// as a committable until it is told the checkpoint completed.
type sinkWriter[T any] struct {
	sink *Sink[T]
	cfg  *SinkConfig
	task checkpoint.TaskID
	job  string
	log  *slog.Logger
	// ctx lives from Open to Close; produced records carry it.
	ctx    context.Context
	cancel context.CancelFunc
	// admin sends the subtask's raw requests (fencing, commits before reuse).
	admin *kgo.Client
	pool  *txnPool
	// cur is the transaction being written; nil from a barrier until the
	// next record.
	cur *sinkTxn
	// pending are the prepared transactions not yet known complete.
	// INVARIANT: reported in every Snapshot until NotifyComplete(id >= PreparedAt).
	pending []checkpoint.Committable
	// closing tracks the clients of prepared transactions being closed.
	closing sync.WaitGroup
	// promise is the produce callback of data records.
	promise func(*kgo.Record, error)

	errMu sync.Mutex
	// err is the first failed produce; it fails the subtask at its next call.
	err error
}

// sinkTxn is the open transaction of a subtask.
type sinkTxn struct {
	slot    int
	cl      *kgo.Client
	pid     int64
	epoch   int16
	started time.Time
	records int64
}

// Open fences every id of the subtask's pool: transactions an earlier run
// left open on them are aborted (the job published the recovery point's
// commits before any subtask opens, so none of them can still be committed).
func (w *sinkWriter[T]) Open(ctx *runtime.Context) error {
	w.task, w.job, w.log = ctx.Task, ctx.JobID, ctx.Log
	if w.log == nil {
		w.log = slog.New(slog.DiscardHandler)
	}
	w.ctx, w.cancel = context.WithCancel(context.Background())
	w.promise = w.onProduced
	cl, err := kgo.NewClient(sinkClientOpts(w.cfg, w.log)...)
	if err != nil {
		return w.errorf("creating a client: %w", err)
	}
	w.admin = cl
	octx, cancel := context.WithTimeout(w.ctx, w.cfg.CommitTimeout)
	defer cancel()
	if err := txnEnsureTopics(octx, cl, w.cfg); err != nil {
		return w.errorf("%w", err)
	}
	w.pool = newTxnPool(w.cfg.TransactionalIDPrefix, w.task.Subtask, w.cfg.PoolSize)
	for _, s := range w.pool.slots {
		if err := txnFence(octx, cl, w.cfg, s.id); err != nil {
			return w.errorf("%w", err)
		}
	}
	return nil
}

// BorrowsBatches implements runtime.BorrowingSink: records are encoded
// before Write returns.
func (w *sinkWriter[T]) BorrowsBatches() {}

// Write produces the batch's records into the open transaction,
// beginning one first if needed. Produces are asynchronous; a failure fails
// the subtask at its next call, and at the latest at the next barrier.
func (w *sinkWriter[T]) Write(batch runtime.Batch[T]) error {
	if err := w.failed(); err != nil {
		return err
	}
	if len(batch) == 0 {
		return nil
	}
	if w.cur == nil {
		if err := w.begin(); err != nil {
			return err
		}
	}
	cl := w.cur.cl
	for _, rec := range batch {
		k, v, err := w.sink.encode(rec.Value)
		if err != nil {
			return w.errorf("encoding the record with event time %s: %w", time.Unix(0, rec.Time).UTC().Format(time.RFC3339Nano), err)
		}
		cl.Produce(w.ctx, &kgo.Record{Key: k, Value: v, Topic: w.cfg.Topic}, w.promise)
	}
	w.cur.records += int64(len(batch))
	return nil
}

// begin starts a transaction on the next free id of the pool. An id whose
// previous transaction's checkpoint is complete is committed first (a no-op
// when the committer already did it): initialising the id would abort it.
func (w *sinkWriter[T]) begin() error {
	slot, reuse, ok := w.pool.next()
	if !ok {
		return w.errorf("%s", w.pool.exhausted())
	}
	s := &w.pool.slots[slot]
	if reuse {
		if err := txnCommitOne(w.ctx, w.admin, w.cfg, &w.sink.sh.ledger, &s.txn); err != nil {
			return w.errorf("committing the previous transaction of %s before reusing the id: %w", s.id, err)
		}
	}
	cl, err := kgo.NewClient(sinkClientOpts(w.cfg, w.log,
		kgo.TransactionalID(s.id),
		kgo.TransactionTimeout(w.cfg.TransactionTimeout),
		kgo.RecordDeliveryTimeout(w.cfg.DeliveryTimeout),
		kgo.DefaultProduceTopic(w.cfg.Topic),
	)...)
	if err != nil {
		return w.errorf("creating the producer of %s: %w", s.id, err)
	}
	if err := cl.BeginTransaction(); err != nil {
		cl.Close()
		return w.errorf("beginning a transaction on %s: %w", s.id, err)
	}
	ctx, cancel := context.WithTimeout(w.ctx, w.cfg.CommitTimeout)
	pid, epoch, err := cl.ProducerID(ctx)
	cancel()
	if err != nil {
		cl.Close()
		return w.errorf("initialising the producer id of %s: %w", s.id, err)
	}
	w.pool.open(slot)
	w.cur = &sinkTxn{slot: slot, cl: cl, pid: pid, epoch: epoch, started: time.Now()}
	return nil
}

// onProduced is the promise of every data record.
func (w *sinkWriter[T]) onProduced(r *kgo.Record, err error) {
	if err != nil {
		w.fail(w.errorf("producing to %s partition %d: %w", r.Topic, r.Partition, err))
	}
}

// Snapshot prepares: the open transaction's marker is written last, every
// record is flushed and acknowledged, and the transaction — left open, not
// committed — becomes a committable of checkpoint id. The next records go
// into a new transaction on another id.
func (w *sinkWriter[T]) Snapshot(id int64) (runtime.Snapshot, error) {
	if err := w.failed(); err != nil {
		return runtime.Snapshot{}, err
	}
	if w.cur != nil {
		if err := w.prepare(id); err != nil {
			return runtime.Snapshot{}, err
		}
	}
	if err := w.guard(id); err != nil {
		return runtime.Snapshot{}, err
	}
	return runtime.Snapshot{Committables: slices.Clone(w.pending)}, nil
}

// prepare flushes the open transaction at barrier id.
func (w *sinkWriter[T]) prepare(id int64) error {
	t := w.cur
	s := &w.pool.slots[t.slot]
	m := txnMarker{Version: txnCommittableVersion, Job: w.job, Sink: w.task.Operator, Subtask: w.task.Subtask, Checkpoint: id, TxnID: s.id, Records: t.records}
	var marker *kgo.Record
	var markerErr error
	done := make(chan struct{})
	t.cl.Produce(w.ctx, &kgo.Record{Topic: w.cfg.MarkerTopic, Key: []byte(s.id), Value: m.encode()}, func(r *kgo.Record, err error) {
		marker, markerErr = r, err
		close(done)
	})
	ctx, cancel := context.WithTimeout(w.ctx, w.cfg.DeliveryTimeout)
	defer cancel()
	if err := t.cl.Flush(ctx); err != nil {
		return w.errorf("flushing %d records of %s at checkpoint %d: %w", t.records, s.id, id, err)
	}
	select {
	case <-done:
	case <-ctx.Done():
		return w.errorf("writing the marker of %s at checkpoint %d: %w", s.id, id, ctx.Err())
	}
	if err := w.failed(); err != nil {
		return err
	}
	if markerErr != nil {
		return w.errorf("writing the marker of %s to %s at checkpoint %d: %w", s.id, w.cfg.MarkerTopic, id, markerErr)
	}
	if err := failpoint.Inject("sink/kafka/prepare"); err != nil {
		return w.errorf("preparing %s at checkpoint %d: %w", s.id, id, err)
	}
	c := txnCommittable{
		Version: txnCommittableVersion, TxnID: s.id, ProducerID: t.pid, Epoch: t.epoch,
		MarkerTopic: w.cfg.MarkerTopic, MarkerPartition: marker.Partition, MarkerOffset: marker.Offset,
		Records: t.records, PreparedAt: id, Subtask: w.task.Subtask, Slot: t.slot, Started: t.started,
	}
	w.pool.prepare(t.slot, c)
	w.pending = append(w.pending, checkpoint.Committable{PreparedAt: id, Data: c.encode()})
	// Closing a client sends nothing to the broker: the transaction stays
	// open until a committer ends it.
	w.closing.Go(t.cl.Close)
	w.cur = nil
	return nil
}

// guard fails the subtask when a prepared transaction is so old that it could
// be aborted by the broker's transaction timeout before checkpoint id commits
// it: failing now makes the job restart from the last complete checkpoint and
// write those records again, where waiting would lose them. It only triggers
// when checkpoints keep failing (a failed checkpoint's transaction is carried
// into the next) or take much longer than configured.
func (w *sinkWriter[T]) guard(id int64) error {
	horizon := time.Duration(w.sink.sh.horizon.Load())
	for _, c := range w.pool.prepared() {
		age := time.Since(c.Started)
		if age+horizon+w.cfg.RecoveryMargin < w.cfg.TransactionTimeout {
			continue
		}
		return w.errorf("%s has been open for %v: with checkpoint timeout %v and recovery margin %v it could outlive the transaction timeout %v before checkpoint %d commits it, and the broker would abort it; "+
			"failing so the job restarts from the last complete checkpoint and writes these records again (checkpoints have not completed since checkpoint %d)",
			c.String(), age.Round(time.Millisecond), horizon, w.cfg.RecoveryMargin, w.cfg.TransactionTimeout, id, c.PreparedAt)
	}
	return nil
}

// ProcessWatermark does nothing: records carry no watermark to Kafka.
func (w *sinkWriter[T]) ProcessWatermark(int64) error { return nil }

// NotifyComplete drops the committables a complete checkpoint publishes; their
// ids become reusable once committed.
func (w *sinkWriter[T]) NotifyComplete(id int64) error {
	w.pending = slices.DeleteFunc(w.pending, func(c checkpoint.Committable) bool { return c.PreparedAt <= id })
	if w.pool != nil {
		w.pool.complete(id)
	}
	return nil
}

// Close aborts the open transaction (its records belong to no checkpoint)
// and releases the clients. Prepared transactions are left alone: a
// checkpoint may still commit them, and if none does the next start fences
// them.
func (w *sinkWriter[T]) Close() error {
	if w.cancel == nil {
		return nil
	}
	w.cancel()
	if t := w.cur; t != nil {
		ctx, cancel := context.WithTimeout(context.Background(), sinkCloseTimeout)
		_ = t.cl.AbortBufferedRecords(ctx)
		if err := t.cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
			w.log.Warn("kafka sink: aborting the open transaction at close failed; the next start fences it", "txn", w.pool.slots[t.slot].id, "err", err)
		}
		cancel()
		t.cl.Close()
		w.pool.abandon(t.slot)
		w.cur = nil
	}
	w.closing.Wait()
	if w.admin != nil {
		w.admin.Close()
	}
	return nil
}

// fail records the first asynchronous failure.
func (w *sinkWriter[T]) fail(err error) {
	w.errMu.Lock()
	if w.err == nil {
		w.err = err
	}
	w.errMu.Unlock()
}

// failed returns the first asynchronous failure, if any.
func (w *sinkWriter[T]) failed() error {
	w.errMu.Lock()
	defer w.errMu.Unlock()
	return w.err
}

// errorf formats an error naming the sink's topic and the subtask.
func (w *sinkWriter[T]) errorf(format string, args ...any) error {
	return fmt.Errorf("kafka sink %s, subtask %v: "+format, append([]any{w.cfg.Topic, w.task}, args...)...)
}
