package pgcdc

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ingest-engine/ingest/row"
)

// pointThree is 0.1 + 0.2 in float64 arithmetic (constants would add
// exactly): 0.30000000000000004.
var pointThree = func() float64 { x := 0.1; return x + 0.2 }()

func utc(y int, mo time.Month, d, h, mi, s, us int) row.Value {
	return row.TimeValue(time.Date(y, mo, d, h, mi, s, us*1000, time.UTC).UnixNano())
}

// serverText is the text form of SQL expression expr under the source's
// session settings, as the snapshot selects it (expr::text), and as the
// type's output function writes it (pgoutput's form: the value in text
// result format), and its type's OID.
func serverText(t *testing.T, conn *pgx.Conn, expr string) (cast, wire string, oid uint32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	if err := conn.QueryRow(ctx, "SELECT ("+expr+")::text, pg_typeof("+expr+")::oid").Scan(&cast, &oid); err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	rows, err := conn.Query(ctx, "SELECT "+expr, pgx.QueryResultFormats{pgx.TextFormatCode})
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	defer rows.Close()
	if !rows.Next() {
		t.Fatalf("%s: no row (%v)", expr, rows.Err())
	}
	wire = string(rows.RawValues()[0])
	return cast, wire, oid
}

// TestDecodeServerText decodes values of every mapped type as the server
// writes them under the source's session settings (connectSQL: DateStyle
// ISO, TimeZone UTC, extra_float_digits 1, bytea hex), in the snapshot's
// form (::text) and the stream's (the output function), and checks each
// type's Kind and the exact value; values no record field holds are errors
// naming the problem, never a wrong value.
func TestDecodeServerText(t *testing.T) {
	t.Parallel()
	conn := requireServer(t)
	type tc struct {
		expr string
		kind row.Kind
		want row.Value
		// err, when set, is what the error must contain.
		err string
	}
	cases := []tc{
		{expr: "'-32768'::int2", kind: row.Int, want: row.IntValue(-32768)},
		{expr: "32767::int2", kind: row.Int, want: row.IntValue(32767)},
		{expr: "(-2147483648)::int4", kind: row.Int, want: row.IntValue(math.MinInt32)},
		{expr: "'-9223372036854775808'::int8", kind: row.Int, want: row.IntValue(math.MinInt64)},
		{expr: "9223372036854775807::int8", kind: row.Int, want: row.IntValue(math.MaxInt64)},
		{expr: "4294967295::oid", kind: row.Int, want: row.IntValue(4294967295)},
		{expr: "'0.1'::float4", kind: row.Float, want: row.FloatValue(0.1)},
		{expr: "'3.4028235e38'::float4", kind: row.Float, want: row.FloatValue(3.4028235e38)},
		{expr: "'-0'::float4", kind: row.Float, want: row.FloatValue(math.Copysign(0, -1))},
		{expr: "'0.1'::float8", kind: row.Float, want: row.FloatValue(0.1)},
		{expr: "0.1::float8 + 0.2::float8", kind: row.Float, want: row.FloatValue(pointThree)}, // every digit: 0.30000000000000004
		{expr: "'1e-300'::float8", kind: row.Float, want: row.FloatValue(1e-300)},
		{expr: "'5e-324'::float8", kind: row.Float, want: row.FloatValue(5e-324)},
		{expr: "'-0'::float8", kind: row.Float, want: row.FloatValue(math.Copysign(0, -1))},
		{expr: "'1.7976931348623157e308'::float8", kind: row.Float, want: row.FloatValue(math.MaxFloat64)},
		{expr: "'123456789012345678901234567890.123456789012345678901234567890'::numeric", kind: row.String,
			want: row.StringValue("123456789012345678901234567890.123456789012345678901234567890")},
		{expr: "'1.500'::numeric", kind: row.String, want: row.StringValue("1.500")},
		{expr: "true", kind: row.Bool, want: row.BoolValue(true)},
		{expr: "false", kind: row.Bool, want: row.BoolValue(false)},
		{expr: "'-0.000001'::numeric(20,8)", kind: row.String, want: row.StringValue("-0.00000100")},
		{expr: `E'h\u00e9llo w\u00f6rld 日本語 🎉 "q" \\ \t\n'::text`, kind: row.String, want: row.StringValue("héllo wörld 日本語 🎉 \"q\" \\ \t\n")},
		{expr: "''::text", kind: row.String, want: row.StringValue("")},
		{expr: "'abc é'::varchar(20)", kind: row.String, want: row.StringValue("abc é")},
		{expr: `'\x00ff10'::bytea`, kind: row.Bytes, want: row.BytesValue("\x00\xff\x10")},
		{expr: `''::bytea`, kind: row.Bytes, want: row.BytesValue("")},
		{expr: `convert_to('é\', 'UTF8')`, kind: row.Bytes, want: row.BytesValue("é\\")},
		{expr: "'2024-02-29'::date", kind: row.Time, want: utc(2024, 2, 29, 0, 0, 0, 0)},
		{expr: "'1969-12-31'::date", kind: row.Time, want: utc(1969, 12, 31, 0, 0, 0, 0)},
		{expr: "'1678-01-01'::date", kind: row.Time, want: utc(1678, 1, 1, 0, 0, 0, 0)},
		{expr: "'2261-12-31'::date", kind: row.Time, want: utc(2261, 12, 31, 0, 0, 0, 0)},
		{expr: "'2024-01-02 03:04:05.123456'::timestamp", kind: row.Time, want: utc(2024, 1, 2, 3, 4, 5, 123456)},
		{expr: "'2024-01-02 03:04:05'::timestamp", kind: row.Time, want: utc(2024, 1, 2, 3, 4, 5, 0)},
		{expr: "'1900-01-01 00:00:00.000001'::timestamp", kind: row.Time, want: utc(1900, 1, 1, 0, 0, 0, 1)},
		{expr: "'2024-01-02 03:04:05.123456+05:30'::timestamptz", kind: row.Time, want: utc(2024, 1, 1, 21, 34, 5, 123456)},
		{expr: "'2024-07-01 12:00:00.000001-07'::timestamptz", kind: row.Time, want: utc(2024, 7, 1, 19, 0, 0, 1)},
		{expr: "'1969-12-31 23:59:59.999999+00'::timestamptz", kind: row.Time, want: utc(1969, 12, 31, 23, 59, 59, 999999)},
		{expr: "'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11'::uuid", kind: row.String, want: row.StringValue("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11")},
		{expr: `'{"b": 1, "a": [1, 2.50], "c": "ü"}'::jsonb`, kind: row.String, want: row.StringValue(`{"a": [1, 2.50], "b": 1, "c": "ü"}`)},
		{expr: `'{"b":1,  "a":2}'::json`, kind: row.String, want: row.StringValue(`{"b":1,  "a":2}`)},
		{expr: "'1 day 02:03:04.5'::interval", kind: row.String, want: row.StringValue("1 day 02:03:04.5")},
		{expr: "ARRAY[1, 2]", kind: row.String, want: row.StringValue("{1,2}")},
		// Values no field holds.
		{expr: "'infinity'::timestamptz", kind: row.Time, err: `"infinity" has no timestamp value`},
		{expr: "'-infinity'::timestamp", kind: row.Time, err: `"-infinity" has no timestamp value`},
		{expr: "'infinity'::date", kind: row.Time, err: `"infinity" has no timestamp value`},
		{expr: "'0044-03-15 BC'::date", kind: row.Time, err: `"0044-03-15 BC" has no timestamp value`},
		{expr: "'2000-01-01 00:00:00 BC'::timestamp", kind: row.Time, err: `"2000-01-01 00:00:00 BC" has no timestamp value`},
		{expr: "'2000-01-01 00:00:00+00 BC'::timestamptz", kind: row.Time, err: "BC"},
		{expr: "'2300-01-01'::timestamp", kind: row.Time, err: `"2300-01-01 00:00:00" is outside the years`},
		{expr: "'2300-06-01 12:00:00.5+02'::timestamptz", kind: row.Time, err: `"2300-06-01 10:00:00.5+00" is outside the years`},
		{expr: "'2300-01-01'::date", kind: row.Time, err: "outside the years"},
		{expr: "'1677-01-01'::date", kind: row.Time, err: "outside the years"},
		{expr: "'12345-01-01'::date", kind: row.Time, err: "12345-01-01"},
		{expr: "'NaN'::float8", kind: row.Float, err: "NaN"},
		{expr: "'NaN'::float4", kind: row.Float, err: "NaN"},
		{expr: "'Infinity'::float8", kind: row.Float, err: "Infinity"},
		{expr: "'-Infinity'::float4", kind: row.Float, err: "-Infinity"},
	}
	for _, c := range cases {
		cast, wire, oid := serverText(t, conn, c.expr)
		if k := Kind(oid); k != c.kind {
			t.Errorf("%s: Kind(%d) = %v, want %v", c.expr, oid, k, c.kind)
			continue
		}
		// Both forms, the snapshot's and the stream's; booleans' differ
		// (TestSnapshotTextEqualsStreamedText).
		forms := []string{wire}
		if cast != wire && oid != oidBool {
			t.Errorf("%s: the snapshot's text %q is not the stream's %q", c.expr, cast, wire)
		}
		if oid != oidBool {
			forms = append(forms, cast)
		}
		for _, s := range forms {
			got, err := decodeText(Kind(oid), oid, s)
			if c.err != "" {
				if err == nil {
					t.Errorf("%s: text %q decoded to %v, want an error mentioning %q", c.expr, s, got, c.err)
				} else if !strings.Contains(err.Error(), c.err) {
					t.Errorf("%s: text %q: error %q, want it to mention %q", c.expr, s, err, c.err)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s: text %q: %v", c.expr, s, err)
				continue
			}
			// Values are compared bit for bit (Float by its bits: -0 is
			// not 0).
			if got != c.want {
				t.Errorf("%s: text %q decoded to %v (%v), want %v (%v)", c.expr, s, got, got.Kind(), c.want, c.want.Kind())
			}
		}
	}
	// A real is the shortest decimal that reads back as the same real: it
	// still reads back exactly in 32 bits.
	_, s, oid := serverText(t, conn, "'0.1'::float4")
	v, err := decodeText(Kind(oid), oid, s)
	if err != nil || float32(v.Float()) != float32(0.1) {
		t.Errorf("float4 0.1 (%q) decoded to %v (%v), which is not the real 0.1", s, v, err)
	}
}

// TestParseTimeOffsets reads timestamptz values written under other time
// zones than the source's UTC: offsets of hours, of hours and minutes
// (+05:30, -03:30), and of local mean time with seconds (+00:19:32,
// -04:56:02).
func TestParseTimeOffsets(t *testing.T) {
	t.Parallel()
	conn := requireServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	cases := []struct {
		zone string
		// instant is a UTC literal.
		instant string
		want    time.Time
		// text is how the server writes it in zone.
		text string
	}{
		{"Asia/Kolkata", "2024-01-01 21:34:05.123456+00", time.Date(2024, 1, 1, 21, 34, 5, 123456000, time.UTC), "2024-01-02 03:04:05.123456+05:30"},
		{"America/St_Johns", "2024-01-02 03:04:05.123456+00", time.Date(2024, 1, 2, 3, 4, 5, 123456000, time.UTC), "2024-01-01 23:34:05.123456-03:30"},
		{"Asia/Tokyo", "2024-06-30 23:00:00.5+00", time.Date(2024, 6, 30, 23, 0, 0, 500000000, time.UTC), "2024-07-01 08:00:00.5+09"},
		{"America/Los_Angeles", "2024-07-01 19:00:00.000001+00", time.Date(2024, 7, 1, 19, 0, 0, 1000, time.UTC), "2024-07-01 12:00:00.000001-07"},
		{"Europe/Amsterdam", "1900-06-01 12:00:00+00", time.Date(1900, 6, 1, 12, 0, 0, 0, time.UTC), "1900-06-01 12:19:32+00:19:32"},
		{"America/New_York", "1880-01-01 00:00:00+00", time.Date(1880, 1, 1, 0, 0, 0, 0, time.UTC), "1879-12-31 19:03:58-04:56:02"},
	}
	for _, c := range cases {
		if _, err := conn.Exec(ctx, "SET TimeZone = '"+c.zone+"'"); err != nil {
			t.Fatal(err)
		}
		var s string
		if err := conn.QueryRow(ctx, "SELECT $1::timestamptz::text", c.instant).Scan(&s); err != nil {
			t.Fatal(err)
		}
		if s != c.text {
			t.Errorf("%s: the server wrote %q, want %q", c.zone, s, c.text)
		}
		got, err := parseTime(oidTimestampTZ, s)
		if err != nil {
			t.Errorf("%s: parseTime(%q): %v", c.zone, s, err)
			continue
		}
		if !got.Equal(c.want) {
			t.Errorf("%s: parseTime(%q) = %v, want %v", c.zone, s, got.UTC(), c.want)
		}
	}
}

// keyTable creates table name with the columns and primary key given,
// inserts the rows (each a list of SQL literals), and describes it.
func keyTable(t *testing.T, conn *pgx.Conn, schema, name, columns string, rows [][]string) *Table {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	q := pgx.Identifier{schema, name}.Sanitize()
	if _, err := conn.Exec(ctx, "CREATE TABLE "+q+" ("+columns+")"); err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if _, err := conn.Exec(ctx, "INSERT INTO "+q+" VALUES ("+strings.Join(r, ", ")+")"); err != nil {
			t.Fatalf("inserting %v: %v", r, err)
		}
	}
	tables, err := describe(ctx, conn, []string{schema + "." + name}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return tables[0]
}

// page reads tb chunk by chunk with chunkQuery (n rows each) as the
// snapshot does and returns the rows' key texts in the order read.
func page(t *testing.T, conn *pgx.Conn, tb *Table, n int) [][]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	var out [][]string
	var after []string
	for chunk := 0; ; chunk++ {
		if chunk > 10000 {
			t.Fatal("paging does not end")
		}
		q, args := chunkQuery(tb, after, n)
		// In text form, as the snapshot reads it.
		rows, err := conn.Query(ctx, q, append([]any{pgx.QueryResultFormats{pgx.TextFormatCode}}, args...)...)
		if err != nil {
			t.Fatalf("%s %v: %v", q, args, err)
		}
		got := 0
		for rows.Next() {
			raw := rows.RawValues()
			var key []string
			for _, k := range tb.Key {
				key = append(key, string(raw[k]))
			}
			out = append(out, key)
			after = key
			got++
		}
		if err := rows.Err(); err != nil {
			t.Fatalf("%s %v: %v", q, args, err)
		}
		if got > n {
			t.Fatalf("a chunk of %d rows, asked for %d", got, n)
		}
		if got < n {
			return out
		}
	}
}

// TestChunkOrderAgreesWithCompareKeys pages through real tables with
// chunkQuery three rows at a time and checks that every row comes exactly
// once, and that the order PostgreSQL returned is the order compareKeys
// gives the decoded keys (the snapshot's segments rest on it). Text keys
// are in a column of a linguistic (ICU) collation, where 'B' sorts
// between 'a' and 'c': the chunks must still follow byte order.
func TestChunkOrderAgreesWithCompareKeys(t *testing.T) {
	t.Parallel()
	conn := requireServer(t)
	schema := uniqueName(t)
	ctx := context.Background()
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := conn.Exec(context.Background(), "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("dropping schema %s: %v", schema, err)
		}
	})
	lit := func(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
	texts := []string{"a", "a ", "ab", "B", "é", "A", "", " ", "a b", "a-", "Z", "z", "ä", "日本", "🎉", "~", "b", "É", "e", "f", "a\t", "aa", "a'b", "ß", "Ä", "ａ"}
	one := func(vals []string, wrap func(string) string) [][]string {
		var out [][]string
		for i, v := range vals {
			out = append(out, []string{wrap(v), fmt.Sprint(i)})
		}
		return out
	}
	var uuids []string
	for i := range 40 {
		// Mixed case in, lower case out; high bytes above 0x7f.
		u := fmt.Sprintf("%08X-%04x-4%03x-8%03x-%012x", uint32(i*0x0fedcba9+i*i*7919), i*31, i, 255-i, uint64(i)*0x9e3779b97f4a&0xffffffffffff)
		uuids = append(uuids, u)
	}
	uuids = append(uuids, "00000000-0000-0000-0000-000000000000", "ffffffff-ffff-ffff-ffff-ffffffffffff", "0a000000-0000-0000-0000-000000000000", "a0000000-0000-0000-0000-000000000000")
	times := []string{
		"2024-01-02 03:04:05.123456+05:30", "2024-01-02 03:04:05.123457+05:30", "2024-01-01 21:34:05.123456+00:01",
		"2024-01-01 21:34:05+00", "1969-12-31 23:59:59.999999+00", "1970-01-01 00:00:00+00", "1900-01-01 00:00:00-04:56:02",
		"2261-12-31 23:59:59.999999+00", "1678-01-01 00:00:00+00", "2024-07-01 12:00:00.000001-07", "2024-07-01 19:00:00.000002+00",
	}
	var composite [][]string
	for _, i := range []int{-1, 0, 2, 1} {
		for _, s := range []string{"b", "B", "a", "a ", "é", ""} {
			composite = append(composite, []string{lit(s), "'x'", fmt.Sprint(i)})
		}
	}
	ints := []string{"-9223372036854775808", "9223372036854775807", "0", "-1", "1", "10", "9", "100", "-10", "2", "20", "3"}
	cases := []struct {
		name, columns string
		rows          [][]string
	}{
		{"text_icu", `k text COLLATE "en-x-icu" PRIMARY KEY, n int`, one(texts, lit)},
		{"text_default", `k text PRIMARY KEY, n int`, one(texts, lit)},
		{"varchar", `k varchar(20) COLLATE "en-x-icu" PRIMARY KEY, n int`, one(texts, lit)},
		{"uuid", `k uuid PRIMARY KEY, n int`, one(uuids, lit)},
		{"int8", `k bigint PRIMARY KEY, n int`, one(ints, func(s string) string { return s })},
		{"timestamptz", `k timestamptz PRIMARY KEY, n int`, one(times, lit)},
		// Key (i, "T x") in the other order than the columns, with names
		// needing quotes.
		{"composite", `"T x" text COLLATE "en-x-icu", payload text, i int, PRIMARY KEY (i, "T x")`, composite},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tb := keyTable(t, conn, schema, c.name, c.columns, c.rows)
			if c.name == "text_icu" {
				// The column's own order is not byte order, or the test
				// would prove nothing about COLLATE "C".
				rows, err := conn.Query(ctx, "SELECT k FROM "+pgx.Identifier{schema, c.name}.Sanitize()+" ORDER BY k")
				if err != nil {
					t.Fatal(err)
				}
				own, err := pgx.CollectRows(rows, pgx.RowTo[string])
				if err != nil {
					t.Fatal(err)
				}
				if slices.IsSorted(own) {
					t.Fatalf("the ICU collation orders the keys as bytes do: %q", own)
				}
			}
			for _, n := range []int{3, 1, len(c.rows), len(c.rows) + 1} {
				keys := page(t, conn, tb, n)
				if len(keys) != len(c.rows) {
					t.Fatalf("chunks of %d: %d rows read, the table has %d: %q", n, len(keys), len(c.rows), keys)
				}
				seen := map[string]bool{}
				var prev []row.Value
				for i, k := range keys {
					if seen[strings.Join(k, "\x00")] {
						t.Fatalf("chunks of %d: key %q read twice", n, k)
					}
					seen[strings.Join(k, "\x00")] = true
					v, err := tb.keyOf(k)
					if err != nil {
						t.Fatalf("key %q: %v", k, err)
					}
					if i > 0 && compareKeys(prev, v) >= 0 {
						t.Errorf("chunks of %d: PostgreSQL returned %q after %q, but compareKeys orders them %d", n, k, keys[i-1], compareKeys(prev, v))
					}
					prev = v
				}
			}
		})
	}
	// The Go order is byte order: check it against a list sorted in Go.
	sorted := slices.Clone(texts)
	slices.Sort(sorted)
	for i := 1; i < len(sorted); i++ {
		if compareKey(row.StringValue(sorted[i-1]), row.StringValue(sorted[i])) >= 0 {
			t.Errorf("compareKey(%q, %q) >= 0", sorted[i-1], sorted[i])
		}
	}
}

// TestDescribeRefusals checks the tables describe refuses, each with an
// error naming the table and the reason.
func TestDescribeRefusals(t *testing.T) {
	t.Parallel()
	conn := requireServer(t)
	schema := uniqueName(t)
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	for _, q := range []string{
		"CREATE SCHEMA " + schema,
		"CREATE TABLE " + schema + ".nokey (a int)",
		"CREATE TABLE " + schema + ".numkey (a numeric PRIMARY KEY)",
		"CREATE TABLE " + schema + ".under (a int PRIMARY KEY, _op text)",
		"CREATE TABLE " + schema + ".ok (b text, a int, PRIMARY KEY (a, b))",
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _, _ = conn.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE") })
	for _, c := range []struct{ table, want string }{
		{"nokey", "has no primary key"},
		{"numkey", "primary key column a is of type numeric"},
		{"under", "column _op starts with _"},
		{"missing", "does not exist"},
	} {
		_, err := describe(ctx, conn, []string{schema + "." + c.table}, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), schema+"."+c.table) {
			t.Errorf("%s: error %v, want one naming the table and %q", c.table, err, c.want)
		}
	}
	tables, err := describe(ctx, conn, []string{schema + ".ok"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ok := tables[0]
	if len(ok.Columns) != 2 || ok.Columns[0].Name != "b" || ok.Columns[0].Key != 2 || ok.Columns[1].Name != "a" || ok.Columns[1].Key != 1 ||
		!slices.Equal(ok.Key, []int{1, 0}) || ok.Columns[0].Type != "text" || ok.Columns[1].Type != "integer" || ok.Columns[1].OID != oidInt4 {
		t.Errorf("ok: described as %+v", ok)
	}
}

// TestStreamedValuesEqualSnapshot reads a row of every mapped type twice:
// once by the snapshot (SELECT ::text) and once as an insert streamed by
// pgoutput. The two records' columns must be equal, value for value: the
// two paths give their text under the same session settings.
func TestStreamedValuesEqualSnapshot(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	cols := `id int PRIMARY KEY, i2 int2, i8 int8, f4 float4, f8 float8, nu numeric, tx text, vc varchar(10), by bytea,
		d date, ts timestamp, tz timestamptz, u uuid, j jsonb, iv interval, o oid, nul text`
	vals := `'0.1', 0.1::float8 + 0.2::float8, '123456789012345678901234567890.000000000000000000001', E'h\u00e9 🎉 \\ "', 'abc', '\x00ff',
		'2024-02-29', '2024-01-02 03:04:05.123456', '2024-01-02 03:04:05.123456+05:30', 'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11',
		'{"b": 1, "a": [1, 2.50]}', '1 day 02:03:04.5', 4294967295, NULL`
	f.exec("CREATE TABLE " + f.quoted("types") + " (" + cols + ")")
	f.exec("INSERT INTO " + f.quoted("types") + " VALUES (1, -32768, -9223372036854775808, " + vals + ")")
	r := start(t, newSource(t, f.config("types")), t.TempDir())
	r.waitFor("the snapshot's row", r.has("insert", "id", row.IntValue(1)))
	r.waitLog("postgres_cdc: streaming", 1)
	f.exec("INSERT INTO " + f.quoted("types") + " VALUES (2, -32768, -9223372036854775808, " + vals + ")")
	recs := r.waitFor("the streamed row", r.has("insert", "id", row.IntValue(2)))
	if len(recs) != 2 {
		t.Fatalf("%d records, want 2:\n%s", len(recs), r.dump(recs))
	}
	snap, streamed := recs[0], recs[1]
	for i, c := range r.src.tables[0].Columns {
		if c.Name == "id" {
			continue
		}
		if snap[i] != streamed[i] {
			t.Errorf("column %s: the snapshot read %v, the stream %v", c.Name, snap[i], streamed[i])
		}
	}
	want := map[string]row.Value{
		"f4": row.FloatValue(0.1), "f8": row.FloatValue(pointThree), "nu": row.StringValue("123456789012345678901234567890.000000000000000000001"),
		"tz": utc(2024, 1, 1, 21, 34, 5, 123456), "by": row.BytesValue("\x00\xff"), "tx": row.StringValue(`hé 🎉 \ "`),
		"u": row.StringValue("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"), "nul": {}, "i8": row.IntValue(math.MinInt64),
	}
	for name, w := range want {
		if got := r.field(streamed, name); got != w {
			t.Errorf("streamed %s = %v, want %v", name, got, w)
		}
	}
	if r.field(snap, LSNField) == r.field(streamed, LSNField) || r.field(streamed, TableField).Str() != f.table("types") {
		t.Errorf("metadata: snapshot %v, streamed %v", r.dump(recs[:1]), r.dump(recs[1:]))
	}
}
