//go:build iceberg

package iceberg

import (
	"context"
	"fmt"
	"iter"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/internal/failpoint"
	"github.com/ingest-engine/ingest/row"
	"github.com/ingest-engine/ingest/runtime"
)

// batchRows is how many rows go into one Arrow record batch.
const batchRows = 8192

// writer is a sink subtask. An append-only stream's rows go to data files
// as they come (a pipe to WriteRecords that a barrier closes); a
// changelog's changes are folded by key until the barrier (net), then
// written as one data file set and one equality delete file set.
type writer struct {
	s    *Sink
	task checkpoint.TaskID
	job  string
	log  *slog.Logger
	ctx  context.Context
	stop context.CancelFunc
	tbl  *table.Table // the table as located in the job's data directory
	stx  *table.Transaction
	l    *layout
	rows *batcher
	pipe *pipe
	net  map[string]*change
	// order is the net map's changes in the order their keys came first:
	// written in that order, which keeps related keys together in the
	// files (a map's order costs some 10 % of the CPU in encoding).
	order []*change
	kbuf  []byte
	// pending are the files closed at a barrier and not known to be in the
	// table, oldest first: every committable offers all of them.
	pending []pendingFile
}

// change is the net effect of a checkpoint's changes to one key: the key's
// values (in key order) and the row the key ends with (nil: none). Every
// changed key gets an equality delete of the rows older checkpoints wrote,
// inserts too: an insert of a key the table holds (a changelog restarted
// without its state) replaces the row instead of adding a second one.
type change struct {
	key row.Row
	row row.Row
}

func (w *writer) Open(ctx *runtime.Context) error {
	w.task, w.job = ctx.Task, ctx.JobID
	w.log = ctx.Log
	if w.log == nil {
		w.log = slog.New(slog.DiscardHandler)
	}
	w.ctx, w.stop = context.WithCancel(context.Background())
	tbl, err := w.s.loadTable(w.ctx, true)
	if err == nil && w.s.cfg.CreateTable {
		tbl, err = w.s.addColumns(w.ctx, tbl)
	}
	if err != nil {
		return w.s.errorf("subtask %v: %w", w.task, err)
	}
	w.l, err = w.s.planLayout(tbl)
	if err == nil && w.s.cfg.Key != nil {
		err = checkChangelogTable(w.ctx, tbl)
	}
	if err != nil {
		return w.s.errorf("%w", err)
	}
	// The files go to the job's own directory: the subtask writes with a
	// copy of the table's metadata located there, never committed.
	b, err := table.MetadataBuilderFromBase(tbl.Metadata(), tbl.MetadataLocation())
	if err == nil {
		err = b.SetLoc(w.s.dataDir(tbl, ctx.JobID))
	}
	if err == nil && w.s.cfg.TargetFileSize > 0 {
		err = b.SetProperties(iceberg.Properties{table.WriteTargetFileSizeBytesKey: fmt.Sprint(w.s.cfg.TargetFileSize)})
	}
	var meta table.Metadata
	if err == nil {
		meta, err = b.Build()
	}
	if err != nil {
		return w.s.errorf("subtask %v: %w", w.task, err)
	}
	w.tbl = table.New(tbl.Identifier(), meta, tbl.MetadataLocation(), tbl.FS, nil)
	w.stx = w.tbl.NewTransaction()
	w.rows = newBatcher(w.l.data, w.l.kinds)
	if w.s.cfg.Key != nil {
		w.net = map[string]*change{}
	}
	return nil
}

func (w *writer) Write(batch runtime.Batch[row.Row]) error {
	if w.net != nil {
		return w.fold(batch)
	}
	for _, rec := range batch {
		r := rec.Value
		if err := w.rows.add(func(i int) row.Value { return at(r, w.s.cols[i].index) }); err != nil {
			return w.s.errorf("subtask %v: the record with event time %s: %w", w.task, formatTime(rec.Time), err)
		}
		if w.rows.rows >= batchRows {
			if err := w.send(); err != nil {
				return err
			}
		}
	}
	return nil
}

// at is r[i], NULL past the row's end.
func at(r row.Row, i int) row.Value {
	if i < len(r) {
		return r[i]
	}
	return row.Value{}
}

// fold applies a changelog batch to the net changes.
func (w *writer) fold(batch runtime.Batch[row.Row]) error {
	for _, rec := range batch {
		r := rec.Value
		op := at(r, w.s.op)
		w.kbuf = w.kbuf[:0]
		for _, k := range w.s.key {
			v := at(r, k)
			if v.Kind() == row.Null {
				return w.s.errorf("subtask %v: the record with event time %s has a NULL key field %q", w.task, formatTime(rec.Time), w.s.cfg.Schema.Fields[k].Name)
			}
			if v.Kind() == row.Time && v.Int()%1000 != 0 {
				// The table keeps microseconds: two keys that differ below
				// one would be one key there.
				return w.s.errorf("subtask %v: the record with event time %s has key field %q = %s, finer than the microseconds Iceberg keeps: keys that differ below a microsecond would be one row",
					w.task, formatTime(rec.Time), w.s.cfg.Schema.Fields[k].Name, formatTime(v.Int()))
			}
			w.kbuf = row.ValueCodec{}.Append(w.kbuf, v)
		}
		c := w.net[string(w.kbuf)]
		if c == nil {
			c = &change{key: make(row.Row, len(w.s.key))}
			for i, k := range w.s.key {
				c.key[i] = at(r, k)
			}
			w.net[string(w.kbuf)] = c
			w.order = append(w.order, c)
		}
		switch op.Str() {
		case "insert", "update":
			c.row = slices.Clone(r)
		case "delete":
			c.row = nil
		default:
			return w.s.errorf("subtask %v: the record with event time %s has operation %v; want insert, update or delete", w.task, formatTime(rec.Time), op)
		}
	}
	return nil
}

func formatTime(ns int64) string { return time.Unix(0, ns).UTC().Format(time.RFC3339Nano) }

// send hands the rows collected so far to the data file pipe.
func (w *writer) send() error {
	b := w.rows.take()
	if b == nil {
		return nil
	}
	if w.pipe == nil {
		w.pipe = startPipe(w.ctx, w.tbl, w.l.data)
	}
	if err := w.pipe.send(b); err != nil {
		return w.s.errorf("subtask %v: writing data files: %w", w.task, err)
	}
	return nil
}

func (w *writer) ProcessWatermark(int64) error { return nil }

// Snapshot closes the files written since the last barrier and offers, as
// one committable prepared at id, every file not known to be in the table.
func (w *writer) Snapshot(id int64) (runtime.Snapshot, error) {
	w.drop(w.s.published.of(w.job))
	var files []iceberg.DataFile
	var err error
	if w.net != nil {
		files, err = w.writeNet()
	} else if err = w.send(); err == nil && w.pipe != nil {
		files, err = w.pipe.close()
		w.pipe = nil
	}
	if err != nil {
		return runtime.Snapshot{}, w.s.errorf("subtask %v: closing the data files of checkpoint %d: %w", w.task, id, err)
	}
	meta := w.tbl.Metadata()
	for _, f := range files {
		p, err := newPendingFile(f, id, meta)
		if err != nil {
			return runtime.Snapshot{}, w.s.errorf("subtask %v: %w", w.task, err)
		}
		w.pending = append(w.pending, p)
	}
	if len(w.pending) == 0 {
		return runtime.Snapshot{}, nil
	}
	if err := failpoint.Inject("sink/iceberg/prepare"); err != nil {
		return runtime.Snapshot{}, w.s.errorf("subtask %v: preparing checkpoint %d: %w", w.task, id, err)
	}
	data, err := encodeCommittable(w.pending)
	if err != nil {
		return runtime.Snapshot{}, w.s.errorf("subtask %v: %w", w.task, err)
	}
	return runtime.Snapshot{Committables: []checkpoint.Committable{{PreparedAt: id, Data: data}}}, nil
}

// writeNet writes the checkpoint's net changes: the rows keys end with, and
// an equality delete of every changed key, which removes the rows older
// checkpoints wrote for it.
func (w *writer) writeNet() ([]iceberg.DataFile, error) {
	if len(w.net) == 0 {
		return nil, nil
	}
	keys := newBatcher(w.l.keys, keyKinds(w.l))
	defer keys.release()
	// WriteEqualityDeletes and WriteRecords release the batches they read.
	var data, dels []arrow.RecordBatch
	for _, c := range w.order {
		if err := keys.add(func(i int) row.Value { return c.key[i] }); err != nil {
			return nil, err
		}
		if keys.rows >= batchRows {
			dels = append(dels, keys.take())
		}
		if c.row != nil {
			if err := w.rows.add(func(i int) row.Value { return at(c.row, w.s.cols[i].index) }); err != nil {
				return nil, fmt.Errorf("key %s: %w", w.keyText(c.key), err)
			}
			if w.rows.rows >= batchRows {
				data = append(data, w.rows.take())
			}
		}
	}
	if b := keys.take(); b != nil {
		dels = append(dels, b)
	}
	if b := w.rows.take(); b != nil {
		data = append(data, b)
	}
	clear(w.net)
	clear(w.order) // drop the rows for the collector
	w.order = w.order[:0]
	out, err := w.stx.WriteEqualityDeletes(w.ctx, w.l.keyIDs, batches(dels))
	if err != nil {
		return nil, fmt.Errorf("writing equality deletes: %w", err)
	}
	if len(data) > 0 {
		for f, err := range table.WriteRecords(w.ctx, w.tbl, w.l.data, batches(data)) {
			if err != nil {
				return nil, fmt.Errorf("writing data files: %w", err)
			}
			out = append(out, f)
		}
	}
	return out, nil
}

// keyText writes a key's values for messages.
func (w *writer) keyText(key row.Row) string {
	parts := make([]string, len(key))
	for i, v := range key {
		parts[i] = v.String()
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func keyKinds(l *layout) []row.Kind {
	var ks []row.Kind
	for _, c := range l.keyCols {
		ks = append(ks, l.kinds[c])
	}
	return ks
}

func batches(bs []arrow.RecordBatch) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		for _, b := range bs {
			if !yield(b, nil) {
				return
			}
		}
	}
}

// drop forgets the pending files prepared at or before published: they are
// in the table.
func (w *writer) drop(published int64) {
	w.pending = slices.DeleteFunc(w.pending, func(p pendingFile) bool { return p.PreparedAt <= published })
}

// NotifyComplete forgets the files checkpoint id published. Without a
// commit interval every complete checkpoint's files are published (by its
// commit, or by the recovery's); with one, only those the committer says it
// published.
func (w *writer) NotifyComplete(id int64) error {
	if w.s.cfg.CommitInterval <= 0 {
		w.drop(id)
	} else {
		w.drop(w.s.published.of(w.job))
	}
	return nil
}

// Close aborts the files being written: they belong to no checkpoint, and
// the next recovery deletes them.
func (w *writer) Close() error {
	if w.stop != nil {
		w.stop()
	}
	if w.pipe != nil {
		_, _ = w.pipe.close()
		w.pipe = nil
	}
	if w.rows != nil {
		w.rows.release()
		w.rows = nil
	}
	return nil
}

// pipe streams record batches to table.WriteRecords on its own goroutine,
// which writes data files as the batches come.
type pipe struct {
	ch    chan arrow.RecordBatch
	quit  chan struct{} // closed when the goroutine ends
	files []iceberg.DataFile
	err   error
}

func startPipe(ctx context.Context, tbl *table.Table, sc *arrow.Schema) *pipe {
	p := &pipe{ch: make(chan arrow.RecordBatch, 2), quit: make(chan struct{})}
	go func() {
		defer close(p.quit)
		in := func(yield func(arrow.RecordBatch, error) bool) {
			for b := range p.ch {
				if !yield(b, nil) {
					return
				}
			}
		}
		for f, err := range table.WriteRecords(ctx, tbl, sc, in) {
			if err != nil {
				p.err = err
				return
			}
			p.files = append(p.files, f)
		}
	}()
	return p
}

// send passes b on, or returns the error that ended the goroutine.
func (p *pipe) send(b arrow.RecordBatch) error {
	select {
	case p.ch <- b:
		return nil
	case <-p.quit:
		b.Release()
		if p.err == nil {
			return fmt.Errorf("the data file writer stopped")
		}
		return p.err
	}
}

// close ends the input and waits for the files.
func (p *pipe) close() ([]iceberg.DataFile, error) {
	close(p.ch)
	<-p.quit
	for b := range p.ch { // left unread when the writer failed
		b.Release()
	}
	return p.files, p.err
}
