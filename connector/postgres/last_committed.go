package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// LastCommitted returns the newest checkpoint of job jobID that sink (the
// sink's node id) published, 0 if none (runtime.CommitTracker): the
// publishing transaction records each checkpoint in ingest_sink_progress
// together with the rows, and pruning keeps the newest ProgressHistory rows,
// so the newest row is always there. Recovery asks before it falls back past
// a damaged checkpoint.
func (cm committer) LastCommitted(ctx context.Context, jobID, sink string) (int64, error) {
	d := cm.d
	release, err := d.use(ctx)
	if err != nil {
		return 0, d.errorf("reading the newest published checkpoint of job %s: %w", jobID, err)
	}
	defer release()
	var last int64
	err = retry(ctx, d.cfg.CommitRetries, d.cfg.RetryBackoff, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, d.cfg.OpTimeout)
		defer cancel()
		return d.conns.withConn(ctx, func(conn *pgx.Conn) error {
			return conn.QueryRow(ctx, d.sql.maxProgress, d.cfg.Pipeline, sink, jobID).Scan(&last)
		})
	})
	if err != nil {
		return 0, d.errorf("reading the newest published checkpoint of job %s from %s: %w", jobID, d.sql.progress, classify(err))
	}
	return last, nil
}
