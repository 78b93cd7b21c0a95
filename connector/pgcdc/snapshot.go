package pgcdc

import (
	"context"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
)

// This file reads a snapshot's chunks ahead of the reader: up to
// Config.SnapshotParallelism tables at once, each on a connection of its
// own that imported the snapshot, each table's chunks in key order. The
// reader emits the chunks as they arrive, one per read, and alone records
// what was emitted in the position: a chunk read ahead but not emitted when
// the job fails is read again, under the restored position, by the next
// snapshot.

// chunk is one snapshot query's result: table's rows after the key the
// query started from, each column's text (nil: NULL).
type chunk struct {
	table int
	rows  [][]*string
	// last is the last row's key columns, nil for no row.
	last []string
	err  error
}

// fetcher runs the snapshot's readers ahead of the reader.
type fetcher struct {
	cancel context.CancelFunc
	// chunks delivers the chunks, in key order per table.
	chunks chan chunk
	wg     sync.WaitGroup
}

// startFetcher starts one goroutine per connection of conns, which have
// imported the snapshot: together they read the tables of todo (their
// index and the key to start after, nil: from the start), a table at a
// time each, in chunks of chunkRows rows, until a chunk is short.
func startFetcher(tables []*Table, todo []int, after [][]string, conns []*pgx.Conn, chunkRows int) *fetcher {
	ctx, cancel := context.WithCancel(context.Background())
	// One chunk waits while the reader emits another and each connection
	// reads one: at most len(conns) + 2 chunks are in memory.
	f := &fetcher{cancel: cancel, chunks: make(chan chunk, 1)}
	queue := make(chan int, len(todo))
	starts := map[int][]string{}
	for i, ti := range todo {
		queue <- ti
		starts[ti] = after[i]
	}
	close(queue)
	for _, conn := range conns {
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			// A connection whose tables are read leaves the snapshot at
			// once: none stays idle in its transaction.
			defer conn.Close(context.Background())
			defer func() {
				if p := recover(); p != nil {
					select {
					case f.chunks <- chunk{err: fmt.Errorf("snapshot reader: panic: %v", p)}:
					case <-ctx.Done():
					}
				}
			}()
			for ti := range queue {
				if !f.table(ctx, conn, tables[ti], ti, starts[ti], chunkRows) {
					return
				}
			}
		}()
	}
	return f
}

// table reads table t's chunks after key from, sending each; false when
// the fetcher stopped or a query failed (the error sent).
func (f *fetcher) table(ctx context.Context, conn *pgx.Conn, t *Table, ti int, from []string, chunkRows int) bool {
	for {
		c := f.read(ctx, conn, t, ti, from, chunkRows)
		select {
		case f.chunks <- c:
		case <-ctx.Done():
			return false
		}
		if c.err != nil {
			return false
		}
		if len(c.rows) < chunkRows {
			return true
		}
		from = c.last
	}
}

// read runs one chunk query.
func (f *fetcher) read(ctx context.Context, conn *pgx.Conn, t *Table, ti int, from []string, chunkRows int) chunk {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	c := chunk{table: ti}
	q, args := chunkQuery(t, from, chunkRows)
	// Every column in text form, from the types' output functions as
	// pgoutput sends them (a ::text cast differs: true for t, inet's /32).
	rows, err := conn.Query(ctx, q, append([]any{pgx.QueryResultFormats{pgx.TextFormatCode}}, args...)...)
	if err != nil {
		c.err = fmt.Errorf("snapshot of %s: %w", t.Qualified(), err)
		return c
	}
	defer rows.Close()
	for rows.Next() {
		raw := rows.RawValues()
		if len(raw) != len(t.Columns) {
			c.err = fmt.Errorf("snapshot of %s: %d columns for the %d planned", t.Qualified(), len(raw), len(t.Columns))
			return c
		}
		text := make([]*string, len(raw))
		for i, b := range raw {
			if b != nil {
				v := string(b)
				text[i] = &v
			}
		}
		c.rows = append(c.rows, text)
	}
	if err := rows.Err(); err != nil {
		c.err = fmt.Errorf("snapshot of %s: %w", t.Qualified(), err)
		return c
	}
	if n := len(c.rows); n > 0 {
		for _, k := range t.Key {
			c.last = append(c.last, *c.rows[n-1][k])
		}
	}
	return c
}

// stop stops the goroutines, which close their connections (ending the
// snapshot's transactions).
func (f *fetcher) stop() {
	f.cancel()
	f.wg.Wait()
}
