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
// runtime.ErrIncompatible and stops the job.
var ErrStagedOutputLost = errors.New("staged output lost")

// retriable reports whether err is transient: the connection broke, the
// server is restarting or out of resources, or the transaction lost a
// serialization conflict or deadlock. Retrying a whole operation is safe: a
// COPY chunk or a commit transaction either committed or left nothing.
func retriable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case strings.HasPrefix(pgErr.Code, "08"), // connection exception
			strings.HasPrefix(pgErr.Code, "40"),                                 // serialization failure, deadlock
			strings.HasPrefix(pgErr.Code, "53"),                                 // insufficient resources
			pgErr.Code == "55P03",                                               // lock not available
			pgErr.Code == "57P01", pgErr.Code == "57P02", pgErr.Code == "57P03": // shutdown, crash, cannot connect now
			return true
		}
		return false
	}
	var netErr net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.As(err, &netErr) || pgconn.SafeToRetry(err) || pgconn.Timeout(err)
}

// permanent reports whether err is a server error no retry or restart can
// cure: the data or the schema is wrong (class 22 data exception, 23
// integrity constraint violation, 42 syntax error or access rule violation:
// an undefined or mistyped column, a missing privilege).
func permanent(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	if len(pgErr.Code) < 2 {
		return false
	}
	switch pgErr.Code[:2] {
	case "22", "23", "42":
		return true
	}
	return false
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

// classify wraps a permanent server error with runtime.ErrIncompatible so the
// job stops at once instead of restarting into the same error.
func classify(err error) error {
	if permanent(err) {
		return fmt.Errorf("%w (%w: a restart cannot cure this)", err, runtime.ErrIncompatible)
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
