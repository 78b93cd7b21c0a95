package config_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ingest-engine/ingest/config"
	"github.com/ingest-engine/ingest/internal/testkit"
)

// stringCases are the inputs TestSQLStringFunctionsMatchPostgreSQL gives
// both engines: a string, a delimiter, a field number, a pattern and a
// group number. They cover the edges: empty strings and delimiters, fields
// past either end, negative fields, a pattern without groups, groups that
// take no part in the match, no match, non-ASCII text and NULLs.
var stringCases = []struct {
	S, D *string
	N    int64
	P    string
	G    int64
	From *string
	To   string
}{
	{S: sp("https://www.nexmark.com/abc/def/ghi?channel_id=42"), D: sp("/"), N: 4, P: `(&|^)channel_id=([^&]*)`, G: 2, From: sp("c"), To: ""},
	{S: sp("channel_id=7&x=1"), D: sp("/"), N: 5, P: `(&|^)channel_id=([^&]*)`, G: 2, From: sp("_"), To: "-"},
	{S: sp("a=1&channel_id=&b=2"), D: sp("&"), N: 2, P: `(&|^)channel_id=([^&]*)`, G: 2, From: sp("="), To: "=="},
	{S: sp("a/b/c"), D: sp("/"), N: 6, P: `(&|^)channel_id=([^&]*)`, G: 1, From: sp(""), To: "x"},
	{S: sp("a/b/c"), D: sp("/"), N: -1, P: `b`, G: 1, From: sp("/"), To: ""},
	{S: sp("a/b/c"), D: sp("/"), N: -3, P: `(x)|(b)`, G: 1, From: sp("a/b"), To: "ab"},
	{S: sp("a/b/c"), D: sp("/"), N: -4, P: `(x)|(b)`, G: 2, From: sp("c"), To: "cc"},
	{S: sp(""), D: sp("/"), N: 1, P: `^$`, G: 1, From: sp("c"), To: ""},
	{S: sp("abc"), D: sp(""), N: 1, P: `(a)(b)?(z)?`, G: 3, From: sp("abc"), To: ""},
	{S: sp("abc"), D: sp(""), N: 2, P: `(a)(b)?(z)?`, G: 2, From: sp("b"), To: "ß"},
	{S: sp("héllo/wörld//ü"), D: sp("/"), N: 3, P: `w(ö)r`, G: 1, From: sp("ö"), To: "oe"},
	{S: sp("xxcxcxx"), D: sp("xx"), N: 2, P: `c(x)c`, G: 1, From: sp("xx"), To: "y"},
	{S: nil, D: sp("/"), N: 1, P: `a`, G: 1, From: sp("a"), To: "b"},
	{S: sp("a/b"), D: nil, N: 1, P: `a`, G: 1, From: nil, To: "b"},
	// Where Go's leftmost-first and PostgreSQL's leftmost-longest
	// matching, or their dots, part: the translation keeps PostgreSQL's.
	{S: sp("a\nb"), D: sp("/"), N: 1, P: `a.b`, G: 1, From: sp("x"), To: ""},
	{S: sp("ab"), D: sp("/"), N: 1, P: `a|ab`, G: 1, From: sp("x"), To: ""},
	{S: sp("aaa"), D: sp("/"), N: 1, P: `(a*)(a*)`, G: 2, From: sp("x"), To: ""},
	{S: sp("&channel_id=9"), D: sp("/"), N: 1, P: `(&|^)&?channel_id=([^&]*)`, G: 1, From: sp("x"), To: ""},
	{S: sp("xabyab"), D: sp("/"), N: 1, P: `([a-c]|y)+(b*)`, G: 1, From: sp("x"), To: ""},
	{S: sp("aab"), D: sp("/"), N: 1, P: `(a+)(a*b)`, G: 1, From: sp("x"), To: ""},
	{S: sp("abab"), D: sp("/"), N: 1, P: `(ab)*(b?)`, G: 1, From: sp("x"), To: ""},
	{S: sp("Café"), D: sp("/"), N: 1, P: `(?i)(CAF.)`, G: 1, From: sp("x"), To: ""},
	{S: sp("k=v; k2=v2"), D: sp("/"), N: 1, P: `([a-z0-9]+)=([^;]*)`, G: 2, From: sp("x"), To: ""},
}

func sp(s string) *string { return &s }

// split_part, replace, the character count q14 computes with them, and
// (regexp_match(…))[n] give what PostgreSQL gives for the same inputs: the
// SQL pipeline runs over a file of stringCases, and the real server
// computes the same select list over the same values.
func TestSQLStringFunctionsMatchPostgreSQL(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, "postgres://postgres@127.0.0.1:5432/test")
	needService(t, "PostgreSQL", err)
	defer conn.Close(context.Background())

	dir := t.TempDir()
	var in strings.Builder
	for i, c := range stringCases {
		line, err := json.Marshal(map[string]any{"id": i, "s": c.S, "d": c.D, "n": c.N, "f": c.From, "ts": "2026-01-01T00:00:00Z"})
		if err != nil {
			t.Fatal(err)
		}
		in.Write(line)
		in.WriteByte('\n')
	}
	if err := os.WriteFile(filepath.Join(dir, "in.jsonl"), []byte(in.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	// The select list of case c, for both engines, with its pattern, group
	// and replacement as constants.
	selects := func(c int) []string {
		q := stringCases[c]
		lit := func(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
		return []string{
			"split_part(s, d, CAST(n AS INT))",
			fmt.Sprintf("(regexp_match(s, %s))[%d]", lit(q.P), q.G),
			fmt.Sprintf("replace(s, f, %s)", lit(q.To)),
			"char_length(s) - char_length(replace(s, 'c', ''))",
		}
	}
	var sinks strings.Builder
	for i := range stringCases {
		fmt.Fprintf(&sinks, "CREATE SINK out%d AS SELECT id, %s FROM t WHERE id = %d WITH (connector = 'file', path = 'out%d');\n",
			i, strings.Join(aliased(selects(i)), ", "), i, i)
	}
	path := filepath.Join(dir, "q.sql")
	script := "SET checkpoint.dir = 'ckpts';\n" +
		"CREATE SOURCE t (id BIGINT, s VARCHAR, d VARCHAR, n BIGINT, f VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts) WITH (connector = 'file', path = 'in.jsonl', stop_at = 'latest') FORMAT PLAIN ENCODE JSON;\n" +
		sinks.String()
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Stream.Run(ctx, p.RunOptions()); err != nil {
		t.Fatalf("Run: %v", err)
	}
	got := map[string]bool{}
	for i := range stringCases {
		lines, err := testkit.ReadCommitted(filepath.Join(dir, fmt.Sprintf("out%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range lines {
			// In one form with PostgreSQL's rows: keys sorted, as
			// json.Marshal writes a map.
			var m map[string]any
			if err := json.Unmarshal(l.Text, &m); err != nil {
				t.Fatal(err)
			}
			b, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			got[string(b)] = true
		}
	}
	for i, c := range stringCases {
		sel := aliased(selects(i))
		q := fmt.Sprintf("SELECT %s FROM (VALUES ($1::bigint, $2::text, $3::text, $4::bigint, $5::text)) AS t(id, s, d, n, f)", strings.Join(sel, ", "))
		var a, b, r *string
		var k *int64
		if err := conn.QueryRow(ctx, q, i, c.S, c.D, c.N, c.From).Scan(&a, &b, &r, &k); err != nil {
			t.Fatalf("case %d in PostgreSQL: %v", i, err)
		}
		want, err := json.Marshal(map[string]any{"id": i, "c0": a, "c1": b, "c2": r, "c3": k})
		if err != nil {
			t.Fatal(err)
		}
		if !got[string(want)] {
			t.Errorf("case %d (%+v): PostgreSQL gives %s; the pipeline gave none alike (its rows: %v)", i, c, want, slices.Sorted(maps.Keys(got)))
		}
	}
}

// aliased names select items c0, c1, ….
func aliased(items []string) []string {
	out := make([]string, len(items))
	for i, s := range items {
		out[i] = fmt.Sprintf("%s AS c%d", s, i)
	}
	return out
}

// The string functions' misuse is refused when the script loads, naming
// the place and what to write instead.
func TestSQLStringFunctionErrors(t *testing.T) {
	head := "CREATE SOURCE t (s VARCHAR, n BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts) WITH (connector = 'file', path = 'in.jsonl');\n"
	for _, c := range []struct{ sel, want string }{
		{"regexp_match(s, 'a')", "q.sql:2:25: regexp_match returns an array, which no column can hold: take one group with (regexp_match(s, pattern))[n]"},
		{"(regexp_match(s, '(?=a)b'))[1]", "q.sql:2:42: regexp_match pattern \"(?=a)b\": (?=a: of the (?…) forms only a leading (?i)"},
		{"(regexp_match(s, 'Y*?([0-9]{1,3})'))[1]", "the non-greedy *? changes which match PostgreSQL picks"},
		{"(regexp_match(s, '\\w+'))[1]", `\w follows the server's locale in PostgreSQL`},
		{"(regexp_match(s, '\\bcat'))[1]", `\b: in PostgreSQL \b is a backspace`},
		{"(regexp_match(s, '[[:alpha:]]+'))[1]", "character classes such as [[:alpha:]]"},
		{"(regexp_match(s, '(a)\\1'))[1]", "back references"},
		{"(regexp_match(s, 'a(?i)b'))[1]", "only a leading (?i)"},
		{"(regexp_match(s, '(a|ab)(c|bcd)(d*)'))[2]", "alternatives other than single characters: PostgreSQL gives the earlier groups the longest text"},
		{"(regexp_match(s, '(^|&)x'))[1]", "an anchor before other alternatives"},
		{"(regexp_match(s, '(a)'))[2]", "q.sql:2:26: regexp_match pattern \"(a)\" has 1 groups: [2] is always NULL"},
		{"(regexp_match(s, 'a'))[0]", "[0] is always NULL"},
		{"(regexp_match(s, s))[1]", "q.sql:2:42: regexp_match's pattern is a constant string"},
		{"(regexp_match(s, 'a', 'i'))[1]", "regexp_match: flags are not supported; write them into the pattern, e.g. '(?i)…'"},
		{"(regexp_match(n, 'a'))[1]", "regexp_match takes a string, not int"},
		{"(upper(s))[1]", "subscripts apply only to regexp_match's result"},
		{"(regexp_match(s, 'a'))[n]", "an array subscript is a constant integer"},
		{"(regexp_match(s, 'a'))[1:2]", "only one subscript of an array"},
		{"split_part(s, '/', 0)", "q.sql:2:44: split_part: field position must not be zero"},
		{"split_part(s, '/')", "split_part takes a string, a delimiter and a field number"},
		{"split_part(n, '/', 1)", "split_part takes a string, a delimiter and a field number"},
		{"replace(s, 'a')", "replace takes three strings"},
	} {
		path := filepath.Join(t.TempDir(), "q.sql")
		script := head + "CREATE SINK o AS SELECT " + c.sel + " AS x FROM t WITH (connector = 'stdout');"
		if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := config.Load(path)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("SELECT %s\n  error: %v\n  want it to contain %q", c.sel, err, c.want)
		}
	}
}
