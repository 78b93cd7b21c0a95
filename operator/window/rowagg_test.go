package window_test

import (
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/ingest-engine/ingest/operator/window"
	"github.com/ingest-engine/ingest/row"
)

func TestParseAggregateAccepts(t *testing.T) {
	for _, tc := range []struct {
		expr, fn, field string
	}{
		{"count()", "count", ""},
		{"sum(value)", "sum", "value"},
		{"min(x)", "min", "x"},
		{"max(x)", "max", "x"},
		{"avg(x)", "avg", "x"},
		{"count_distinct(x)", "count_distinct", "x"},
		{"  sum ( value )  ", "sum", "value"},
		{"count( )", "count", ""},
		{"avg(_under_score9)", "avg", "_under_score9"},
		{"max(CamelCase)", "max", "CamelCase"},
	} {
		got, err := window.ParseAggregate("out", tc.expr)
		if err != nil {
			t.Errorf("ParseAggregate(%q): %v", tc.expr, err)
			continue
		}
		if want := (window.AggregateSpec{Name: "out", Func: tc.fn, Field: tc.field}); got != want {
			t.Errorf("ParseAggregate(%q) = %+v, want %+v", tc.expr, got, want)
		}
	}
}

func TestParseAggregateRejects(t *testing.T) {
	for _, tc := range []struct {
		expr string
		msg  []string // each must appear in the error
	}{
		{"count(x)", []string{"count() takes no field"}},
		{"sum()", []string{"sum needs a field"}},
		{"avg()", []string{"avg needs a field"}},
		{"median(x)", []string{"unknown aggregate median", "count, count_distinct, sum, min, max or avg"}},
		{"count_distinct()", []string{"count_distinct needs a field"}},
		{"sum(a, b)", []string{`"sum(a, b)"`, "not an aggregate"}},
		{"sum(value", []string{"not an aggregate"}},
		{"sum value", []string{"not an aggregate"}},
		{"", []string{"not an aggregate"}},
		{"sum(1x)", []string{"not an aggregate"}},
		{"sum(a.b)", []string{"not an aggregate"}},
		{"SUM(x)", []string{"SUM(x)"}},
		{"count()()", []string{"not an aggregate"}},
	} {
		_, err := window.ParseAggregate("out", tc.expr)
		if err == nil {
			t.Errorf("ParseAggregate(%q): no error", tc.expr)
			continue
		}
		for _, m := range tc.msg {
			if !strings.Contains(err.Error(), m) {
				t.Errorf("ParseAggregate(%q): error %q does not say %q", tc.expr, err, m)
			}
		}
	}
}

var aggSchema = &row.Schema{Fields: []row.Field{
	{Name: "k", Kind: row.String},
	{Name: "i", Kind: row.Int},
	{Name: "f", Kind: row.Float},
	{Name: "s", Kind: row.String},
	{Name: "b", Kind: row.Bool},
	{Name: "t", Kind: row.Time},
}}

func specs(t *testing.T, exprs ...string) []window.AggregateSpec {
	t.Helper()
	var out []window.AggregateSpec
	for i := 0; i+1 < len(exprs); i += 2 {
		s, err := window.ParseAggregate(exprs[i], exprs[i+1])
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

func aggRow(i int64, f float64, s string, ts int64) row.Row {
	return row.Row{row.StringValue("key"), row.IntValue(i), row.FloatValue(f), row.StringValue(s), row.BoolValue(i%2 == 0), row.TimeValue(ts)}
}

func TestRowAggregatesCompute(t *testing.T) {
	sp := specs(t,
		"n", "count()",
		"si", "sum(i)", "sf", "sum(f)",
		"mini", "min(i)", "maxi", "max(i)",
		"minf", "min(f)", "maxf", "max(f)",
		"ai", "avg(i)", "af", "avg(f)",
		"mins", "min(s)", "maxs", "max(s)",
		"mint", "min(t)", "maxt", "max(t)",
	)
	agg, fields, result, err := window.RowAggregates(aggSchema, sp)
	if err != nil {
		t.Fatal(err)
	}
	wantKinds := []row.Kind{row.Int, row.Int, row.Float, row.Int, row.Int, row.Float, row.Float, row.Float, row.Float, row.String, row.String, row.Time, row.Time}
	if len(fields) != len(wantKinds) {
		t.Fatalf("fields %v", fields)
	}
	for i, f := range fields {
		if f.Name != sp[i].Name || f.Kind != wantKinds[i] {
			t.Errorf("field %d = %+v, want %s of kind %s", i, f, sp[i].Name, wantKinds[i])
		}
	}

	acc := agg.Init()
	for _, r := range []row.Row{
		aggRow(5, 2.5, "pear", 30),
		aggRow(-3, -1.25, "apple", 10),
		aggRow(10, 0.5, "zebra", 20),
		aggRow(0, 4, "mango", -5),
	} {
		acc = agg.Add(acc, r)
	}
	got := result(acc, nil)
	want := []row.Value{
		row.IntValue(4),
		row.IntValue(12), row.FloatValue(5.75),
		row.IntValue(-3), row.IntValue(10),
		row.FloatValue(-1.25), row.FloatValue(4),
		row.FloatValue(3), row.FloatValue(5.75 / 4),
		row.StringValue("apple"), row.StringValue("zebra"),
		row.TimeValue(-5), row.TimeValue(30),
	}
	if len(got) != len(want) {
		t.Fatalf("result has %d values, want %d: %v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("%s = %v (%s), want %v (%s)", sp[i].Name, got[i], got[i].Kind(), want[i], want[i].Kind())
		}
	}

	// result appends to dst.
	prefix := []row.Value{row.StringValue("p")}
	if out := result(acc, prefix); len(out) != 1+len(want) || out[0] != prefix[0] {
		t.Errorf("result(acc, dst) does not append to dst: %v", out)
	}
}

// Null values are not counted by field aggregates; count() counts rows.
func TestRowAggregatesSkipNulls(t *testing.T) {
	agg, _, result, err := window.RowAggregates(aggSchema, specs(t, "n", "count()", "s", "sum(i)", "a", "avg(i)", "lo", "min(i)"))
	if err != nil {
		t.Fatal(err)
	}
	acc := agg.Init()
	acc = agg.Add(acc, aggRow(4, 0, "", 0))
	acc = agg.Add(acc, row.Row{row.StringValue("key"), {}, {}, {}, {}, {}})
	acc = agg.Add(acc, aggRow(8, 0, "", 0))
	got := result(acc, nil)
	want := []row.Value{row.IntValue(3), row.IntValue(12), row.FloatValue(6), row.IntValue(4)}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("aggregate %d = %v, want %v", i, got[i], want[i])
		}
	}
}

// Large integer sums stay exact (they are not summed as floats).
func TestRowAggregatesIntSumExact(t *testing.T) {
	agg, _, result, err := window.RowAggregates(aggSchema, specs(t, "s", "sum(i)"))
	if err != nil {
		t.Fatal(err)
	}
	acc := agg.Init()
	acc = agg.Add(acc, aggRow(1<<62, 0, "", 0))
	acc = agg.Add(acc, aggRow(1, 0, "", 0))
	if got := result(acc, nil)[0]; got != row.IntValue(1<<62+1) {
		t.Fatalf("sum = %v, want %d", got, int64(1<<62+1))
	}
}

func TestRowAggregatesReject(t *testing.T) {
	for _, tc := range []struct {
		exprs []string
		msg   []string
	}{
		{[]string{"total", "sum(s)"}, []string{"aggregate total", "sum needs a numeric field", "s is string"}},
		{[]string{"m", "avg(s)"}, []string{"aggregate m", "avg needs a numeric field"}},
		{[]string{"m", "sum(b)"}, []string{"sum needs a numeric field", "bool"}},
		{[]string{"m", "min(b)"}, []string{"min needs an ordered field", "bool"}},
		{[]string{"m", "sum(nope)"}, []string{"aggregate m", `no field "nope"`, "k, i, f, s, b, t"}},
	} {
		_, _, _, err := window.RowAggregates(aggSchema, specs(t, tc.exprs...))
		if err == nil {
			t.Errorf("RowAggregates(%v): no error", tc.exprs)
			continue
		}
		for _, m := range tc.msg {
			if !strings.Contains(err.Error(), m) {
				t.Errorf("RowAggregates(%v): error %q does not say %q", tc.exprs, err, m)
			}
		}
	}
	// Every problem at once.
	_, _, _, err := window.RowAggregates(aggSchema, specs(t, "a", "sum(s)", "b", "avg(nope)", "c", "count()"))
	if err == nil || !strings.Contains(err.Error(), "aggregate a") || !strings.Contains(err.Error(), "aggregate b") {
		t.Fatalf("two bad aggregates: %v; want both named", err)
	}
}

func allSpecs(t *testing.T) []window.AggregateSpec {
	return specs(t, "n", "count()", "si", "sum(i)", "sf", "sum(f)", "mins", "min(s)", "maxt", "max(t)", "af", "avg(f)", "maxf", "max(f)")
}

func TestRowAccCodecRoundTrip(t *testing.T) {
	agg, _, result, err := window.RowAggregates(aggSchema, allSpecs(t))
	if err != nil {
		t.Fatal(err)
	}
	if agg.Codec.Name() == "" {
		t.Fatal("codec has no name")
	}
	accs := []window.RowAcc{agg.Init()}
	acc := agg.Init()
	for _, r := range []row.Row{
		aggRow(math.MaxInt64, math.Inf(1), "", math.MinInt64),
		aggRow(-7, math.Copysign(0, -1), "ünïcödé \x00 bytes", 1),
		aggRow(300, 1e-300, strings.Repeat("long", 100), 1<<40),
	} {
		acc = agg.Add(acc, r)
		accs = append(accs, acc)
	}
	for _, a := range accs {
		enc := agg.Codec.Append([]byte("prefix"), a)
		if string(enc[:6]) != "prefix" {
			t.Fatal("Append does not append")
		}
		enc = enc[6:]
		dec, n, err := agg.Codec.Decode(append(enc, 0xff, 0xee))
		if err != nil {
			t.Fatalf("Decode: %v", err)
		}
		if n != len(enc) {
			t.Fatalf("Decode consumed %d bytes, want %d", n, len(enc))
		}
		if !reflect.DeepEqual(dec, a) {
			t.Fatalf("round trip: got %#v, want %#v", dec, a)
		}
		if got, want := result(dec, nil), result(a, nil); !reflect.DeepEqual(got, want) {
			t.Fatalf("results differ after round trip: %v vs %v", got, want)
		}
		for k := range len(enc) {
			if _, _, err := agg.Codec.Decode(enc[:k]); err == nil {
				t.Fatalf("Decode of %d of %d bytes: no error", k, len(enc))
			}
		}
	}
}

func TestRowAccCodecRejectsGarbage(t *testing.T) {
	agg, _, _, err := window.RowAggregates(aggSchema, allSpecs(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range [][]byte{
		nil,
		{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, // overlong uvarint
		{0x7f},                            // 127 cells, no bytes
		{0x01, 0x02, 0x02, 1, 2, 3, 4, 5}, // float sum cut short
	} {
		if _, _, err := agg.Codec.Decode(b); err == nil {
			t.Errorf("Decode(%x): no error", b)
		}
	}
}

// RowAcc is a mutable accumulator: Add and Merge write their first argument,
// so the window operator relies on Clone to give it an accumulator sharing
// nothing with the original (the original may be referenced by a snapshot
// being encoded or by an emitted result). Clone's copy must not change when
// the original does, and the other way round.
func TestRowCloneIsIndependent(t *testing.T) {
	agg, _, result, err := window.RowAggregates(aggSchema, allSpecs(t))
	if err != nil {
		t.Fatal(err)
	}
	if agg.Clone == nil || agg.Merge == nil {
		t.Fatal("row aggregates have no Clone or Merge")
	}
	a1 := agg.Add(agg.Init(), aggRow(5, 1.5, "m", 10))
	c := agg.Clone(a1)
	enc := agg.Codec.Append(nil, c)
	res := result(c, nil)

	_ = agg.Add(a1, aggRow(100, 99, "a", 1000))
	_ = agg.Merge(a1, agg.Add(agg.Init(), aggRow(-100, -99, "z", -1000)))
	if got := agg.Codec.Append(nil, c); string(got) != string(enc) {
		t.Error("changing the original changed its clone")
	}
	if got := result(c, nil); !reflect.DeepEqual(got, res) {
		t.Errorf("clone results changed from %v to %v", res, got)
	}
	if r := result(a1, nil); r[0] != row.IntValue(3) {
		t.Errorf("original count = %v, want 3", r[0])
	}
	_ = agg.Add(c, aggRow(7, 7, "q", 7))
	if r := result(a1, nil); r[0] != row.IntValue(3) {
		t.Errorf("changing the clone changed the original: count %v", r[0])
	}
	// Merge never writes its second argument.
	b := agg.Add(agg.Init(), aggRow(1, 1, "b", 1))
	encB := agg.Codec.Append(nil, b)
	_ = agg.Merge(agg.Init(), b)
	if got := agg.Codec.Append(nil, b); string(got) != string(encB) {
		t.Error("Merge modified its second argument")
	}
}

// count_distinct counts distinct non-null values (floats by value: -0 is 0),
// merges by union, and round-trips through the codec.
func TestRowCountDistinct(t *testing.T) {
	agg, fields, result, err := window.RowAggregates(aggSchema, specs(t, "ds", "count_distinct(s)", "di", "count_distinct(i)", "df", "count_distinct(f)", "n", "count()"))
	if err != nil {
		t.Fatal(err)
	}
	if fields[0].Kind != row.Int {
		t.Errorf("count_distinct field kind %s, want int", fields[0].Kind)
	}
	acc := agg.Init()
	for _, r := range []row.Row{
		aggRow(1, 0.0, "a", 0), aggRow(1, math.Copysign(0, -1), "b", 0), aggRow(2, 1, "a", 0),
		{row.StringValue("key"), {}, {}, {}, {}, {}},
	} {
		acc = agg.Add(acc, r)
	}
	other := agg.Add(agg.Add(agg.Init(), aggRow(3, 1, "c", 0)), aggRow(1, 2, "a", 0))
	want := []row.Value{row.IntValue(2), row.IntValue(2), row.IntValue(2), row.IntValue(4)}
	if got := result(acc, nil); !reflect.DeepEqual(got, want) {
		t.Fatalf("before merge: %v, want %v", got, want)
	}
	acc = agg.Merge(acc, other)
	want = []row.Value{row.IntValue(3), row.IntValue(3), row.IntValue(3), row.IntValue(6)}
	if got := result(acc, nil); !reflect.DeepEqual(got, want) {
		t.Fatalf("after merge: %v, want %v", got, want)
	}
	enc := agg.Codec.Append(nil, acc)
	dec, n, err := agg.Codec.Decode(enc)
	if err != nil || n != len(enc) {
		t.Fatalf("Decode: %v (%d of %d bytes)", err, n, len(enc))
	}
	if got := result(dec, nil); !reflect.DeepEqual(got, want) {
		t.Fatalf("after round trip: %v, want %v", got, want)
	}
	for k := range len(enc) {
		if _, _, err := agg.Codec.Decode(enc[:k]); err == nil {
			t.Fatalf("Decode of %d of %d bytes: no error", k, len(enc))
		}
	}
	if !strings.Contains(agg.Codec.Name(), "count_distinct(s)") {
		t.Errorf("codec name %q does not name the aggregates", agg.Codec.Name())
	}
}
