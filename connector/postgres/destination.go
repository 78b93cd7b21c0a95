package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ingest-engine/ingest/runtime"
)

// destination is the untyped part of a sink that its subtasks and its
// committer share: configuration, SQL, its connections and the one-time
// schema setup.
type destination struct {
	cfg     SinkConfig
	columns []Column
	target  table
	staging table
	sql     statements
	conns   *connections
	redact  redactor
	// keyIndex are the positions of the key columns in columns (upsert).
	keyIndex []int

	// setupMu guards ready; setup runs until it succeeds once.
	setupMu sync.Mutex
	ready   bool
}

// setupLockKey is the advisory lock that serialises the sinks' CREATE TABLE
// IF NOT EXISTS statements, which can fail when run concurrently for one
// table ("duplicate key value violates unique constraint pg_type_…").
const setupLockKey = 0x696e67657374 // "ingest"

// errorf formats an error naming the sink's table and redacts the DSN's
// password from it.
func (d *destination) errorf(format string, args ...any) error {
	return d.redact.wrap(fmt.Errorf("postgres sink %s: "+format, append([]any{d.target}, args...)...))
}

// use marks the sink in use (see connections) and makes sure the tables
// exist and fit. release must be called once when done. The error is not
// yet prefixed nor redacted: callers wrap it with errorf.
func (d *destination) use(ctx context.Context) (release func(), err error) {
	release = d.conns.hold()
	if err := d.ensure(ctx); err != nil {
		release()
		return nil, err
	}
	return release, nil
}

// ensure creates the control tables, the staging table and (CreateTable) the
// target, then checks the target has the columns and, in upsert mode, a
// unique index the publishing statement can use. It runs once per sink.
func (d *destination) ensure(ctx context.Context) error {
	d.setupMu.Lock()
	defer d.setupMu.Unlock()
	if d.ready {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, d.cfg.OpTimeout)
	defer cancel()
	err := retry(ctx, d.cfg.CommitRetries, d.cfg.RetryBackoff, func(ctx context.Context) error {
		return d.conns.withConn(ctx, func(conn *pgx.Conn) error {
			if err := d.createTables(ctx, conn); err != nil {
				return err
			}
			return d.checkTables(ctx, conn)
		})
	})
	if err != nil {
		return fmt.Errorf("setting up the tables: %w", classifySetup(err))
	}
	d.ready = true
	return nil
}

// createTables runs the CREATE TABLE IF NOT EXISTS statements in one
// transaction.
func (d *destination) createTables(ctx context.Context, conn *pgx.Conn) error {
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(setupLockKey)); err != nil {
			return err
		}
		for _, stmt := range d.sql.setup {
			if _, err := tx.Exec(ctx, stmt); err != nil {
				return fmt.Errorf("%w%s; statement: %s", err, describePg(err), firstLine(stmt))
			}
		}
		return d.claimStaging(ctx, tx)
	})
	if err != nil {
		return fmt.Errorf("creating the sink's tables: %w", err)
	}
	return nil
}

// claimStaging marks the staging table with the writers table its rows'
// writers are registered in, or checks the mark: a recovery deletes the
// staged rows of writers its writers table does not know, so two sinks
// registering writers in different control schemas must not share a staging
// table (each would take the other's rows for abandoned). It runs under the
// setup lock.
func (d *destination) claimStaging(ctx context.Context, tx pgx.Tx) error {
	mark := "ingest: staged rows of writers registered in " + d.sql.writers
	var got *string
	if err := tx.QueryRow(ctx, "SELECT obj_description($1::regclass, 'pg_class')", d.staging.String()).Scan(&got); err != nil {
		return fmt.Errorf("reading the mark of staging table %s: %w", d.staging, err)
	}
	switch {
	case got == nil:
		if _, err := tx.Exec(ctx, fmt.Sprintf("COMMENT ON TABLE %s IS %s", d.staging, quoteLiteral(mark))); err != nil {
			return fmt.Errorf("marking staging table %s: %w", d.staging, err)
		}
	case *got != mark:
		return fmt.Errorf("staging table %s is used by sinks whose writers are registered elsewhere (%q), this sink registers them in %s: each would take the other's staged rows for abandoned; set staging_table to a table of its own, or use the same control schema (%w)",
			d.staging, *got, d.sql.writers, runtime.ErrUnrecoverable)
	}
	return nil
}

// quoteLiteral quotes s as an SQL string literal.
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// checkTables checks the target and staging tables have the columns and the
// publishing statement can be planned.
func (d *destination) checkTables(ctx context.Context, conn *pgx.Conn) error {
	if _, err := conn.Exec(ctx, d.sql.checkCols); err != nil {
		switch code(err) {
		case "42P01":
			err = fmt.Errorf("table %s does not exist: create it or set create_table (%w)", d.target, err)
		case "42703":
			err = fmt.Errorf("table %s lacks a column the sink writes %q (%w)", d.target, names(d.columns), err)
		}
		return fmt.Errorf("checking the target table: %w", err)
	}
	if _, err := conn.Exec(ctx, d.sql.checkStage); err != nil {
		if code(err) == "42703" {
			err = fmt.Errorf("staging table %s was created for other columns than %q; it holds no published rows: drop it once no job has rows staged in it, or set staging_table (%w)",
				d.staging, names(d.columns), err)
		}
		return fmt.Errorf("checking the staging table: %w", err)
	}
	// Planning the publishing statement checks what only the target table
	// can tell: column types that accept the staged ones, and in upsert mode
	// a unique index on exactly the key columns.
	if _, err := conn.Exec(ctx, "EXPLAIN "+d.sql.publish, []int64{}, []int32{}, []int64{}, []int64{}, []int64{}); err != nil {
		if code(err) == "42P10" {
			err = fmt.Errorf("table %s has no primary key or unique index on exactly the key columns %q, which upserts need (%w)", d.target, d.cfg.Key, err)
		} else {
			err = fmt.Errorf("%w%s", err, describePg(err))
		}
		return fmt.Errorf("checking that staged rows can be published: %w", err)
	}
	return nil
}

// code returns the SQLSTATE of a server error, "" for other errors.
func code(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
