package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/internal/failpoint"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/jackc/pgx/v5"
)

// committer publishes a sink's staged rows, one transaction per commit. It
// is stateless: everything it needs is in the commit and in the database.
type committer struct{ d *destination }

// Commit publishes c: every row its committables name, from every subtask,
// in one transaction that also records (pipeline, sink, job, checkpoint) in
// ingest_sink_progress. When that row exists the checkpoint was published
// and nothing happens. Transient errors are retried (CommitRetries); a
// failure leaves nothing published, and the job's recovery commits again.
func (cm committer) Commit(ctx context.Context, jobID string, c checkpoint.Commit) error {
	d := cm.d
	if len(c.Committables) == 0 {
		return nil
	}
	var p publication
	for _, data := range c.Committables {
		b, err := decodeBatch(data)
		if err != nil {
			return d.errorf("committing checkpoint %d of sink %s: %w (%w)", c.Checkpoint, c.Sink, err, runtime.ErrIncompatible)
		}
		p.add(b)
	}
	release, err := d.use(ctx)
	if err == nil {
		defer release()
		err = retry(ctx, d.cfg.CommitRetries, d.cfg.RetryBackoff, func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, d.cfg.OpTimeout)
			defer cancel()
			return d.conns.withConn(ctx, func(conn *pgx.Conn) error { return cm.publish(ctx, conn, jobID, c, &p) })
		})
		err = classify(err)
	}
	if err != nil {
		return d.errorf("committing checkpoint %d of sink %s (job %s, %d staged rows): %w", c.Checkpoint, c.Sink, jobID, p.rows, err)
	}
	return nil
}

// publication is a commit's batches as the column arrays the statements take.
type publication struct {
	prepared, writer, first, end []int64
	subtask                      []int32
	rows                         int64
}

// digest names the publication's content: every batch's writer and sequence
// range, in order. Writers are registered with unique ids, so two commits
// with the same digest publish the same staged rows.
func (p *publication) digest() string {
	var b strings.Builder
	for i := range p.writer {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%d:%d-%d", p.writer[i], p.first[i], p.end[i])
	}
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:16])
}

func (p *publication) add(b batch) {
	p.prepared = append(p.prepared, b.Prepared)
	p.subtask = append(p.subtask, b.Subtask)
	p.writer = append(p.writer, b.Writer)
	p.first = append(p.first, b.First)
	p.end = append(p.end, b.End)
	p.rows += b.rows()
}

// publish runs the publishing transaction once. The statements go in one
// round trip (a pipelined batch); their results decide between COMMIT and
// ROLLBACK:
//
//  1. the newest published checkpoint of this sink and job: a commit more
//     than ProgressHistory ids older was published and its progress row pruned;
//  2. the progress row, inserted unless it exists (then this checkpoint was
//     published; a concurrent publisher of the same checkpoint waits here on
//     the row's index entry and then finds it);
//  3. the staged rows into the target;
//  4. the staged rows deleted, as many as the committables name, else some
//     were lost and nothing is published;
//  5. progress rows past ProgressHistory pruned.
func (cm committer) publish(ctx context.Context, conn *pgx.Conn, jobID string, c checkpoint.Commit, p *publication) error {
	d := cm.d
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after Commit
	b := &pgx.Batch{}
	b.Queue(d.sql.maxProgress, d.cfg.Pipeline, c.Sink, jobID)
	digest := p.digest()
	b.Queue(d.sql.insertProgress, d.cfg.Pipeline, c.Sink, jobID, c.Checkpoint, d.target.String(), p.rows, digest)
	b.Queue(d.sql.progressOf, d.cfg.Pipeline, c.Sink, jobID, c.Checkpoint)
	b.Queue(d.sql.publish, p.prepared, p.subtask, p.writer, p.first, p.end)
	b.Queue(d.sql.deleteStaged, p.writer, p.first, p.end)
	prune := d.cfg.ProgressHistory > 0
	if prune {
		b.Queue(d.sql.pruneProgress, d.cfg.Pipeline, c.Sink, jobID, c.Checkpoint-d.cfg.ProgressHistory)
	}
	res := tx.SendBatch(ctx, b)
	var newest int64
	if err := res.QueryRow().Scan(&newest); err != nil {
		res.Close()
		return fmt.Errorf("reading %s: %w", d.sql.progress, err)
	}
	inserted, err := res.Exec()
	if err != nil {
		res.Close()
		return fmt.Errorf("recording the checkpoint in %s: %w", d.sql.progress, err)
	}
	var recordedRows int64
	var recorded string
	if err := res.QueryRow().Scan(&recordedRows, &recorded); err != nil {
		res.Close()
		return fmt.Errorf("reading the checkpoint's row in %s: %w", d.sql.progress, err)
	}
	if _, err := res.Exec(); err != nil {
		res.Close()
		return fmt.Errorf("inserting into %s: %w%s", d.sql.target, err, describePg(err))
	}
	deleted, err := res.Exec()
	if err != nil {
		res.Close()
		return fmt.Errorf("deleting published rows from %s: %w", d.sql.staging, err)
	}
	if prune {
		if _, err := res.Exec(); err != nil {
			res.Close()
			return fmt.Errorf("pruning %s: %w", d.sql.progress, err)
		}
	}
	if err := res.Close(); err != nil {
		return err
	}
	if inserted.RowsAffected() == 0 {
		// Published before, if by this very commit: a checkpoint id is
		// never taken for what its row says, only with its content.
		if (recorded != "" && recorded != digest) || (recorded == "" && recordedRows != p.rows) {
			return fmt.Errorf("checkpoint %d of job %s is recorded in %s as published with other rows (%d rows, batches %q; this commit: %d rows, batches %q): "+
				"the same checkpoint id named other output, which happens when the checkpoint ledger (_ledger in the checkpoint storage) was deleted or replaced. "+
				"Nothing was published; the staged rows stay. Delete that progress row to publish them, or give the sink another job: %w (%w)",
				c.Checkpoint, jobID, d.sql.progress, recordedRows, recorded, p.rows, digest, ErrPublishedDiffers, runtime.ErrUnrecoverable)
		}
		return nil // the deferred rollback undoes this attempt
	}
	if prune && c.Checkpoint < newest-d.cfg.ProgressHistory {
		return nil // published before and its progress row pruned
	}
	if n := deleted.RowsAffected(); n != p.rows {
		return fmt.Errorf("%d of the commit's %d staged rows are in %s: %w (%w)", n, p.rows, d.staging, ErrStagedOutputLost, runtime.ErrUnrecoverable)
	}
	if err := failpoint.Inject("sink/postgres/mid-commit"); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// Abandon deletes staged rows no checkpoint will publish: at recovery, after
// the recovery point's commits were published (which deleted their staged
// rows), every row still staged by a writer of job jobID belongs to a
// checkpoint that never completed. It also deletes the rows of other jobs'
// writers of this pipeline silent for StaleAfter, and of writers no longer
// registered (a copy that committed after its job was abandoned). It returns
// how many staged rows it deleted.
func (cm committer) Abandon(ctx context.Context, jobID string) (int, error) {
	d := cm.d
	return cm.deleteInTx(ctx, jobID, "abandoning", d.cfg.CommitRetries, func(ctx context.Context, tx pgx.Tx) (int64, error) {
		if _, err := tx.Exec(ctx, d.sql.abandonWriters, cm.staleArgs(jobID)...); err != nil {
			return 0, fmt.Errorf("unregistering writers in %s: %w", d.sql.writers, err)
		}
		tag, err := tx.Exec(ctx, d.sql.abandonRows)
		if err != nil {
			return 0, fmt.Errorf("deleting abandoned rows from %s: %w", d.staging, err)
		}
		return tag.RowsAffected(), nil
	})
}

// Sweep deletes, while the job runs, staged rows no checkpoint will publish
// (runtime.StagingSweeper): those of the writers of other jobs of this
// pipeline silent for StaleAfter. This job's writers are all live while it
// runs (each refreshes its mark on a timer), so its own unpublished rows,
// and rows of writers no longer registered, are left to the recovery's
// Abandon. before is not used: the age of other jobs' rows is StaleAfter, by
// the server's clock. One attempt, no retries: the next completed
// checkpoint sweeps again.
func (cm committer) Sweep(ctx context.Context, jobID string, _ time.Time) (int, error) {
	d := cm.d
	return cm.deleteInTx(ctx, jobID, "sweeping", -1, func(ctx context.Context, tx pgx.Tx) (int64, error) {
		tag, err := tx.Exec(ctx, d.sql.sweep, cm.staleArgs(jobID)...)
		if err != nil {
			return 0, fmt.Errorf("deleting the rows of stale writers from %s: %w", d.staging, err)
		}
		return tag.RowsAffected(), nil
	})
}

// staleArgs are the parameters of abandonWriters and sweep: pipeline,
// staging table, job, whether StaleAfter applies, StaleAfter in
// microseconds.
func (cm committer) staleArgs(jobID string) []any {
	d := cm.d
	return []any{d.cfg.Pipeline, d.staging.String(), jobID, d.cfg.StaleAfter > 0, d.cfg.StaleAfter.Microseconds()}
}

// deleteInTx runs del in a transaction, retried up to retries times after
// transient errors, and returns the rows it deleted; verb names the
// operation in errors.
func (cm committer) deleteInTx(ctx context.Context, jobID, verb string, retries int, del func(context.Context, pgx.Tx) (int64, error)) (int, error) {
	d := cm.d
	release, err := d.use(ctx)
	if err != nil {
		return 0, d.errorf("%s staged rows of job %s: %w", verb, jobID, err)
	}
	defer release()
	var n int64
	err = retry(ctx, retries, d.cfg.RetryBackoff, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, d.cfg.OpTimeout)
		defer cancel()
		return d.conns.withConn(ctx, func(conn *pgx.Conn) error {
			return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) (err error) {
				n, err = del(ctx, tx)
				return err
			})
		})
	})
	if err != nil {
		return 0, d.errorf("%s staged rows of job %s: %w", verb, jobID, classify(err))
	}
	return int(n), nil
}
