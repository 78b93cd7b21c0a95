package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// copier copies a writer's chunks of rows into the staging table on its own
// goroutine, in order, so the task goroutine keeps processing while a chunk
// is on its way. Each chunk is one COPY, its own transaction: when the COPY
// returns the chunk's rows are durable, and a failed COPY leaves none.
//
// The task goroutine hands chunks over with send (blocking while one chunk
// waits and one is being copied: backpressure) and waits for all of them with
// sync. After the first error every later chunk is dropped and sync and err
// report that error: the writer fails and the job replays from the last
// checkpoint.
type copier struct {
	d      *destination
	writer int64
	log    *slog.Logger
	// conn is the writer's connection, used by the copier goroutine only;
	// reopened when an error closed it.
	conn *pgx.Conn

	ctx    context.Context // cancelled by close: an in-flight COPY is aborted
	cancel context.CancelFunc
	in     chan copyJob
	free   chan []any // buffers of copied chunks, for reuse
	done   chan struct{}

	mu     sync.Mutex
	failed error // the first error; guarded by mu

	// lastBeat is when the writer's active_at was last refreshed; copier
	// goroutine only.
	lastBeat time.Time
}

// copyJob is a chunk of rows, or a sync request when sync is set.
type copyJob struct {
	// vals holds rows x width values: writer id, sequence, then the columns.
	vals  []any
	rows  int
	first int64 // sequence number of the first row, for messages
	sync  chan error
}

func newCopier(d *destination, conn *pgx.Conn, writer int64, log *slog.Logger) *copier {
	ctx, cancel := context.WithCancel(context.Background())
	c := &copier{
		d: d, conn: conn, writer: writer, log: log, ctx: ctx, cancel: cancel,
		in: make(chan copyJob, 1), free: make(chan []any, 2), done: make(chan struct{}),
		lastBeat: time.Now(), // registration just set active_at
	}
	go c.loop()
	return c
}

func (c *copier) loop() {
	defer close(c.done)
	defer func() {
		if c.conn != nil {
			closeConn(c.conn)
		}
	}()
	// The writer refreshes active_at on a timer too, so it does not look
	// stale to another job's cleanup when checkpoints are far apart (an
	// interval of 0, checkpoints failing for hours).
	beat := time.NewTicker(heartbeatEvery())
	defer beat.Stop()
	for {
		var j copyJob
		select {
		case <-beat.C:
			if c.err() == nil && time.Since(c.lastBeat) >= heartbeatEvery() {
				c.heartbeat()
			}
			continue
		case job, ok := <-c.in:
			if !ok {
				return
			}
			j = job
		}
		if j.sync != nil {
			if c.err() == nil && time.Since(c.lastBeat) >= heartbeatEvery() {
				c.heartbeat()
			}
			j.sync <- c.err()
			continue
		}
		if c.err() == nil {
			if err := c.copy(j); err != nil {
				c.mu.Lock()
				c.failed = err
				c.mu.Unlock()
			}
		}
		clear(j.vals) // let the values be collected
		select {
		case c.free <- j.vals[:0]:
		default:
		}
	}
}

// err returns the first copy error.
func (c *copier) err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.failed
}

// send queues a chunk; the copier owns vals from then on.
func (c *copier) send(vals []any, rows int, first int64) {
	c.in <- copyJob{vals: vals, rows: rows, first: first}
}

// buffer returns an empty buffer for the next chunk.
func (c *copier) buffer(capacity int) []any {
	select {
	case b := <-c.free:
		return b
	default:
		return make([]any, 0, capacity)
	}
}

// sync waits until every chunk sent before is copied and returns the first
// error.
func (c *copier) sync() error {
	ch := make(chan error, 1)
	c.in <- copyJob{sync: ch}
	return <-ch
}

// close aborts what is in flight and waits for the goroutine to end.
func (c *copier) close() {
	c.cancel()
	close(c.in)
	<-c.done
}

// copy copies one chunk, retrying transient errors. A retry that finds the
// chunk's first key taken (unique violation on the staging table's primary
// key, which only this writer's rows can have) knows the previous attempt
// committed even though its answer was lost: COPY is all or nothing.
func (c *copier) copy(j copyJob) error {
	d := c.d
	attempts := 0
	err := retry(c.ctx, d.cfg.CommitRetries, d.cfg.RetryBackoff, func(ctx context.Context) error {
		attempts++
		ctx, cancel := context.WithTimeout(ctx, d.cfg.OpTimeout)
		defer cancel()
		conn, err := c.connection(ctx)
		if err != nil {
			return err
		}
		n, err := conn.CopyFrom(ctx, d.sql.stagingIdent, d.sql.copyColumns, &chunkSource{vals: j.vals, width: len(d.sql.copyColumns), rows: j.rows})
		if err != nil && attempts > 1 && code(err) == "23505" {
			return nil
		}
		if err == nil && n != int64(j.rows) {
			return fmt.Errorf("COPY reported %d rows, %d were sent", n, j.rows)
		}
		return err
	})
	if err != nil {
		return d.errorf("staging rows %d to %d of writer %d in %s: %w%s", j.first, j.first+int64(j.rows)-1, c.writer, d.staging, classify(err), describePg(err))
	}
	return nil
}

// heartbeat refreshes the writer's active_at, which keeps another job's
// Abandon and Sweep from taking its staged rows for stale. It is best
// effort: a failure is logged and retried at the next sync or tick. A
// writer that is no longer registered (another job took it for stale and
// deleted its staged rows) fails: its staged rows are gone, so the job must
// replay from its last checkpoint.
func (c *copier) heartbeat() {
	ctx, cancel := context.WithTimeout(c.ctx, c.d.cfg.OpTimeout)
	defer cancel()
	conn, err := c.connection(ctx)
	if err == nil {
		var tag pgconn.CommandTag
		tag, err = conn.Exec(ctx, c.d.sql.heartbeat, c.writer)
		if err == nil && tag.RowsAffected() == 0 {
			c.mu.Lock()
			if c.failed == nil {
				c.failed = c.d.errorf("writer %d is no longer registered in %s: another job's cleanup took it for stale (silent for StaleAfter) and deleted its staged rows: %w",
					c.writer, c.d.sql.writers, ErrStagedOutputLost)
			}
			c.mu.Unlock()
			return
		}
	}
	if err != nil {
		c.log.Warn("postgres sink: refreshing the writer's active_at failed; retried at the next checkpoint", "writer", c.writer, "err", c.d.redact.wrap(err))
		return
	}
	c.lastBeat = time.Now()
}

// connection returns the writer's connection, reconnecting when an error
// (or a cancelled copy) closed it.
func (c *copier) connection(ctx context.Context) (*pgx.Conn, error) {
	if c.conn != nil && !c.conn.IsClosed() {
		return c.conn, nil
	}
	if c.conn != nil {
		closeConn(c.conn)
		c.conn = nil
	}
	conn, err := c.d.conns.connect(ctx)
	if err != nil {
		return nil, err
	}
	c.conn = conn
	return conn, nil
}

// chunkSource feeds one chunk to COPY.
type chunkSource struct {
	vals        []any
	width, rows int
	i           int // rows returned so far
}

func (s *chunkSource) Next() bool {
	if s.i >= s.rows {
		return false
	}
	s.i++
	return true
}

func (s *chunkSource) Values() ([]any, error) {
	k := (s.i - 1) * s.width
	return s.vals[k : k+s.width], nil
}

func (s *chunkSource) Err() error { return nil }
