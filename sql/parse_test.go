package sql

import (
	"strings"
	"testing"
	"time"
)

const script = `-- bids, windowed
SET checkpoint.interval = '1s';
CREATE SOURCE bid (
  auction BIGINT, price BIGINT, date_time TIMESTAMP,
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND
) WITH (connector = 'file', path = 'in/*.jsonl', stop_at = 'latest') FORMAT PLAIN ENCODE JSON;
CREATE VIEW big AS SELECT auction, price * 0.908 AS euros FROM bid WHERE price > 100 AND auction IN (1, 2);
CREATE SINK out AS
  SELECT auction, window_start, count(*) AS n, max(price) FILTER (WHERE price > 5) AS top
  FROM HOP(bid, date_time, INTERVAL '2' SECOND, INTERVAL '10' SECOND)
  GROUP BY auction, window_start HAVING count(*) > 1
  WITH (connector = 'file', path = 'out');
CREATE SINK copy FROM big WITH (connector = 'stdout');
`

func TestParseScript(t *testing.T) {
	s, err := Parse("q.sql", script)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Statements) != 5 {
		t.Fatalf("%d statements, want 5", len(s.Statements))
	}
	set := s.Statements[0].(*Set)
	if set.Name != "checkpoint.interval" || set.Value != "1s" || set.Pos != (Pos{2, 1}) {
		t.Errorf("SET: %+v", set)
	}
	src := s.Statements[1].(*CreateSource)
	if src.Name != "bid" || len(src.Columns) != 3 || src.Columns[2] != (ColumnDef{Name: "date_time", Type: "timestamp", Pos: Pos{4, 33}}) ||
		src.Watermark == nil || src.Watermark.Column != "date_time" || src.Watermark.Delay != 4*time.Second ||
		len(src.Options) != 3 || src.Options[1] != (Option{Key: "path", Value: "in/*.jsonl", Pos: Pos{6, 29}}) || src.Encode != "json" {
		t.Errorf("CREATE SOURCE: %+v (watermark %+v)", src, src.Watermark)
	}
	view := s.Statements[2].(*CreateView)
	q := view.Query
	if q.From.Relation != "bid" || len(q.Items) != 2 || q.Items[1].Alias != "euros" || q.Where == nil {
		t.Fatalf("view: %+v", q)
	}
	if b := q.Items[1].Expr.(*Binary); b.Op != "*" || b.R.(*Literal).Value != 0.908 || b.Pos != (Pos{7, 42}) {
		t.Errorf("price * 0.908: %+v", b)
	}
	sink := s.Statements[3].(*CreateSink)
	f := sink.Query.From
	if f.Window != "hop" || f.Relation != "bid" || f.TimeColumn != "date_time" || f.Slide != 2*time.Second || f.Size != 10*time.Second {
		t.Errorf("HOP: %+v", f)
	}
	top := sink.Query.Items[3].Expr.(*Call)
	if top.Name != "max" || top.Filter == nil || sink.Query.Items[2].Expr.(*Call).Star != true || sink.Query.Having == nil || len(sink.Query.GroupBy) != 2 {
		t.Errorf("aggregates: %+v", sink.Query)
	}
	if len(sink.Options) != 2 || sink.Options[1].Value != "out" {
		t.Errorf("sink options %+v", sink.Options)
	}
	if c := s.Statements[4].(*CreateSink); c.From != "big" || c.Options[0].Value != "stdout" {
		t.Errorf("sink FROM: %+v", c)
	}
}

// Errors name the file, line and column, and the construct.
func TestParseErrorsArePlaced(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{"CREATE SOURCE s (a BIGINT) WITH (connector = 'datagen');\nCREATE VIEW v AS SELECT a FROM s WHERE;", "q.sql:2:39: syntax error at end of input"},
		{"CREATE SOURCE s (a BIGINT) WITH (connector = 'datagen');\nCREATE VIEW v AS SELECT a, , b FROM s;", "q.sql:2:28: syntax error at or near \",\""},
		{"CREATE TABEL x (a int);", `q.sql:1:8: CREATE TABEL is not a statement of this dialect`},
		{"CREATE SOURCE s (a BIGINT) WITH (connector = 'x', connector = 'y');", "q.sql:1:51: source s: option connector is given twice"},
		{"CREATE SINK k AS SELECT a FROM s;", "q.sql:1:33: sink k: expected WITH (connector = …)"},
		{"CREATE SOURCE s (a BIGINT, WATERMARK FOR a AS b - INTERVAL '1' SECOND) WITH (c = 'd');", "q.sql:1:47: WATERMARK FOR a AS b: the watermark must be a minus an interval"},
		{"CREATE VIEW v AS SELECT a FROM s ORDER BY a;", "q.sql:1:18: ORDER BY"},
		{"CREATE VIEW v AS SELECT a FROM s LEFT JOIN t ON s.a = t.a;", "q.sql:1:32: only INNER JOIN is supported yet"},
		{"CREATE VIEW v AS SELECT 'unterminated FROM s;", "q.sql:1:25: unterminated string"},
	} {
		_, err := Parse("q.sql", c.text)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%q: %v\nwant an error starting %q", c.text, err, c.want)
		}
	}
}

// A byte order mark at the start of a script is not an error.
func TestParseSkipsAByteOrderMark(t *testing.T) {
	s, err := Parse("q.sql", "\ufeffSET pipeline = 'p';")
	if err != nil || len(s.Statements) != 1 || s.Statements[0].(*Set).Pos != (Pos{1, 1}) {
		t.Fatalf("%+v, %v", s, err)
	}
}

// Statements of only blanks and comments are no statements.
func TestParseSkipsEmptyStatements(t *testing.T) {
	s, err := Parse("q.sql", "-- a comment; with a semicolon\n;  /* another; */ ;\nSET a = 1; ;")
	if err != nil || len(s.Statements) != 1 {
		t.Fatalf("%d statements, %v; want the SET alone", len(s.Statements), err)
	}
}

// EXPLAIN wraps a CREATE VIEW, a CREATE SINK or a SELECT; anything else is
// refused where it stands.
func TestParseExplain(t *testing.T) {
	s, err := Parse("q.sql", "EXPLAIN CREATE SINK s AS SELECT id FROM e WITH (connector = 'stdout');\n"+
		"EXPLAIN SELECT key, count(*) AS n FROM e GROUP BY key;\nexplain create materialized view v as select id from e;")
	if err != nil {
		t.Fatal(err)
	}
	sink, ok := s.Statements[0].(*Explain).Statement.(*CreateSink)
	if !ok || sink.Name != "s" || sink.Query == nil || s.Statements[0].At() != (Pos{1, 1}) {
		t.Errorf("EXPLAIN CREATE SINK: %+v", s.Statements[0])
	}
	if q := s.Statements[1].(*Explain).Query; q == nil || len(q.GroupBy) != 1 || s.Statements[1].At() != (Pos{2, 1}) {
		t.Errorf("EXPLAIN SELECT: %+v", s.Statements[1])
	}
	if v, ok := s.Statements[2].(*Explain).Statement.(*CreateView); !ok || v.Name != "v" {
		t.Errorf("EXPLAIN CREATE MATERIALIZED VIEW: %+v", s.Statements[2])
	}
	for _, c := range []struct{ text, want string }{
		{"EXPLAIN SET parallelism = 2;", `q.sql:1:9: EXPLAIN "set": EXPLAIN takes CREATE VIEW, CREATE SINK or SELECT`},
		{"EXPLAIN CREATE SOURCE e WITH (connector = 'datagen');", "q.sql:1:16: EXPLAIN CREATE SOURCE: EXPLAIN takes"},
		{"EXPLAIN;", "q.sql:1:8: EXPLAIN the end of the statement"},
	} {
		if _, err := Parse("q.sql", c.text); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%q): %v, want %q", c.text, err, c.want)
		}
	}
}
