package postgres

import (
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
)

// statements holds every SQL text of one sink, built once from its
// configuration. Identifiers are quoted; values are always parameters.
type statements struct {
	// Quoted, possibly schema-qualified names.
	target, staging, progress, writers string
	// stagingIdent is the staging table for COPY.
	stagingIdent pgx.Identifier
	// copyColumns are the staging columns COPY fills: the tags, then the data.
	copyColumns []string

	setup      []string // CREATE TABLE IF NOT EXISTS … in order
	checkCols  string   // selects the columns from the target, LIMIT 0
	checkStage string   // the same from the staging table
	// publish copies the staged rows of committables ($1 prepared, $2
	// subtask, $3 writer, $4 first seq, $5 end seq: arrays) to the target.
	publish string
	// deleteStaged deletes the staged rows of committables ($1 writer, $2
	// first seq, $3 end seq: arrays).
	deleteStaged string

	maxProgress, insertProgress, progressOf, pruneProgress string

	register, heartbeat string
	// abandonWriters unregisters the writers of job $3 of pipeline $1 on
	// staging table $2, and with $4 those of other jobs silent for $5 µs.
	abandonWriters string
	// sweep unregisters the writers of pipeline $1 on staging $2 of jobs
	// other than $3 silent for $5 microseconds (if $4), and deletes their
	// staged rows (only theirs: the staging table may be shared with sinks
	// whose writers are registered under another control schema).
	sweep string
	// abandonRows deletes the staged rows of writers not registered.
	abandonRows string
}

// quote returns t as a quoted identifier.
func quote(t table) string {
	if t.schema == "" {
		return pgx.Identifier{t.name}.Sanitize()
	}
	return pgx.Identifier{t.schema, t.name}.Sanitize()
}

func ident(t table) pgx.Identifier {
	if t.schema == "" {
		return pgx.Identifier{t.name}
	}
	return pgx.Identifier{t.schema, t.name}
}

func quoteCol(name string) string { return pgx.Identifier{name}.Sanitize() }

// columnList joins the quoted columns, each prefixed by prefix.
func columnList(prefix string, cols []string) string {
	var b strings.Builder
	for i, c := range cols {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(prefix)
		b.WriteString(quoteCol(c))
	}
	return b.String()
}

func buildStatements(target, staging table, control string, cfg SinkConfig, columns []Column) statements {
	ctl := func(name string) table { return table{schema: control, name: name} }
	s := statements{
		target:       quote(target),
		staging:      quote(staging),
		progress:     quote(ctl(ProgressTableName)),
		writers:      quote(ctl(WritersTableName)),
		stagingIdent: ident(staging),
	}
	cols := names(columns)
	s.copyColumns = append([]string{writerColumn, seqColumn}, cols...)
	if cfg.Deletes {
		s.copyColumns = append(s.copyColumns, deleteColumn)
	}

	var defs strings.Builder
	for _, c := range columns {
		fmt.Fprintf(&defs, ",\n  %s %s", quoteCol(c.Name), c.Type)
	}
	targetDefs := strings.TrimPrefix(defs.String(), ",")
	if cfg.Mode == Upsert {
		targetDefs += fmt.Sprintf(",\n  PRIMARY KEY (%s)", columnList("", cfg.Key))
	}
	s.setup = []string{
		fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (
  pipeline text NOT NULL,
  sink text NOT NULL,
  job text NOT NULL,
  checkpoint bigint NOT NULL,
  target text NOT NULL,
  rows bigint NOT NULL,
  committed_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (pipeline, sink, job, checkpoint)
)`, s.progress),
		// batches identifies what a checkpoint's commit published (see
		// publication.digest); tables made by older versions gain it, NULL
		// in their rows.
		fmt.Sprintf("ALTER TABLE %s ADD COLUMN IF NOT EXISTS batches text", s.progress),
		fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (
  writer bigint PRIMARY KEY,
  pipeline text NOT NULL,
  sink text NOT NULL,
  job text NOT NULL,
  subtask integer NOT NULL,
  staging text NOT NULL,
  opened_at timestamptz NOT NULL DEFAULT now(),
  active_at timestamptz NOT NULL DEFAULT now()
)`, s.writers),
	}
	if cfg.CreateTable {
		s.setup = append(s.setup, fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (%s\n)", s.target, targetDefs))
	}
	// The staging table is logged: staged rows must survive a server crash,
	// since a complete checkpoint may still have to publish them.
	s.setup = append(s.setup, fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (\n  %s bigint NOT NULL,\n  %s bigint NOT NULL%s,\n  PRIMARY KEY (%s, %s)\n)",
		s.staging, quoteCol(writerColumn), quoteCol(seqColumn), defs.String(), quoteCol(writerColumn), quoteCol(seqColumn)))
	if cfg.Deletes {
		// A staging table made by a sink without deletes gains the flag.
		s.setup = append(s.setup, fmt.Sprintf("ALTER TABLE %s ADD COLUMN IF NOT EXISTS %s boolean NOT NULL DEFAULT false", s.staging, quoteCol(deleteColumn)))
	}

	s.checkCols = fmt.Sprintf("SELECT %s FROM %s LIMIT 0", columnList("", cols), s.target)
	s.checkStage = fmt.Sprintf("SELECT %s FROM %s LIMIT 0", columnList("", s.copyColumns), s.staging)

	with := "WITH c(prepared, subtask, writer, lo, hi) AS (SELECT * FROM unnest($1::bigint[], $2::integer[], $3::bigint[], $4::bigint[], $5::bigint[]))\n"
	join := fmt.Sprintf("FROM %s s JOIN c ON s.%s = c.writer AND s.%s >= c.lo AND s.%s < c.hi",
		s.staging, quoteCol(writerColumn), quoteCol(seqColumn), quoteCol(seqColumn))
	switch cfg.Mode {
	case Upsert:
		// DISTINCT ON keeps, per key, the first row of the order: the last
		// written. One INSERT … ON CONFLICT may not touch a row twice, and
		// applying the rows in order would give the same result.
		var set strings.Builder
		for _, c := range cols {
			if slices.Contains(cfg.Key, c) {
				continue
			}
			if set.Len() > 0 {
				set.WriteString(", ")
			}
			fmt.Fprintf(&set, "%s = EXCLUDED.%s", quoteCol(c), quoteCol(c))
		}
		action := "DO NOTHING" // every column is part of the key
		if set.Len() > 0 {
			action = "DO UPDATE SET " + set.String()
		}
		last := fmt.Sprintf("SELECT DISTINCT ON (%s) %s\n%s\nORDER BY %s, c.prepared DESC, c.subtask DESC, s.%s DESC",
			columnList("s.", cfg.Key), columnList("s.", cols), join, columnList("s.", cfg.Key), quoteCol(seqColumn))
		if !cfg.Deletes {
			s.publish = with + fmt.Sprintf("INSERT INTO %s (%s)\n%s\nON CONFLICT (%s) %s",
				s.target, columnList("", cols), last, columnList("", cfg.Key), action)
			break
		}
		// With deletes, the last row of a key upserts it or deletes it. The
		// two touch disjoint keys, so the DELETE in WITH and the INSERT
		// (which see the same snapshot) never meet.
		last = fmt.Sprintf("SELECT DISTINCT ON (%s) %s, s.%s\n%s\nORDER BY %s, c.prepared DESC, c.subtask DESC, s.%s DESC",
			columnList("s.", cfg.Key), columnList("s.", cols), quoteCol(deleteColumn), join, columnList("s.", cfg.Key), quoteCol(seqColumn))
		var match strings.Builder
		for _, k := range cfg.Key {
			fmt.Fprintf(&match, " AND t.%s = l.%s", quoteCol(k), quoteCol(k))
		}
		s.publish = with + fmt.Sprintf(", l AS (%s),\ngone AS (DELETE FROM %s t USING l WHERE l.%s%s)\nINSERT INTO %s (%s)\nSELECT %s FROM l WHERE NOT l.%s\nON CONFLICT (%s) %s",
			last, s.target, quoteCol(deleteColumn), match.String(), s.target, columnList("", cols), columnList("l.", cols), quoteCol(deleteColumn), columnList("", cfg.Key), action)
	default:
		// No ORDER BY: a table is unordered, and sorting a checkpoint's rows
		// would cost the server a sort (spilling to disk beyond work_mem) for
		// nothing a reader can rely on.
		s.publish = with + fmt.Sprintf("INSERT INTO %s (%s)\nSELECT %s\n%s",
			s.target, columnList("", cols), columnList("s.", cols), join)
	}
	s.deleteStaged = fmt.Sprintf("DELETE FROM %s s USING unnest($1::bigint[], $2::bigint[], $3::bigint[]) AS c(writer, lo, hi)\nWHERE s.%s = c.writer AND s.%s >= c.lo AND s.%s < c.hi",
		s.staging, quoteCol(writerColumn), quoteCol(seqColumn), quoteCol(seqColumn))

	s.maxProgress = fmt.Sprintf("SELECT coalesce(max(checkpoint), 0) FROM %s WHERE pipeline = $1 AND sink = $2 AND job = $3", s.progress)
	s.insertProgress = fmt.Sprintf("INSERT INTO %s (pipeline, sink, job, checkpoint, target, rows, batches) VALUES ($1, $2, $3, $4, $5, $6, $7)\nON CONFLICT (pipeline, sink, job, checkpoint) DO NOTHING", s.progress)
	s.progressOf = fmt.Sprintf("SELECT rows, coalesce(batches, '') FROM %s WHERE pipeline = $1 AND sink = $2 AND job = $3 AND checkpoint = $4", s.progress)
	s.pruneProgress = fmt.Sprintf("DELETE FROM %s WHERE pipeline = $1 AND sink = $2 AND job = $3 AND checkpoint < $4", s.progress)

	s.register = fmt.Sprintf("INSERT INTO %s (writer, pipeline, sink, job, subtask, staging) VALUES ($1, $2, $3, $4, $5, $6)\nON CONFLICT (writer) DO NOTHING", s.writers)
	s.heartbeat = fmt.Sprintf("UPDATE %s SET active_at = now() WHERE writer = $1", s.writers)
	s.abandonWriters = fmt.Sprintf("DELETE FROM %s WHERE pipeline = $1 AND staging = $2 AND (job = $3 OR ($4::boolean AND active_at < now() - $5::bigint * interval '1 microsecond'))", s.writers)
	s.sweep = fmt.Sprintf("WITH gone AS (DELETE FROM %s WHERE pipeline = $1 AND staging = $2 AND job <> $3 AND $4::boolean AND active_at < now() - $5::bigint * interval '1 microsecond' RETURNING writer)\nDELETE FROM %s s USING gone WHERE s.%s = gone.writer",
		s.writers, s.staging, quoteCol(writerColumn))
	s.abandonRows = fmt.Sprintf("DELETE FROM %s s WHERE NOT EXISTS (SELECT 1 FROM %s w WHERE w.writer = s.%s)", s.staging, s.writers, quoteCol(writerColumn))
	return s
}
