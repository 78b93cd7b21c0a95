package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/ingest-engine/ingest/runtime"
	"github.com/jackc/pgx/v5/pgconn"
)

// ErrStagedOutputLost marks a commit whose staged rows are not all in the
// staging table, and whose checkpoint was not published: rows were deleted
// outside the protocol. The commit fails rather than publish part of a
// checkpoint; retrying cannot bring them back, so the error also wraps
// runtime.ErrUnrecoverable and stops the job (the checkpoint itself is
// sound: restoring an older one, with --allow-duplicates, replays the lost
// rows).
var ErrStagedOutputLost = errors.New("staged output lost")

// ErrPublishedDiffers marks a commit of a checkpoint that ingest_sink_progress
// records as published with other rows: the same checkpoint id named other
// output (the engine never reuses an id; this happens when its checkpoint
// ledger was deleted or replaced). The commit publishes nothing rather than
// take the record for its own and drop its rows; it wraps
// runtime.ErrUnrecoverable.
var ErrPublishedDiffers = errors.New("published output differs")

// Errors are classified the way franz-go's kerr marks Kafka errors
// retriable: by what they call for, decided by the SQLSTATE's class
// (PostgreSQL manual, Appendix A) and by whether the sink had set up and
// checked its tables yet.
//
//	class              SQLSTATE                                     at setup    afterwards
//	connection         08xxx, and network errors, EOF, timeouts     retry       retry
//	transaction        40001 serialization, 40P01 deadlock,         retry       retry
//	                   40003 completion unknown
//	resources          53xxx (disk full, out of memory,             retry       retry
//	                   too many connections), 55P03 lock timeout
//	shutdown           57P01 admin, 57P02 crash, 57P03 starting,    retry       retry
//	                   57P05 idle session timeout
//	schema, access     42xxx (undefined table or column, missing    permanent   restart
//	                   privilege, no unique index), 28xxx
//	                   authorization, 3D000 unknown database
//	data               22xxx data exception, 23xxx and 40002        permanent   permanent
//	                   constraint violations
//	anything else      57014 cancelled, 57P04 database dropped,     restart     restart
//	                   58xxx, XX internal errors, …
//
// retry: transient; the operation is retried in place (SinkConfig.CommitRetries,
// with backoff), then the task fails and the job restarts. restart: a
// restart can cure it once something outside the job is back (a table
// renamed for a migration, a privilege granted again): the task fails and
// the job restarts from its last checkpoint with its restart strategy, whose
// budget bounds the wait. permanent: the same records fail the same way on
// every replay, or the configuration does not fit the database: the error
// wraps runtime.ErrUnrecoverable and the job stops. Setup (creating and
// checking the tables, once per sink) treats schema and access errors as
// permanent: they are the configuration's, and the job has never worked.
type errClass int

const (
	classRetry errClass = iota
	classRestart
	classPermanent
)

// phase is when an error happened: during the sink's setup, or after it.
type phase int

const (
	atSetup phase = iota
	afterSetup
)

// classOf returns what err calls for in phase ph.
func classOf(err error, ph phase) errClass {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		c := pgErr.Code
		switch {
		case strings.HasPrefix(c, "08"), c == "40001", c == "40P01", c == "40003",
			strings.HasPrefix(c, "53"), c == "55P03",
			c == "57P01", c == "57P02", c == "57P03", c == "57P05":
			return classRetry
		case strings.HasPrefix(c, "22"), strings.HasPrefix(c, "23"), c == "40002":
			return classPermanent
		case strings.HasPrefix(c, "42"), strings.HasPrefix(c, "28"), c == "3D000":
			if ph == atSetup {
				return classPermanent
			}
			return classRestart
		}
		return classRestart
	}
	var netErr net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.As(err, &netErr) || pgconn.SafeToRetry(err) || pgconn.Timeout(err) {
		return classRetry
	}
	return classRestart
}

// retriable reports whether err is transient, to be retried in place. A
// cancelled operation is not: its caller gave up.
func retriable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	return classOf(err, afterSetup) == classRetry
}

// describePg adds what a server error says beyond its message: detail, hint,
// where (for COPY the line and column), constraint.
func describePg(err error) string {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return ""
	}
	var parts []string
	for _, f := range []struct{ name, v string }{
		{"detail", pgErr.Detail}, {"hint", pgErr.Hint}, {"where", pgErr.Where}, {"constraint", pgErr.ConstraintName},
	} {
		if f.v != "" {
			parts = append(parts, f.name+": "+f.v)
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, "; ") + ")"
}

// classify marks err, an error of the sink's work after its setup, with
// what it calls for (see errClass): a permanent error wraps
// runtime.ErrUnrecoverable, so that the job stops instead of restarting into
// it; a schema or access error says that the job restarts until the table is
// back. The checkpoint is never blamed: a destination error is not
// runtime.ErrIncompatible.
func classify(err error) error { return classifyIn(err, afterSetup) }

// classifySetup is classify for errors of the sink's setup.
func classifySetup(err error) error { return classifyIn(err, atSetup) }

func classifyIn(err error, ph phase) error {
	if err == nil {
		return nil
	}
	switch classOf(err, ph) {
	case classPermanent:
		return fmt.Errorf("%w (%w: the database refuses it the same way on every replay; a restart cannot cure this)", err, runtime.ErrUnrecoverable)
	case classRestart:
		if c := code(err); strings.HasPrefix(c, "42") || strings.HasPrefix(c, "28") || c == "3D000" {
			return fmt.Errorf("%w (the database changed since the sink checked its tables at start: a table renamed or dropped, "+
				"a column, index or privilege removed? the job restarts from its last checkpoint until it is back, within restart.give_up_after)", err)
		}
	}
	return err
}

// retry runs op until it succeeds, fails with an error that is not
// retriable, or failed 1 + retries times, with a doubling backoff from
// first (capped at maxRetryBackoff) in between. It returns the last error.
func retry(ctx context.Context, retries int, first time.Duration, op func(ctx context.Context) error) error {
	wait := first
	for attempt := 0; ; attempt++ {
		err := op(ctx)
		if err == nil || attempt >= retries || !retriable(err) {
			if err != nil && attempt > 0 {
				err = fmt.Errorf("after %d attempts: %w", attempt+1, err)
			}
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (retry interrupted: %w)", err, ctx.Err())
		case <-t.C:
		}
		wait = min(2*wait, maxRetryBackoff)
	}
}
