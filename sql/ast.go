package sql

import "time"

// Script is a parsed SQL file: its statements in order.
type Script struct {
	File       string
	Statements []Statement
}

// Statement is one of Set, CreateSource, CreateView, CreateSink.
type Statement interface{ At() Pos }

// Set is `SET name = value`: a pipeline setting, named as in YAML
// (`pipeline`, `parallelism`, `checkpoint.interval`, …).
type Set struct {
	Name  string
	Value string
	Pos   Pos
}

// CreateSource is `CREATE SOURCE name (columns…) WITH (options…) [FORMAT f
// ENCODE e]`.
type CreateSource struct {
	Name    string
	Columns []ColumnDef
	// Watermark is `WATERMARK FOR col AS col - INTERVAL …`, nil without one.
	Watermark *WatermarkDef
	// PrimaryKey lists the columns of `PRIMARY KEY (…)` or of a column's
	// PRIMARY KEY, in order; nil without one. KeyPos is where it is.
	PrimaryKey []string
	KeyPos     Pos
	// NotEnforced is set by `PRIMARY KEY (…) NOT ENFORCED`: the user
	// declares that no two records share the key, which the engine does
	// not check for every record (the key of a source that reads records,
	// not a table's changes).
	NotEnforced bool
	Options     []Option
	// Table is set for CREATE TABLE: with connector 'file', a bounded table
	// that joins read with FOR SYSTEM_TIME AS OF PROCTIME(); with another
	// connector, a source as CREATE SOURCE declares it.
	Table bool
	// Format and Encode are lower case ("plain", "json"), "" when absent.
	Format, Encode string
	EncodePos      Pos
	Pos            Pos
}

// ColumnDef is a declared column: its name and SQL type, lower case
// ("bigint", "double precision", "varchar").
type ColumnDef struct {
	Name, Type string
	Pos        Pos
	// Written is the name as written when it was unquoted with capitals,
	// which PostgreSQL lower-cases (Price is price); "" otherwise.
	Written string
	// Proctime marks `name TIMESTAMP AS PROCTIME()`: no field of the
	// records, but the time each is processed.
	Proctime bool
}

// WatermarkDef is `WATERMARK FOR column AS column - INTERVAL 'n' unit`: the
// column is the event time, and records up to Delay behind the newest are on
// time.
type WatermarkDef struct {
	Column string
	Delay  time.Duration
	Pos    Pos
}

// Option is `key = value` in WITH (…); Value is the text of a string, number
// or name.
type Option struct {
	Key, Value string
	Pos        Pos
}

// CreateView is `CREATE VIEW name AS query`: a named intermediate.
type CreateView struct {
	Name  string
	Query *Select
	Pos   Pos
}

// CreateSink is `CREATE SINK name (FROM relation | AS query) WITH (options…)`.
type CreateSink struct {
	Name string
	// From is the relation written (a source or view), "" with Query.
	From    string
	FromPos Pos
	Query   *Select
	Options []Option
	Pos     Pos
}

// Explain is `EXPLAIN statement`: the statement (a CREATE VIEW or CREATE
// SINK) or query (a SELECT) is planned, and the pipeline's plan is printed
// instead of running it.
type Explain struct {
	// Statement is the CREATE VIEW or CREATE SINK explained; nil for a
	// query.
	Statement Statement
	// Query is the SELECT explained; nil for a statement.
	Query *Select
	Pos   Pos
}

// At returns where the statement starts.
func (s *Explain) At() Pos      { return s.Pos }
func (s *Set) At() Pos          { return s.Pos }
func (s *CreateSource) At() Pos { return s.Pos }
func (s *CreateView) At() Pos   { return s.Pos }
func (s *CreateSink) At() Pos   { return s.Pos }

// Select is a SELECT query.
type Select struct {
	Items   []SelectItem
	From    From
	Where   Expr
	GroupBy []Expr
	Having  Expr
	Pos     Pos
}

// SelectItem is one output column: an expression and its name (the alias,
// or the column's own name), or `*` (Star).
type SelectItem struct {
	Expr  Expr
	Alias string
	Star  bool
	Pos   Pos
}

// From is what a query reads: a relation, a window function over one, or
// a join of two relations.
type From struct {
	// Relation is the source or view read ("" for a join); Alias its name
	// in the query, when given (FROM bid AS b).
	Relation    string
	Alias       string
	RelationPos Pos
	// Join, when set, is the join read instead of Relation.
	Join *Join
	// Subquery, when set, is the query read instead of Relation: (SELECT
	// …) [AS Alias].
	Subquery *Select
	// Window is "" (the relation itself), "tumble", "hop" or "session".
	Window string
	// TimeColumn is the window's time column; Size, Slide and Gap its
	// durations (hop: slide then size, as RisingWave's HOP takes them).
	TimeColumn       string
	Size, Slide, Gap time.Duration
	Pos              Pos
}

// Join is `left [INNER] JOIN right ON condition`.
type Join struct {
	Left, Right JoinInput
	On          Expr
	Pos         Pos
}

// JoinInput is one side of a join: a relation, or a subquery, and its
// alias in the query.
type JoinInput struct {
	Relation, Alias string
	// Subquery, when set, is the query read instead of Relation; Alias is
	// then set.
	Subquery *Select
	// Lookup is set for `relation FOR SYSTEM_TIME AS OF PROCTIME()`: each
	// row of the other side is joined with the relation, a bounded table,
	// as it is when the row is processed.
	Lookup bool
	Pos    Pos
}

// Name is how the query refers to the side: its alias, else its relation.
func (j JoinInput) Name() string {
	if j.Alias != "" {
		return j.Alias
	}
	return j.Relation
}

// Expr is an expression node.
type Expr interface{ At() Pos }

// Column is a column reference, with its qualifier when given (t.c).
type Column struct {
	Table, Name string
	Pos         Pos
}

// Literal is a constant: int64, float64, string, bool, or nil for NULL.
type Literal struct {
	Value any
	Pos   Pos
}

// Interval is an INTERVAL constant.
type Interval struct {
	D   time.Duration
	Pos Pos
}

// Binary is `L op R`; Op is upper case for words: + - * / % = <> < <= > >=
// AND OR || LIKE.
type Binary struct {
	Op   string
	L, R Expr
	Pos  Pos
}

// Unary is `op X`: NOT or -.
type Unary struct {
	Op  string
	X   Expr
	Pos Pos
}

// IsNull is `X IS [NOT] NULL`.
type IsNull struct {
	X   Expr
	Not bool
	Pos Pos
}

// Case is a searched CASE (a simple CASE x WHEN v … is turned into one).
type Case struct {
	Whens []When
	Else  Expr // nil: NULL
	Pos   Pos
}

// When is one WHEN cond THEN result.
type When struct{ Cond, Result Expr }

// Cast is `CAST(X AS type)` or `X::type`; Type is lower case.
type Cast struct {
	X    Expr
	Type string
	Pos  Pos
}

// Subscript is `(X)[Index]`: one element of an array, counted from 1. The
// only array the dialect has is regexp_match's; the planner refuses others.
type Subscript struct {
	X     Expr
	Index int64
	Pos   Pos
}

// Call is a function call: a scalar function, or an aggregate with its
// options (count(*), count(DISTINCT x), sum(x) FILTER (WHERE …)).
type Call struct {
	Name     string
	Args     []Expr
	Star     bool
	Distinct bool
	Filter   Expr
	// Over is set for a window function call (… OVER (…)); Window is its
	// OVER clause.
	Over   bool
	Window *Over
	Pos    Pos
}

// Over is a window function's OVER (PARTITION BY … ORDER BY … [frame]).
type Over struct {
	PartitionBy []Expr
	OrderBy     []OrderItem
	// Frame is the frame clause, nil for the default frame.
	Frame *Frame
	Pos   Pos
}

// Frame is a window's frame of rows: ROWS BETWEEN Preceding PRECEDING AND
// CURRENT ROW (or ROWS Preceding PRECEDING), the only frame the dialect
// has.
type Frame struct {
	Preceding int64
	Pos       Pos
}

// OrderItem is one ORDER BY item: an expression, descending or not.
type OrderItem struct {
	Expr Expr
	Desc bool
	Pos  Pos
}

// At returns the node's position.
func (e *Column) At() Pos    { return e.Pos }
func (e *Literal) At() Pos   { return e.Pos }
func (e *Interval) At() Pos  { return e.Pos }
func (e *Binary) At() Pos    { return e.Pos }
func (e *Unary) At() Pos     { return e.Pos }
func (e *IsNull) At() Pos    { return e.Pos }
func (e *Case) At() Pos      { return e.Pos }
func (e *Cast) At() Pos      { return e.Pos }
func (e *Call) At() Pos      { return e.Pos }
func (e *Subscript) At() Pos { return e.Pos }
