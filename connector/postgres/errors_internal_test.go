package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ingest-engine/ingest/runtime"
)

// The classification of errors.go, class by class and phase by phase, as the
// package doc's table states it. (#12 item 11)
func TestErrorClasses(t *testing.T) {
	pg := func(code string) error {
		return fmt.Errorf("inserting: %w", &pgconn.PgError{Code: code, Message: "m"})
	}
	for _, c := range []struct {
		err          error
		setup, after errClass
	}{
		{pg("08006"), classRetry, classRetry},         // connection failure
		{pg("08001"), classRetry, classRetry},         // cannot connect
		{pg("40001"), classRetry, classRetry},         // serialization failure
		{pg("40P01"), classRetry, classRetry},         // deadlock
		{pg("40003"), classRetry, classRetry},         // completion unknown
		{pg("53100"), classRetry, classRetry},         // disk full
		{pg("53300"), classRetry, classRetry},         // too many connections
		{pg("55P03"), classRetry, classRetry},         // lock not available
		{pg("57P01"), classRetry, classRetry},         // admin shutdown
		{pg("57P03"), classRetry, classRetry},         // cannot connect now
		{pg("42P01"), classPermanent, classRestart},   // undefined table: a rename
		{pg("42703"), classPermanent, classRestart},   // undefined column
		{pg("42501"), classPermanent, classRestart},   // insufficient privilege
		{pg("42P10"), classPermanent, classRestart},   // no unique index for the upsert
		{pg("28P01"), classPermanent, classRestart},   // password
		{pg("3D000"), classPermanent, classRestart},   // no such database
		{pg("22001"), classPermanent, classPermanent}, // value too long
		{pg("23505"), classPermanent, classPermanent}, // unique violation
		{pg("40002"), classPermanent, classPermanent}, // constraint at commit
		{pg("57014"), classRestart, classRestart},     // query cancelled
		{pg("57P04"), classRestart, classRestart},     // database dropped
		{pg("XX000"), classRestart, classRestart},     // internal error
		{io.ErrUnexpectedEOF, classRetry, classRetry},
		{context.DeadlineExceeded, classRetry, classRetry},
		{errors.New("something else"), classRestart, classRestart},
	} {
		if got := classOf(c.err, atSetup); got != c.setup {
			t.Errorf("%v at setup: class %d, want %d", c.err, got, c.setup)
		}
		if got := classOf(c.err, afterSetup); got != c.after {
			t.Errorf("%v after setup: class %d, want %d", c.err, got, c.after)
		}
	}
	if retriable(context.Canceled) {
		t.Error("a cancelled operation is retried")
	}
}

// classify marks permanent errors unrecoverable, explains a schema error
// that a restart may cure, and never blames the checkpoint.
func TestClassifyMarks(t *testing.T) {
	undefined := &pgconn.PgError{Code: "42P01", Message: `relation "out" does not exist`}
	if err := classify(undefined); errors.Is(err, runtime.ErrUnrecoverable) || errors.Is(err, runtime.ErrIncompatible) ||
		!strings.Contains(err.Error(), "renamed or dropped") || !errors.As(err, new(*pgconn.PgError)) {
		t.Errorf("classify(42P01) = %v, want a restartable error saying the table may have been renamed", err)
	}
	if err := classifySetup(undefined); !errors.Is(err, runtime.ErrUnrecoverable) || errors.Is(err, runtime.ErrIncompatible) {
		t.Errorf("classifySetup(42P01) = %v, want ErrUnrecoverable", err)
	}
	if err := classify(&pgconn.PgError{Code: "22001"}); !errors.Is(err, runtime.ErrUnrecoverable) || errors.Is(err, runtime.ErrIncompatible) {
		t.Errorf("classify(22001) = %v, want ErrUnrecoverable", err)
	}
	if err := classify(io.EOF); err != io.EOF {
		t.Errorf("classify(EOF) = %v, want it unchanged", err)
	}
}
