//go:build iceberg

package iceberg_test

import (
	"context"
	"testing"

	"github.com/ingest-engine/ingest/checkpoint"
	ice "github.com/ingest-engine/ingest/connector/iceberg"
	"github.com/ingest-engine/ingest/row"
	"github.com/ingest-engine/ingest/runtime"
)

// harness drives a Sink's subtasks and committer by hand, so a test decides
// exactly which records fall into which checkpoint and which checkpoints one
// commit groups.
type harness struct {
	t    *testing.T
	sink *ice.Sink
	cm   runtime.Committer
	job  string
	subs []runtime.SinkSubtask[row.Row]
}

func newHarness(t *testing.T, cfg ice.SinkConfig, job string, parallelism int) *harness {
	t.Helper()
	s, err := ice.NewSink("lake", cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, sink: s, cm: s.Committer(), job: job}
	for i := 0; i < parallelism; i++ {
		w := s.NewSubtask()
		if err := w.Open(&runtime.Context{Task: checkpoint.TaskID{Operator: "lake", Subtask: i}, Parallelism: parallelism, JobID: job}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = w.Close() })
		h.subs = append(h.subs, w)
	}
	return h
}

// openErr returns the error of making the sink of cfg and opening a
// subtask of it, nil when both succeed.
func openErr(t *testing.T, cfg ice.SinkConfig, job string) error {
	t.Helper()
	s, err := ice.NewSink("lake", cfg)
	if err != nil {
		return err
	}
	w := s.NewSubtask()
	t.Cleanup(func() { _ = w.Close() })
	return w.Open(&runtime.Context{Task: checkpoint.TaskID{Operator: "lake", Subtask: 0}, Parallelism: 1, JobID: job})
}

// writeErr hands rows to subtask i and returns Write's error.
func (h *harness) writeErr(i int, rows ...row.Row) error {
	var b runtime.Batch[row.Row]
	for _, r := range rows {
		b = append(b, runtime.Record[row.Row]{Value: r})
	}
	return h.subs[i].Write(b)
}

// write hands rows to subtask i.
func (h *harness) write(i int, rows ...row.Row) {
	h.t.Helper()
	var b runtime.Batch[row.Row]
	for _, r := range rows {
		b = append(b, runtime.Record[row.Row]{Value: r})
	}
	if err := h.subs[i].Write(b); err != nil {
		h.t.Fatal(err)
	}
}

// barrier snapshots every subtask at id and returns the commit the
// coordinator would build from their acknowledgements.
func (h *harness) barrier(id int64) checkpoint.Commit {
	h.t.Helper()
	c := checkpoint.Commit{Checkpoint: id, Sink: "lake"}
	for _, w := range h.subs {
		snap, err := w.Snapshot(id)
		if err != nil {
			h.t.Fatal(err)
		}
		for _, cm := range snap.Committables {
			c.Committables = append(c.Committables, cm.Data)
		}
	}
	return c
}

// commit commits c (ctx decides PublishNow) and notifies the subtasks.
func (h *harness) commit(ctx context.Context, c checkpoint.Commit) error {
	err := h.cm.Commit(ctx, h.job, c)
	for _, w := range h.subs {
		if nerr := w.NotifyComplete(c.Checkpoint); nerr != nil && err == nil {
			err = nerr
		}
	}
	return err
}

func ints(vs ...int64) row.Row {
	r := make(row.Row, len(vs))
	for i, v := range vs {
		r[i] = row.IntValue(v)
	}
	return r
}

func change(k, v int64, op string) row.Row {
	return row.Row{row.IntValue(k), row.IntValue(v), row.StringValue(op)}
}

func batchOf(rows []row.Row) runtime.Batch[row.Row] {
	var b runtime.Batch[row.Row]
	for _, r := range rows {
		b = append(b, runtime.Record[row.Row]{Value: r})
	}
	return b
}

func newSinkForTest(cfg ice.SinkConfig) (*ice.Sink, error) { return ice.NewSink("lake", cfg) }
