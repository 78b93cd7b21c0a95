package postgres

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// defaultConnectTimeout bounds a connection attempt when the DSN sets no
// connect_timeout, so an unreachable server fails an operation instead of
// hanging on the operating system's TCP timeout.
const defaultConnectTimeout = 10 * time.Second

// connections opens the sink's connections: one per sink subtask, held
// while it is open (its copies run one at a time), and one for the
// committer, kept between commits while the sink is in use. The committer's
// connection is closed when the last user releases the sink, so a sink
// leaves no connection behind once its job has ended and needs no Close.
//
// (pgx's pool, pgxpool, needs github.com/jackc/puddle/v2, which go.sum does
// not list; one connection per subtask is all the sink needs anyway.)
type connections struct {
	cfg *pgx.ConnConfig

	mu sync.Mutex
	// users counts hold calls not yet released.
	users int
	// idle is the committer's connection between two uses; nil when none.
	// INVARIANT: idle == nil when users == 0.
	idle *pgx.Conn
}

func newConnections(cfg *pgx.ConnConfig, pipeline string) *connections {
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = defaultConnectTimeout
	}
	if _, ok := cfg.RuntimeParams["application_name"]; !ok {
		cfg.RuntimeParams["application_name"] = "ingest " + pipeline
	}
	return &connections{cfg: cfg}
}

// connect opens a new connection.
func (c *connections) connect(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, c.cfg)
	if err != nil {
		return nil, fmt.Errorf("connecting: %w", err)
	}
	return conn, nil
}

// hold marks the sink in use until release is called (exactly once).
func (c *connections) hold() (release func()) {
	c.mu.Lock()
	c.users++
	c.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			c.users--
			var idle *pgx.Conn
			if c.users == 0 {
				idle, c.idle = c.idle, nil
			}
			c.mu.Unlock()
			if idle != nil {
				closeConn(idle)
			}
		})
	}
}

// take returns the idle connection, or a new one. The caller holds the sink
// and gives the connection back with put.
func (c *connections) take(ctx context.Context) (*pgx.Conn, error) {
	c.mu.Lock()
	conn := c.idle
	c.idle = nil
	c.mu.Unlock()
	if conn != nil && !conn.IsClosed() {
		return conn, nil
	}
	return c.connect(ctx)
}

// put keeps conn as the idle connection when it is healthy and not in a
// transaction, else closes it.
func (c *connections) put(conn *pgx.Conn) {
	if conn == nil {
		return
	}
	if conn.IsClosed() || conn.PgConn().TxStatus() != 'I' {
		closeConn(conn)
		return
	}
	c.mu.Lock()
	if c.idle == nil && c.users > 0 {
		c.idle, conn = conn, nil
	}
	c.mu.Unlock()
	if conn != nil {
		closeConn(conn)
	}
}

// closeConn closes conn, waiting at most a second for the server to hear.
func closeConn(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = conn.Close(ctx)
}

// withConn runs f on a connection taken for it, and gives it back.
func (c *connections) withConn(ctx context.Context, f func(*pgx.Conn) error) error {
	conn, err := c.take(ctx)
	if err != nil {
		return err
	}
	defer c.put(conn)
	return f(conn)
}
