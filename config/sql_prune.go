package config

import "github.com/ingest-engine/ingest/sql"

// This file finds the columns a script can read, so that a nexmark source
// generates only those (a projection pushed into the source: q5 reads two
// of a bid's seven columns). It over-approximates by name: a column is
// read when any statement names a column of that name, in any relation;
// a * (but one over a subquery, which reads what the subquery selects), or
// a sink written straight from a source, reads every column of every
// source. Missing one would be loud, not silent: the builder refuses a
// field its input does not have.

// readColumns is what a script reads: the column names it mentions, or
// all when it may read every column.
type readColumns struct {
	names map[string]bool
	all   bool
}

// reads says whether column name may be read.
func (r *readColumns) reads(name string) bool { return r == nil || r.all || r.names[name] }

// scriptReads collects what the statements read.
func scriptReads(sources map[string]bool, statements []sql.Statement) *readColumns {
	r := &readColumns{names: map[string]bool{}}
	var stmt func(sql.Statement)
	stmt = func(st sql.Statement) {
		switch s := st.(type) {
		case *sql.CreateSource:
			if s.Watermark != nil {
				r.names[s.Watermark.Column] = true
			}
		case *sql.CreateView:
			r.query(s.Query)
		case *sql.CreateSink:
			if sources[s.From] {
				r.all = true
			}
			r.query(s.Query)
		case *sql.Explain:
			if s.Statement != nil {
				stmt(s.Statement)
			}
			r.query(s.Query)
		}
	}
	for _, st := range statements {
		stmt(st)
	}
	return r
}

// query notes what q reads.
func (r *readColumns) query(q *sql.Select) {
	if q == nil {
		return
	}
	f := q.From
	for _, it := range q.Items {
		// A * over a subquery reads the columns the subquery selects,
		// which it names (or reads with a * of its own).
		if it.Star && (f.Subquery == nil || f.Join != nil) {
			r.all = true
		}
		r.expr(it.Expr)
	}
	if f.TimeColumn != "" {
		r.names[f.TimeColumn] = true
	}
	r.query(f.Subquery)
	if j := f.Join; j != nil {
		r.query(j.Left.Subquery)
		r.query(j.Right.Subquery)
		r.expr(j.On)
	}
	r.expr(q.Where)
	for _, g := range q.GroupBy {
		r.expr(g)
	}
	r.expr(q.Having)
}

// expr notes the columns e names, in window clauses too.
func (r *readColumns) expr(e sql.Expr) {
	walk(e, func(x sql.Expr) bool {
		switch c := x.(type) {
		case *sql.Column:
			r.names[c.Name] = true
		case *sql.Call:
			if w := c.Window; w != nil {
				for _, p := range w.PartitionBy {
					r.expr(p)
				}
				for _, o := range w.OrderBy {
					r.expr(o.Expr)
				}
			}
		}
		return true
	})
}
