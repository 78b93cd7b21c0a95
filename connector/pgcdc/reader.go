package pgcdc

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/ingest-engine/ingest/internal/failpoint"
	"github.com/ingest-engine/ingest/row"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/watermark"
)

// ErrSlotLost marks a replication slot that no longer holds the changes a
// checkpoint needs: dropped, invalidated by the server, or confirmed past
// the checkpoint. The job stops; it never restarts from "now".
var ErrSlotLost = errors.New("replication slot lost")

// ErrIncompatibleSchema marks a captured table whose columns changed in a
// way the records cannot follow: a column dropped or changed to another
// kind of value.
var ErrIncompatibleSchema = errors.New("incompatible schema change")

// unrecoverable marks err as a failure no restart cures (the same on every
// replay, or needing an operator): the job stops at once.
func unrecoverable(err error) error { return permanentError{err} }

type permanentError struct{ err error }

func (e permanentError) Error() string   { return e.err.Error() }
func (e permanentError) Unwrap() []error { return []error{e.err, runtime.ErrUnrecoverable} }

// errUnsent marks a column value an update did not send: an unchanged
// TOASTed value, unless the replica identity is full.
var errUnsent = errors.New("the value was not sent (an unchanged TOASTed value)")

// opTimeout bounds each setup statement and snapshot chunk query.
const opTimeout = 5 * time.Minute

// reader is the source's subtask: it snapshots the tables not yet read,
// chunk by chunk, then streams the slot's transactions, one whole
// transaction per read at least, so a barrier never splits one.
type reader struct {
	src *Source
	cfg *Config
	out runtime.Emitter[row.Row]
	log *slog.Logger

	// sql is the regular connection: setup, then the snapshot's
	// transaction.
	sql *pgx.Conn
	// repl is the replication connection while streaming.
	repl *pgconn.PgConn

	pos position
	// byTable finds a table's index by OID; byRel by the
	// relation ID the stream announced (relations).
	byTable map[uint32]int
	byRel   map[uint32]*relation

	// The snapshot in progress: its LSN and time, and whether its
	// transaction is open.
	snapLSN  pglogrepl.LSN
	snapTime time.Time
	snapOpen bool
	// fetch reads the snapshot's chunks ahead, while one is open.
	fetch *fetcher

	streaming bool
	// received is the last WAL position the server reported as sent;
	// confirmed is what the slot was confirmed to.
	received, confirmed pglogrepl.LSN
	nextStatus          time.Time
	// ends maps a checkpoint id to its position's End (PositionAt), until
	// the checkpoint completes.
	ends map[int64]pglogrepl.LSN

	wm        *watermark.Tracker
	exhausted bool
	batch     runtime.Batch[row.Row]
}

// relation is a table as the stream describes it: where each of its
// columns goes in a record (-1: a column added after the plan, not read).
type relation struct {
	table *Table
	index int
	// field maps the relation's column i to the table's column (-1: not
	// planned).
	column []int
}

func (r *reader) Open(ctx *runtime.Context, out runtime.Emitter[row.Row]) error {
	r.cfg = &r.src.cfg
	r.out = out
	r.log = ctx.Log
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	if ctx.Parallelism > 1 {
		return r.fail(fmt.Errorf("parallelism %d: %w: a replication slot is read by one subtask", ctx.Parallelism, runtime.ErrIncompatible))
	}
	r.byTable = map[uint32]int{}
	for i, t := range r.src.tables {
		r.byTable[t.OID] = i
	}
	r.byRel = map[uint32]*relation{}
	r.ends = map[int64]pglogrepl.LSN{}
	r.wm = watermark.NewTracker(r.cfg.Watermark)
	r.wm.AddSplit(time.Now().UnixNano())
	var restored *position
	if ctx.Restored != nil && len(ctx.Restored.Inline) > 0 {
		p, err := decodePosition(ctx.Restored.Inline, r.cfg.Slot, r.src.tables)
		if err != nil {
			return r.fail(err)
		}
		restored = &p
	}
	c, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	conn, err := connectSQL(c, r.cfg.DSN)
	if err != nil {
		return r.fail(err)
	}
	r.sql = conn
	if err := r.checkTables(c); err != nil {
		return r.fail(err)
	}
	if err := r.ensurePublication(c); err != nil {
		return r.fail(err)
	}
	if err := r.ensureSlot(c, restored); err != nil {
		return r.fail(err)
	}
	if restored != nil {
		r.pos = *restored
		if r.pos.MaxTime != nil {
			r.wm.Observe(0, *r.pos.MaxTime)
		}
	} else {
		r.pos = position{Slot: r.cfg.Slot}
	}
	// Tables no longer captured leave the position; new ones get a
	// snapshot of their own.
	tables, oids := map[string][]*segment{}, map[string]uint32{}
	for _, t := range r.src.tables {
		name := t.Qualified()
		if was, ok := r.pos.OIDs[name]; ok && was != t.OID && len(r.pos.Tables[name]) > 0 {
			return r.fail(unrecoverable(fmt.Errorf("table %s was dropped and created again since the checkpoint (OID %d, now %d): its rows are not the ones the checkpoint read%s", name, was, t.OID, rebuild)))
		}
		tables[name], oids[name] = r.pos.Tables[name], t.OID
	}
	r.pos.Tables, r.pos.OIDs = tables, oids
	// stop_at latest ends at the server's position at the job's first
	// start, kept across restarts.
	if !r.cfg.StopAtLatest {
		r.pos.Stop = 0
	} else if r.pos.Stop == 0 {
		if r.pos.Stop, err = r.stopPosition(c); err != nil {
			return r.fail(err)
		}
	}
	r.confirmed = r.pos.End
	return nil
}

func (r *reader) fail(err error) error { return r.src.fail(err) }

// stopPosition is where stop_at latest ends: a WAL record written now,
// after the commit of every transaction visible now, even one committed
// asynchronously and not yet flushed. A transactional logical decoding
// message's commit is flushed, and the stream passes the message once it
// has sent everything before it. Without the right to write one (superuser,
// or EXECUTE granted), the insert position is used.
func (r *reader) stopPosition(ctx context.Context) (pglogrepl.LSN, error) {
	var s string
	err := r.sql.QueryRow(ctx, "SELECT pg_logical_emit_message(true, 'ingest', 'stop_at latest')::text").Scan(&s)
	if err != nil {
		r.log.Info("postgres_cdc: cannot write a WAL message for stop_at latest; ending at the insert position", "err", err)
		if err := r.sql.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&s); err != nil {
			return 0, fmt.Errorf("reading the server's WAL position: %w", err)
		}
	}
	return pglogrepl.ParseLSN(s)
}

// stopAt is where the stream ends under stop_at latest (0: never): at Stop,
// or at the newest snapshot's point when that is later. A transaction
// between Stop and that point may touch keys of an older snapshot (the old
// half of a key change): ending at Stop would drop it, while the newer
// snapshot holds the other half.
func (r *reader) stopAt() pglogrepl.LSN {
	if r.pos.Stop == 0 {
		return 0
	}
	at := r.pos.Stop
	for _, segs := range r.pos.Tables {
		for _, s := range segs {
			at = max(at, s.LSN)
		}
	}
	return at
}

// checkTables compares the tables' columns now with the plan's.
func (r *reader) checkTables(ctx context.Context) error {
	now, err := describe(ctx, r.sql, tableNames(r.src.tables), nil)
	if err != nil {
		return err
	}
	for i, t := range now {
		planned := r.src.tables[i]
		if t.OID != planned.OID {
			return unrecoverable(fmt.Errorf("table %s was dropped and created again since the pipeline was loaded: load it again", t.Qualified()))
		}
		var column []int
		if err := compatible(planned, t.Columns, func(j int) string { return t.Columns[j].Name }, func(j int) uint32 { return t.Columns[j].OID }, &column, nil); err != nil {
			return err
		}
		if err := added(planned, column, func(j int) string { return t.Columns[j].Name }); err != nil {
			return err
		}
	}
	return nil
}

// ErrColumnAdded marks a column added to a captured table after the
// pipeline was loaded: the records have no field for it. Loading the
// pipeline again (restarting it) reads it, from the transaction that
// stopped the job on: nothing is lost.
var ErrColumnAdded = errors.New("column added")

// added stops on a column the plan does not have (column[j] < 0): its
// values would be missing from the records.
func added(t *Table, column []int, name func(int) string) error {
	for j, c := range column {
		if c < 0 {
			return unrecoverable(fmt.Errorf("table %s: %w: %s; start the pipeline again (ingest run) to read it: the changes from this point on are read again with it, and a target table needs the column too", t.Qualified(), ErrColumnAdded, name(j)))
		}
	}
	return nil
}

func tableNames(ts []*Table) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Qualified()
	}
	return out
}

// compatible checks that the columns a table has now (n of them, by name
// and type) still hold every planned column with values of the same kind,
// and returns in column (when not nil) where each current column is in the
// plan (-1 for one added since).
//
// absent, when not nil, may accept a planned column the description lacks.
func compatible[C any](t *Table, cols []C, name func(int) string, oid func(int) uint32, column *[]int, absent func(Column) (bool, error)) error {
	at := map[string]int{}
	for j := range cols {
		at[name(j)] = j
	}
	for _, c := range t.Columns {
		j, ok := at[c.Name]
		if !ok && absent != nil {
			accept, err := absent(c)
			if err != nil {
				return err
			}
			if accept {
				continue
			}
		}
		switch {
		case !ok:
			return unrecoverable(fmt.Errorf("table %s: %w: column %s was dropped or renamed since the pipeline was planned", t.Qualified(), ErrIncompatibleSchema, c.Name))
		case Kind(oid(j)) != c.Kind():
			return unrecoverable(fmt.Errorf("table %s: %w: column %s was %s (read as %v) and is now of type OID %d (read as %v)", t.Qualified(), ErrIncompatibleSchema, c.Name, c.Type, c.Kind(), oid(j), Kind(oid(j))))
		}
	}
	if column != nil {
		*column = make([]int, len(cols))
		for j := range cols {
			(*column)[j] = -1
			for i, c := range t.Columns {
				if c.Name == name(j) {
					(*column)[j] = i
				}
			}
		}
	}
	return nil
}

// ensurePublication creates the publication when missing and checks that
// it publishes every captured table and every kind of change: a change it
// leaves out would be missing from the output with nothing to tell.
func (r *reader) ensurePublication(ctx context.Context) error {
	pub := r.cfg.Publication
	var exists bool
	err := r.sql.QueryRow(ctx, "SELECT true FROM pg_publication WHERE pubname = $1", pub).Scan(&exists)
	if errors.Is(err, pgx.ErrNoRows) {
		quoted := make([]string, len(r.src.tables))
		for i, t := range r.src.tables {
			quoted[i] = t.quoted()
		}
		q := "CREATE PUBLICATION " + pgx.Identifier{pub}.Sanitize() + " FOR TABLE " + strings.Join(quoted, ", ")
		if _, err := r.sql.Exec(ctx, q); err != nil {
			return fmt.Errorf("creating publication %s: %w", pub, err)
		}
		r.log.Info("postgres_cdc: created publication", "publication", pub, "tables", tableNames(r.src.tables))
	} else if err != nil {
		return fmt.Errorf("reading publication %s: %w", pub, err)
	}
	return r.checkPublication(ctx)
}

// checkPublication checks that the publication publishes every kind of
// change of every captured table, whole.
func (r *reader) checkPublication(ctx context.Context) error {
	pub := r.cfg.Publication
	var ins, upd, del, trunc bool
	err := r.sql.QueryRow(ctx, "SELECT pubinsert, pubupdate, pubdelete, pubtruncate FROM pg_publication WHERE pubname = $1", pub).Scan(&ins, &upd, &del, &trunc)
	if errors.Is(err, pgx.ErrNoRows) {
		return unrecoverable(fmt.Errorf("publication %s was dropped while the pipeline read it: changes since may be missing%s", pub, rebuild))
	}
	if err != nil {
		return fmt.Errorf("reading publication %s: %w", pub, err)
	}
	if !ins || !upd || !del || !trunc {
		return unrecoverable(fmt.Errorf("publication %s does not publish every kind of change (insert %v, update %v, delete %v, truncate %v): the ones left out would be missing from the output; ALTER PUBLICATION %s SET (publish = 'insert, update, delete, truncate')", pub, ins, upd, del, trunc, pub))
	}
	return r.checkPublished(ctx)
}

// checkPublished checks that the publication publishes every captured
// table whole: every row (no row filter) and every column (PostgreSQL 15's
// row filters and column lists).
func (r *reader) checkPublished(ctx context.Context) error {
	pub := r.cfg.Publication
	q := "SELECT schemaname || '.' || tablename, true, NULL::text[] FROM pg_publication_tables WHERE pubname = $1"
	if major, _, _ := strings.Cut(r.sql.PgConn().ParameterStatus("server_version"), "."); len(major) > 1 && major >= "15" {
		q = "SELECT schemaname || '.' || tablename, rowfilter IS NULL, attnames::text[] FROM pg_publication_tables WHERE pubname = $1"
	}
	rows, err := r.sql.Query(ctx, q, pub)
	if err != nil {
		return fmt.Errorf("reading the tables of publication %s: %w", pub, err)
	}
	type published struct {
		all     bool
		columns []string
	}
	tables := map[string]published{}
	var name string
	var p published
	_, err = pgx.ForEachRow(rows, []any{&name, &p.all, &p.columns}, func() error {
		tables[name] = p
		return nil
	})
	if err != nil {
		return fmt.Errorf("reading the tables of publication %s: %w", pub, err)
	}
	for _, t := range r.src.tables {
		p, ok := tables[t.Qualified()]
		if !ok {
			return unrecoverable(fmt.Errorf("publication %s does not publish %s, so its changes would never arrive: ALTER PUBLICATION %s ADD TABLE %s", pub, t.Qualified(), pub, t.quoted()))
		}
		if !p.all {
			return unrecoverable(fmt.Errorf("publication %s publishes only the rows of %s its row filter (WHERE) keeps: the others' changes would never arrive; publish the table without a filter", pub, t.Qualified()))
		}
		for _, c := range t.Columns {
			if p.columns != nil && !contains(p.columns, c.Name) {
				// A column dropped or renamed leaves the publication's
				// list too: name that change, not a column list.
				if err := r.checkTables(ctx); err != nil {
					return err
				}
				return unrecoverable(fmt.Errorf("publication %s leaves column %s of %s out (a column list): its values would never arrive; publish the table without a column list", pub, c.Name, t.Qualified()))
			}
		}
	}
	return nil
}

// ensureSlot creates the slot when missing (and nothing was read from it
// before), and otherwise checks that it still holds every change after
// the restored position.
func (r *reader) ensureSlot(ctx context.Context, restored *position) error {
	slot := r.cfg.Slot
	var plugin, kind, walStatus, confirmed string
	var db *string
	err := r.sql.QueryRow(ctx, `SELECT plugin, slot_type, database::text, coalesce(wal_status, ''), coalesce(confirmed_flush_lsn::text, '')
		FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&plugin, &kind, &db, &walStatus, &confirmed)
	if errors.Is(err, pgx.ErrNoRows) {
		if restored != nil && restored.started() {
			return unrecoverable(fmt.Errorf("%w: slot %s does not exist (dropped?), so the changes after the checkpoint are gone%s", ErrSlotLost, slot, rebuild))
		}
		repl, err := connect(ctx, r.cfg.DSN, true)
		if err != nil {
			return fmt.Errorf("replication connection: %w", err)
		}
		defer repl.Close(context.Background())
		res, err := pglogrepl.CreateReplicationSlot(ctx, repl, slot, "pgoutput", pglogrepl.CreateReplicationSlotOptions{Mode: pglogrepl.LogicalReplication, SnapshotAction: "NOEXPORT_SNAPSHOT"})
		if err != nil {
			return fmt.Errorf("creating replication slot %s: %w", slot, err)
		}
		r.log.Info("postgres_cdc: created replication slot", "slot", slot, "consistent_point", res.ConsistentPoint)
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading replication slot %s: %w", slot, err)
	}
	var dbname string
	if err := r.sql.QueryRow(ctx, "SELECT current_database()").Scan(&dbname); err != nil {
		return err
	}
	switch {
	case kind != "logical" || plugin != "pgoutput":
		return unrecoverable(fmt.Errorf("slot %s is a %s slot of plugin %q, not a logical slot of pgoutput", slot, kind, plugin))
	case db == nil || *db != dbname:
		return unrecoverable(fmt.Errorf("slot %s belongs to another database than %s", slot, dbname))
	case walStatus == "lost":
		return unrecoverable(fmt.Errorf("%w: slot %s was invalidated by the server (wal_status lost: max_slot_wal_keep_size let the WAL it needed go)%s", ErrSlotLost, slot, rebuild))
	}
	if restored != nil && restored.started() && confirmed != "" {
		c, err := pglogrepl.ParseLSN(confirmed)
		if err != nil {
			return err
		}
		if need := restored.need(); c > need {
			return unrecoverable(fmt.Errorf("%w: slot %s is confirmed to %v, past the restored checkpoint's %v: the changes between them are gone (the checkpoint is older than the last one this slot served, or another consumer used or advanced the slot)%s", ErrSlotLost, slot, c, need, rebuild))
		}
	}
	return nil
}

// rebuild is the way out of a lost slot (13): a new snapshot inserts every
// row, but deletes nothing the target kept of rows deleted meanwhile.
const rebuild = "; to start over, empty the targets (truncate the replica tables, clear the changelog) and start the pipeline without its checkpoints, which takes a new snapshot"

// started says whether the position depends on the slot: a snapshot read
// under it, or a stream from it. Only a position that does not may take a
// new slot.
func (p *position) started() bool {
	if p.End != 0 {
		return true
	}
	for _, segs := range p.Tables {
		if len(segs) > 0 {
			return true
		}
	}
	return false
}

// need is the oldest WAL position the slot must still hold for the
// position: its End once it streamed, else the oldest snapshot's point.
func (p *position) need() pglogrepl.LSN {
	if p.End != 0 {
		return p.End
	}
	need := pglogrepl.LSN(0)
	for _, segs := range p.Tables {
		for _, s := range segs {
			if need == 0 || s.LSN < need {
				need = s.LSN
			}
		}
	}
	return need
}

// Read reads a snapshot chunk, or streams whole transactions.
func (r *reader) Read() (runtime.ReadResult, error) {
	if r.exhausted {
		return r.result(0), nil
	}
	if !r.streaming {
		if _, ok := r.nextSnapshotTable(); ok {
			if err := r.snapshotChunk(); err != nil {
				return runtime.ReadResult{}, r.fail(err)
			}
			return r.result(0), nil
		}
		if err := r.startStreaming(); err != nil {
			return runtime.ReadResult{}, r.fail(err)
		}
	}
	wait, err := r.stream()
	if err != nil {
		return runtime.ReadResult{}, r.fail(err)
	}
	return r.result(wait), nil
}

func (r *reader) result(wait time.Duration) runtime.ReadResult {
	res := runtime.ReadResult{Wait: wait, Exhausted: r.exhausted}
	res.Watermark, res.Idle = r.wm.Current(time.Now().UnixNano())
	return res
}

// nextSnapshotTable is the first table whose snapshot is not complete.
func (r *reader) nextSnapshotTable() (int, bool) {
	for i, t := range r.src.tables {
		if !done(r.pos.Tables[t.Qualified()]) {
			return i, true
		}
	}
	return 0, false
}

// beginSnapshot opens a transaction on the snapshot of a new temporary
// slot: it holds every transaction that committed before the slot's
// consistent point, and the permanent slot (created before it) holds every
// one after.
func (r *reader) beginSnapshot(ctx context.Context) error {
	repl, err := connect(ctx, r.cfg.DSN, true)
	if err != nil {
		return fmt.Errorf("replication connection for the snapshot: %w", err)
	}
	defer repl.Close(context.Background())
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	name := r.cfg.Slot + "_snap_" + hex.EncodeToString(suffix[:])
	res, err := pglogrepl.CreateReplicationSlot(ctx, repl, name, "pgoutput", pglogrepl.CreateReplicationSlotOptions{Temporary: true, Mode: pglogrepl.LogicalReplication, SnapshotAction: "EXPORT_SNAPSHOT"})
	if err != nil {
		return fmt.Errorf("creating the snapshot's temporary slot: %w", err)
	}
	if r.snapLSN, err = pglogrepl.ParseLSN(res.ConsistentPoint); err != nil {
		return err
	}
	if _, err := r.sql.Exec(ctx, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"); err != nil {
		return fmt.Errorf("beginning the snapshot: %w", err)
	}
	if _, err := r.sql.Exec(ctx, "SET TRANSACTION SNAPSHOT '"+res.SnapshotName+"'"); err != nil {
		return fmt.Errorf("importing snapshot %s: %w", res.SnapshotName, err)
	}
	if err := r.sql.QueryRow(ctx, "SELECT now()").Scan(&r.snapTime); err != nil {
		return fmt.Errorf("reading the snapshot's time: %w", err)
	}
	// The readers below hold the snapshot; this connection, needed again
	// by checkpoints' publication checks, leaves it (a session idle in a
	// transaction for the whole snapshot would meet the server's
	// idle_in_transaction_session_timeout).
	if _, err := r.sql.Exec(ctx, "COMMIT"); err != nil {
		return fmt.Errorf("beginning the snapshot: %w", err)
	}
	// The readers of the chunks: a connection per table read at once,
	// each importing the snapshot while its exporting slot's connection is
	// still open.
	var todo []int
	var after [][]string
	for i, t := range r.src.tables {
		if segs := r.pos.Tables[t.Qualified()]; !done(segs) {
			todo = append(todo, i)
			var from []string
			if len(segs) > 0 {
				from = segs[len(segs)-1].Upto
			}
			after = append(after, from)
		}
	}
	var conns []*pgx.Conn
	closeAll := func() {
		for _, c := range conns {
			_ = c.Close(context.Background())
		}
	}
	for range min(r.cfg.SnapshotParallelism, len(todo)) {
		c, err := connectSQL(ctx, r.cfg.DSN)
		if err != nil {
			closeAll()
			return fmt.Errorf("connection for the snapshot: %w", err)
		}
		conns = append(conns, c)
		if _, err := c.Exec(ctx, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"); err != nil {
			closeAll()
			return fmt.Errorf("beginning the snapshot: %w", err)
		}
		if _, err := c.Exec(ctx, "SET TRANSACTION SNAPSHOT '"+res.SnapshotName+"'"); err != nil {
			closeAll()
			return fmt.Errorf("importing snapshot %s: %w", res.SnapshotName, err)
		}
	}
	r.fetch = startFetcher(r.src.tables, todo, after, conns, r.cfg.ChunkRows)
	r.snapOpen = true
	r.log.Info("postgres_cdc: snapshot", "slot", r.cfg.Slot, "lsn", r.snapLSN.String())
	return nil
}

// snapshotChunk emits the next chunk the fetcher read, of any table, as
// inserts, and extends that table's segments; with none ready within
// idleWait it returns, so that barriers pass while a query runs.
func (r *reader) snapshotChunk() error {
	if !r.snapOpen {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		if err := r.beginSnapshot(ctx); err != nil {
			return err
		}
	}
	var c chunk
	select {
	case c = <-r.fetch.chunks:
	case <-time.After(idleWait):
		return nil
	}
	if c.err != nil {
		return c.err
	}
	// Once per chunk, before it is emitted (a failure drops it: the
	// restored position reads it again).
	if err := failpoint.Inject("source/postgres_cdc/snapshot-chunk"); err != nil {
		return err
	}
	ti := c.table
	t := r.src.tables[ti]
	segs := r.pos.Tables[t.Qualified()]
	lsn, ts := row.StringValue(r.snapLSN.String()), r.snapTime.UnixNano()
	for _, text := range c.rows {
		rec, err := r.record(ti, func(i int) (*string, bool) { return text[i], true }, "insert", lsn, ts)
		if err != nil {
			return unrecoverable(fmt.Errorf("snapshot of %s at LSN %v: %w", t.Qualified(), r.snapLSN, err))
		}
		if err := r.add(rec, ts); err != nil {
			return err
		}
	}
	if err := r.flush(); err != nil {
		return err
	}
	// The chunk's rows extend the last segment of this snapshot, or start
	// one; a short chunk ends the table.
	var upto []string
	var decoded []row.Value
	if len(c.rows) == r.cfg.ChunkRows {
		upto = c.last
		var err error
		if decoded, err = t.keyOf(upto); err != nil {
			return fmt.Errorf("snapshot of %s: %w", t.Qualified(), err)
		}
	}
	if len(segs) > 0 && segs[len(segs)-1].LSN == r.snapLSN {
		segs[len(segs)-1].Upto, segs[len(segs)-1].upto = upto, decoded
	} else {
		segs = append(segs, &segment{Upto: upto, LSN: r.snapLSN, upto: decoded})
	}
	r.pos.Tables[t.Qualified()] = segs
	if upto == nil {
		r.log.Info("postgres_cdc: table snapshot complete", "table", t.Qualified())
	}
	return nil
}

// chunkQuery selects up to n rows of t after the key after (nil: from the
// start) in key order. Text keys are compared
// under the C collation, the byte order compareKey uses.
func chunkQuery(t *Table, after []string, n int) (string, []any) {
	cols := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		cols[i] = "src." + pgx.Identifier{c.Name}.Sanitize()
	}
	var keys, params []string
	var args []any
	for i, k := range t.Key {
		c := t.Columns[k]
		collate := ""
		if c.OID == oidText || c.OID == oidVarchar {
			collate = ` COLLATE "C"`
		}
		// Qualified: an unqualified name in ORDER BY would be the output
		// column, the text form.
		keys = append(keys, "src."+pgx.Identifier{c.Name}.Sanitize()+collate)
		if after != nil {
			params = append(params, fmt.Sprintf("$%d::%s%s", i+1, c.Type, collate))
			args = append(args, after[i])
		}
	}
	q := "SELECT " + strings.Join(cols, ", ") + " FROM ONLY " + t.quoted() + " AS src"
	if after != nil {
		q += " WHERE (" + strings.Join(keys, ", ") + ") > (" + strings.Join(params, ", ") + ")"
	}
	q += " ORDER BY " + strings.Join(keys, ", ") + fmt.Sprintf(" LIMIT %d", n)
	return q, args
}

// record makes the record of table ti's row whose column i has text value
// value(i) (nil: NULL; ok false: not sent, an unchanged TOAST value).
func (r *reader) record(ti int, value func(i int) (*string, bool), op string, lsn row.Value, ts int64) (row.Row, error) {
	t := r.src.tables[ti]
	rec := make(row.Row, len(r.src.schema.Fields))
	for i, c := range t.Columns {
		s, ok := value(i)
		if !ok {
			return nil, fmt.Errorf("column %s: %w: set REPLICA IDENTITY FULL on the table so that updates carry every value", c.Name, errUnsent)
		}
		if s == nil || r.src.fields[ti][i] < 0 {
			continue // NULL, or a column the records do not keep
		}
		v, err := decodeText(c.Kind(), c.OID, *s)
		if err != nil {
			return nil, fmt.Errorf("column %s (%s): %w", c.Name, c.Type, err)
		}
		rec[r.src.fields[ti][i]] = v
	}
	n := len(rec)
	rec[n-4], rec[n-3], rec[n-2], rec[n-1] = row.StringValue(op), row.StringValue(t.Qualified()), lsn, row.TimeValue(ts)
	return rec, nil
}

// add buffers a record, emitting a full batch.
func (r *reader) add(rec row.Row, ts int64) error {
	r.batch = append(r.batch, runtime.Record[row.Row]{Value: rec, Time: ts})
	r.wm.Observe(0, ts)
	if r.pos.MaxTime == nil || ts > *r.pos.MaxTime {
		r.pos.MaxTime = &ts
	}
	if len(r.batch) >= 1024 {
		return r.flush()
	}
	return nil
}

func (r *reader) flush() error {
	if len(r.batch) == 0 {
		return nil
	}
	b := r.batch
	r.batch = nil
	return r.out.Emit(b)
}

// startStreaming ends the snapshot and starts replication from the slot.
func (r *reader) startStreaming() error {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if r.fetch != nil {
		r.fetch.stop()
		r.fetch = nil
	}
	r.snapOpen = false
	repl, err := connect(ctx, r.cfg.DSN, true)
	if err != nil {
		return fmt.Errorf("replication connection: %w", err)
	}
	args := []string{"proto_version '1'", "publication_names '" + strings.ReplaceAll(r.cfg.Publication, "'", "''") + "'"}
	if err := pglogrepl.StartReplication(ctx, repl, r.cfg.Slot, r.pos.End, pglogrepl.StartReplicationOptions{PluginArgs: args}); err != nil {
		repl.Close(context.Background())
		if strings.Contains(err.Error(), "can no longer get changes") || strings.Contains(err.Error(), "invalidated") {
			return unrecoverable(fmt.Errorf("%w: slot %s: %w", ErrSlotLost, r.cfg.Slot, err))
		}
		return fmt.Errorf("starting replication from slot %s at %v: %w", r.cfg.Slot, r.pos.End, err)
	}
	r.repl, r.streaming = repl, true
	r.received = r.pos.End
	r.nextStatus = time.Now().Add(r.cfg.StatusInterval)
	r.log.Info("postgres_cdc: streaming", "slot", r.cfg.Slot, "from", r.pos.End.String())
	return nil
}

// tx is the transaction being received.
type tx struct {
	open   bool
	skip   bool
	final  pglogrepl.LSN
	lsn    row.Value
	commit int64
}

// idleWait is how long a read waits for the server when nothing arrives.
const idleWait = 100 * time.Millisecond

// stream receives messages until a batch of whole transactions is emitted,
// or nothing arrives for a while outside a transaction.
func (r *reader) stream() (time.Duration, error) {
	var t tx
	began := time.Now()
	rows := 0
	askedEnd := false
	for {
		if !t.open && (rows >= 4096 || time.Since(began) > 50*time.Millisecond) {
			if rows == 0 {
				// Nothing to emit (keepalives, others' transactions): the
				// runtime waits, serving barriers and cancellation.
				return idleWait, nil
			}
			return 0, nil
		}
		if time.Now().After(r.nextStatus) {
			if err := r.status(false); err != nil {
				return 0, err
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), idleWait)
		msg, err := r.repl.ReceiveMessage(ctx)
		cancel()
		if err != nil {
			if pgconn.Timeout(err) {
				if t.open {
					continue
				}
				// Caught up: ask where the server is, to see the end of
				// stop_at latest and advance End past others' WAL.
				if !askedEnd {
					askedEnd = true
					if err := r.status(true); err != nil {
						return 0, err
					}
					continue
				}
				return idleWait, nil
			}
			return 0, fmt.Errorf("receiving from slot %s: %w", r.cfg.Slot, err)
		}
		switch m := msg.(type) {
		case *pgproto3.CopyData:
			if len(m.Data) == 0 {
				continue
			}
			switch m.Data[0] {
			case pglogrepl.PrimaryKeepaliveMessageByteID:
				ka, err := pglogrepl.ParsePrimaryKeepaliveMessage(m.Data[1:])
				if err != nil {
					return 0, fmt.Errorf("keepalive: %w", err)
				}
				if !t.open {
					r.caughtUp(ka.ServerWALEnd)
					if r.exhausted {
						return 0, nil
					}
				}
				if ka.ReplyRequested {
					if err := r.status(false); err != nil {
						return 0, err
					}
				}
			case pglogrepl.XLogDataByteID:
				x, err := pglogrepl.ParseXLogData(m.Data[1:])
				if err != nil {
					return 0, fmt.Errorf("XLogData: %w", err)
				}
				n, err := r.message(&t, x)
				if err != nil {
					return 0, err
				}
				rows += n
			}
		case *pgproto3.ErrorResponse:
			err := pgconn.ErrorResponseToPgError(m)
			if strings.Contains(err.Error(), "can no longer get changes") || strings.Contains(err.Error(), "invalidated") {
				return 0, unrecoverable(fmt.Errorf("%w: slot %s: %w", ErrSlotLost, r.cfg.Slot, err))
			}
			return 0, fmt.Errorf("slot %s: %w", r.cfg.Slot, err)
		default:
			return 0, fmt.Errorf("slot %s: unexpected message %T", r.cfg.Slot, msg)
		}
	}
}

// caughtUp notes that the server sent everything before end, and no
// transaction is open: a later transaction commits after end, so End may
// move there and the slot be confirmed to it with a checkpoint.
func (r *reader) caughtUp(end pglogrepl.LSN) {
	if end > r.received {
		r.received = end
	}
	if end > r.pos.End {
		r.pos.End = end
	}
	if stop := r.stopAt(); stop != 0 && end >= stop {
		r.exhausted = true
	}
}

// message handles one logical replication message; n is the rows emitted.
func (r *reader) message(t *tx, x pglogrepl.XLogData) (int, error) {
	msg, err := pglogrepl.Parse(x.WALData)
	if err != nil {
		return 0, fmt.Errorf("slot %s at %v: parsing a message: %w", r.cfg.Slot, x.WALStart, err)
	}
	switch m := msg.(type) {
	case *pglogrepl.RelationMessage:
		return 0, r.relation(m)
	case *pglogrepl.BeginMessage:
		*t = tx{open: true, final: m.FinalLSN, skip: m.FinalLSN <= r.pos.Last && r.pos.Last != 0,
			lsn: row.StringValue(m.FinalLSN.String()), commit: m.CommitTime.UnixNano()}
		return 0, nil
	case *pglogrepl.CommitMessage:
		if !t.open {
			return 0, fmt.Errorf("slot %s: a commit at %v without its begin", r.cfg.Slot, m.CommitLSN)
		}
		t.open = false
		if err := r.flush(); err != nil {
			return 0, err
		}
		if !t.skip {
			r.pos.Last = m.CommitLSN
			if m.TransactionEndLSN > r.pos.End {
				r.pos.End = m.TransactionEndLSN
			}
		}
		if m.TransactionEndLSN > r.received {
			r.received = m.TransactionEndLSN
		}
		if stop := r.stopAt(); stop != 0 && m.TransactionEndLSN >= stop {
			r.exhausted = true
		}
		return 0, nil
	case *pglogrepl.InsertMessage:
		return r.change(t, m.RelationID, nil, m.Tuple, "insert")
	case *pglogrepl.UpdateMessage:
		old := m.OldTuple
		if r.cfg.BeforeImages && m.OldTupleType != pglogrepl.UpdateMessageTupleTypeOld {
			old = nil // a key-only old row ('K') is no before-image: change refuses it
		}
		return r.change(t, m.RelationID, old, m.NewTuple, "update")
	case *pglogrepl.DeleteMessage:
		return r.change(t, m.RelationID, m.OldTuple, nil, "delete")
	case *pglogrepl.TruncateMessage:
		if t.skip {
			return 0, nil
		}
		for _, id := range m.RelationIDs {
			if rel := r.byRel[id]; rel != nil && !beforeSnapshot(r.pos.Tables[rel.table.Qualified()], t.final) {
				return 0, unrecoverable(fmt.Errorf("slot %s: table %s was truncated in the transaction committing at %v: a truncate is not a change of rows a sink can apply; the target must be truncated by hand and the pipeline started without its checkpoints", r.cfg.Slot, rel.table.Qualified(), t.final))
			}
		}
		return 0, nil
	}
	return 0, nil // type, origin and logical decoding messages carry no rows
}

// beforeSnapshot says whether a transaction committing at final is in
// every snapshot of a table's keys (final is before all of them).
func beforeSnapshot(segs []*segment, final pglogrepl.LSN) bool {
	if !done(segs) {
		return false
	}
	for _, s := range segs {
		if final >= s.LSN {
			return false
		}
	}
	return true
}

// relation records how a table's columns arrive, and stops on a change the
// records cannot follow.
func (r *reader) relation(m *pglogrepl.RelationMessage) error {
	name := m.Namespace + "." + m.RelationName
	ti, ok := r.byTable[m.RelationID]
	if !ok {
		for _, t := range r.src.tables {
			if t.Qualified() == name {
				return unrecoverable(fmt.Errorf("table %s in the stream is not the table the pipeline loaded (OID %d, loaded %d): it was dropped and created again%s", name, m.RelationID, t.OID, rebuild))
			}
		}
		delete(r.byRel, m.RelationID)
		return nil
	}
	t := r.src.tables[ti]
	if name != t.Qualified() {
		return unrecoverable(fmt.Errorf("table %s was renamed to %s: load the pipeline with its new name", t.Qualified(), name))
	}
	rel := &relation{table: t, index: ti}
	colName := func(j int) string { return m.Columns[j].Name }
	if err := compatible(t, m.Columns, colName, func(j int) uint32 { return m.Columns[j].DataType }, &rel.column, r.addedSince(t)); err != nil {
		return err
	}
	if err := added(t, rel.column, colName); err != nil {
		return err
	}
	switch m.ReplicaIdentity {
	case 'f':
	case 'd':
		// The key the stream sends old values of must be the planned one.
		var key []int
		for j, c := range m.Columns {
			if c.Flags&1 != 0 {
				key = append(key, rel.column[j])
			}
		}
		if !slices.Equal(sorted(key), sorted(t.Key)) {
			return unrecoverable(fmt.Errorf("table %s: %w: its primary key changed since the pipeline was loaded", name, ErrIncompatibleSchema))
		}
	default:
		return unrecoverable(fmt.Errorf("table %s: %w: REPLICA IDENTITY is now %q: a delete or key change would not carry the primary key; ALTER TABLE %s REPLICA IDENTITY DEFAULT (or FULL)", name, ErrIncompatibleSchema, m.ReplicaIdentity, t.quoted()))
	}
	r.byRel[m.RelationID] = rel
	return nil
}

// addedSince accepts a planned column a relation description lacks when
// the table has it now, added without a default: the description is from
// before the ALTER TABLE that added it (a stream resumed before it), and
// the rows then had no value for it, NULL. With a default, the rows it
// fills in would be read as NULL: refused.
func (r *reader) addedSince(t *Table) func(Column) (bool, error) {
	return func(c Column) (bool, error) {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		var def bool
		err := r.sql.QueryRow(ctx, "SELECT atthasdef OR atthasmissing FROM pg_attribute WHERE attrelid = $1 AND attname = $2 AND NOT attisdropped", t.OID, c.Name).Scan(&def)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return false, nil // dropped: compatible says so
		case err != nil:
			return false, fmt.Errorf("table %s: reading column %s: %w", t.Qualified(), c.Name, err)
		case def:
			return false, unrecoverable(fmt.Errorf("table %s: %w: column %s was added with a default, and changes from before it are read again: their rows would show NULL where the table shows the default", t.Qualified(), ErrIncompatibleSchema, c.Name))
		}
		return true, nil
	}
}

func sorted(s []int) []int {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// change emits a row change of a transaction: an insert (new), a delete
// (old), or an update (new, and old when the key changed or the replica
// identity is full). An update that changes the key is a delete of the
// old key and an insert of the new one, so that a sink applying changes by
// key removes the old row. Each part is emitted only when the snapshot
// that read its key is older than the transaction.
func (r *reader) change(t *tx, relID uint32, old, new *pglogrepl.TupleData, op string) (int, error) {
	if !t.open {
		return 0, fmt.Errorf("slot %s: a change outside a transaction", r.cfg.Slot)
	}
	if t.skip {
		return 0, nil
	}
	rel, ok := r.byRel[relID]
	if !ok {
		return 0, nil // not a captured table
	}
	tb := rel.table
	segs := r.pos.Tables[tb.Qualified()]
	decode := func(d *pglogrepl.TupleData, what string) (row.Row, []row.Value, error) {
		planned := make([]*pglogrepl.TupleDataColumn, len(tb.Columns))
		for j, c := range d.Columns {
			if j < len(rel.column) && rel.column[j] >= 0 {
				planned[rel.column[j]] = c
			}
		}
		value := func(i int) (*string, bool) {
			c := planned[i]
			switch {
			case c == nil || c.DataType == pglogrepl.TupleDataTypeNull:
				return nil, true
			case c.DataType == pglogrepl.TupleDataTypeToast:
				return nil, false
			}
			s := string(c.Data)
			return &s, true
		}
		rec, err := r.record(rel.index, value, op, t.lsn, t.commit)
		if err != nil {
			return nil, nil, unrecoverable(fmt.Errorf("table %s, %s row of the transaction committing at %v: %w", tb.Qualified(), what, t.final, err))
		}
		key := make([]row.Value, len(tb.Key))
		for i, k := range tb.Key {
			key[i] = rec[r.src.fields[rel.index][k]]
		}
		return rec, key, nil
	}
	// before copies the old row's columns into rec's before-image fields.
	before := func(rec, old row.Row) {
		if r.cfg.BeforeImages {
			copy(rec[r.src.data:2*r.src.data], old[:r.src.data])
		}
	}
	emit := func(rec row.Row, key []row.Value, op string) error {
		at, ok := snapshotLSN(segs, key)
		if !ok {
			return fmt.Errorf("table %s: a change to a key no snapshot has read (the position is inconsistent)", tb.Qualified())
		}
		if t.final < at {
			return nil // the snapshot that read the key holds this change
		}
		rec[len(rec)-4] = row.StringValue(op)
		return r.add(rec, t.commit)
	}
	n := 0
	var oldRec, newRec row.Row
	var oldKey, newKey []row.Value
	var err error
	if op == "update" && r.cfg.BeforeImages && (old == nil || unsentValue(old)) {
		// An update the snapshot that read its key holds is not emitted:
		// it needs no before-image (after starting over, the stream
		// replays the very update that stopped the job).
		if _, key, err := decode(new, "new"); err == nil {
			if at, ok := snapshotLSN(segs, key); ok && t.final < at {
				return 0, nil
			}
		}
		return 0, unrecoverable(fmt.Errorf("before_images: table %s, an update of the transaction committing at %v arrived without its whole old row: its REPLICA IDENTITY is no longer FULL (ALTER TABLE %s REPLICA IDENTITY FULL, then start over without checkpoints: the updates since carry no before-image)", tb.Qualified(), t.final, tb.quoted()))
	}
	if old != nil {
		// A key-only old tuple has NULL in the other columns: a delete
		// needs only the key.
		if oldRec, oldKey, err = r.decodeOld(decode, old); err != nil {
			return 0, err
		}
	}
	if new != nil {
		if newRec, newKey, err = decode(new, "new"); err != nil {
			// An update whose unchanged TOASTed value the old row holds.
			if oldRec == nil || !errors.Is(err, errUnsent) {
				return 0, err
			}
			if newRec, newKey, err = r.fillToast(decode, new, old); err != nil {
				return 0, err
			}
		}
	}
	switch {
	case op == "insert":
		err = emit(newRec, newKey, "insert")
		n++
	case op == "delete":
		err = emit(oldRec, oldKey, "delete")
		n++
	case oldKey != nil && compareKeys(oldKey, newKey) != 0:
		before(newRec, oldRec)
		if err = emit(oldRec, oldKey, "delete"); err == nil {
			err = emit(newRec, newKey, "insert")
		}
		n += 2
	default:
		if oldRec != nil {
			before(newRec, oldRec)
		}
		err = emit(newRec, newKey, "update")
		n++
	}
	return n, err
}

// unsentValue says whether a tuple has a column whose value was not sent
// (an unchanged TOASTed value).
func unsentValue(d *pglogrepl.TupleData) bool {
	for _, c := range d.Columns {
		if c.DataType == pglogrepl.TupleDataTypeToast {
			return true
		}
	}
	return false
}

// decodeOld decodes an old tuple, whose columns outside the key may be
// unsent.
func (r *reader) decodeOld(decode func(*pglogrepl.TupleData, string) (row.Row, []row.Value, error), old *pglogrepl.TupleData) (row.Row, []row.Value, error) {
	cp := &pglogrepl.TupleData{ColumnNum: old.ColumnNum, Columns: make([]*pglogrepl.TupleDataColumn, len(old.Columns))}
	for i, c := range old.Columns {
		if c.DataType == pglogrepl.TupleDataTypeToast {
			c = &pglogrepl.TupleDataColumn{DataType: pglogrepl.TupleDataTypeNull}
		}
		cp.Columns[i] = c
	}
	return decode(cp, "old")
}

// fillToast takes the new tuple's unsent values from a full old tuple.
func (r *reader) fillToast(decode func(*pglogrepl.TupleData, string) (row.Row, []row.Value, error), new, old *pglogrepl.TupleData) (row.Row, []row.Value, error) {
	cp := &pglogrepl.TupleData{ColumnNum: new.ColumnNum, Columns: make([]*pglogrepl.TupleDataColumn, len(new.Columns))}
	for i, c := range new.Columns {
		if c.DataType == pglogrepl.TupleDataTypeToast && i < len(old.Columns) && old.Columns[i].DataType == pglogrepl.TupleDataTypeText {
			c = old.Columns[i]
		}
		cp.Columns[i] = c
	}
	return decode(cp, "new")
}

// status reports the confirmed position to the server; reply asks for a
// keepalive back (with the server's sent position).
func (r *reader) status(reply bool) error {
	r.nextStatus = time.Now().Add(r.cfg.StatusInterval)
	err := pglogrepl.SendStandbyStatusUpdate(context.Background(), r.repl, pglogrepl.StandbyStatusUpdate{
		WALWritePosition: r.confirmed, WALFlushPosition: r.confirmed, WALApplyPosition: r.confirmed, ReplyRequested: reply})
	if err != nil {
		return fmt.Errorf("status update to slot %s: %w", r.cfg.Slot, err)
	}
	return nil
}

// Position is the position after the last whole transaction emitted.
func (r *reader) Position() ([]byte, error) { return r.PositionAt(0) }

// PositionAt notes the End of checkpoint id's position, to confirm the slot
// to it once the checkpoint is complete.
func (r *reader) PositionAt(id int64) ([]byte, error) {
	r.pos.prune()
	if id > 0 {
		r.ends[id] = r.pos.End
	}
	b, err := r.pos.encode()
	if err != nil {
		return nil, r.fail(err)
	}
	return b, nil
}

// NotifyComplete confirms the slot to checkpoint id's position: the server
// may then drop the WAL before it, which no recovery needs any more.
func (r *reader) NotifyComplete(id int64) error {
	end, ok := r.ends[id]
	for k := range r.ends {
		if k <= id {
			delete(r.ends, k)
		}
	}
	if !ok || end <= r.confirmed {
		return nil
	}
	if err := failpoint.Inject("source/postgres_cdc/confirm"); err != nil {
		return r.fail(err)
	}
	if r.repl != nil {
		// The publication may have been altered since the start: a change
		// it stopped publishing must not be confirmed past unseen.
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		err := r.checkPublication(ctx)
		cancel()
		if errors.Is(err, runtime.ErrUnrecoverable) {
			// The stream already went past what the publication left out:
			// the slot decodes each change under the publication as it was
			// then, so none of it can be read again.
			return r.fail(fmt.Errorf("%w; it changed while the pipeline read it, and the changes it left out since cannot be read again%s", err, rebuild))
		}
		if err != nil {
			return r.fail(err)
		}
	}
	r.confirmed = end
	if r.repl == nil {
		return nil // confirmed with the first status update once streaming
	}
	if err := r.status(false); err != nil {
		return r.fail(err)
	}
	return nil
}

func (r *reader) Close() error {
	var errs []error
	if r.fetch != nil {
		r.fetch.stop()
		r.fetch = nil
	}
	if r.repl != nil {
		errs = append(errs, r.repl.Close(context.Background()))
		r.repl = nil
	}
	if r.sql != nil {
		errs = append(errs, r.sql.Close(context.Background()))
		r.sql = nil
	}
	return errors.Join(errs...)
}
