package row_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/ingest-engine/ingest/row"
)

func schemaString(s *row.Schema) string {
	var b strings.Builder
	for i, f := range s.Fields {
		if i > 0 {
			b.WriteString(" ")
		}
		b.WriteString(f.Name + ":" + f.Kind.String())
	}
	return b.String()
}

// Each row is a rule of JSONOptions.InferSchema's doc.
func TestInferSchema(t *testing.T) {
	for _, tc := range []struct {
		name       string
		timeFields []string
		samples    []string
		want       string // fields as name:kind, or the error
	}{
		{"every type", nil,
			[]string{`{"i":1,"f":1.5,"s":"x","b":true,"o":{"a":1},"a":[1],"n":null}`},
			"i:int f:float s:string b:bool o:string a:string n:string"},
		{"order of first appearance", nil,
			[]string{`{"b":1,"a":2}`, `{"c":3,"a":4}`, `{"d":5}`},
			"b:int a:int c:int d:int"},
		{"int then float is float", nil,
			[]string{`{"x":1}`, `{"x":2.5}`, `{"x":3}`},
			"x:float"},
		{"float then int is float", nil,
			[]string{`{"x":2.5}`, `{"x":3}`},
			"x:float"},
		{"a fraction or exponent says float", nil,
			[]string{`{"x":3.0,"y":1e3}`},
			"x:float y:float"},
		{"integers past int64 are float", nil,
			[]string{`{"x":9223372036854775808}`},
			"x:float"},
		{"null says nothing", nil,
			[]string{`{"x":null}`, `{"x":true}`, `{"x":null}`},
			"x:bool"},
		{"strings and nested values are string", nil,
			[]string{`{"x":"a"}`, `{"x":{"k":[]}}`, `{"x":[1]}`},
			"x:string"},
		{"time-like strings stay string", nil,
			[]string{`{"ts":"2026-01-02T03:04:05Z"}`},
			"ts:string"},
		{"time field from strings", []string{"ts"},
			[]string{`{"ts":"2026-01-02T03:04:05Z","s":"2026-01-02T03:04:05Z"}`},
			"ts:time s:string"},
		{"time field from epoch milliseconds", []string{"ts"},
			[]string{`{"ts":1767323045123}`, `{"ts":1767323045123.5}`, `{"ts":"2026-01-02T03:04:05Z"}`, `{"ts":null}`},
			"ts:time"},
		{"a null time field is time", []string{"ts"},
			[]string{`{"ts":null,"x":null}`},
			"ts:time x:string"},
		{"escaped names", nil,
			[]string{`{"a\u0062":1,"ab":2}`},
			"ab:int"},
		{"space and unknown order", nil,
			[]string{" {\n\"x\" : 1 }\n", `{}`},
			"x:int"},

		{"no samples", nil, nil, "infer schema: no samples"},
		{"no fields", nil, []string{`{}`, `{}`}, "infer schema: the samples have no fields"},
		{"not an object", nil, []string{`{"x":1}`, `[1]`}, "infer schema: sample 2: not a JSON object (got array)"},
		{"invalid JSON", nil, []string{`{"x":1`}, "infer schema: sample 1: invalid JSON at byte 6: unexpected end of input"},
		{"invalid JSON beats a conflict", nil, []string{`{"x":1}`, `{"x":"a",}`},
			"infer schema: sample 2: invalid JSON at byte 9: invalid character '}' looking for beginning of object key string"},
		{"number then string", nil, []string{`{"x":1}`, `{"x":null}`, `{"x":"a"}`},
			`infer schema: sample 3: field "x" is a string, but sample 1 has an integer there`},
		{"bool then float", nil, []string{`{"x":false}`, `{"x":0.5}`},
			`infer schema: sample 2: field "x" is a non-integer number, but sample 1 has a bool there`},
		{"object then number", nil, []string{`{"x":{}}`, `{"x":1}`},
			`infer schema: sample 2: field "x" is an integer, but sample 1 has an object there`},
		{"time field missing", []string{"ts"}, []string{`{"x":1}`},
			`infer schema: time field "ts" is in no sample`},
		{"time field not a time", []string{"ts"}, []string{`{"ts":"soon"}`},
			`infer schema: sample 1: time field "ts": "soon" is not RFC 3339`},
		{"time field a bool", []string{"ts"}, []string{`{"ts":true}`},
			`infer schema: sample 1: time field "ts" is a bool; want an RFC 3339 string or a number of epoch milliseconds`},
		{"time field too fine", []string{"ts"}, []string{`{"ts":1.0000001}`},
			`infer schema: sample 1: time field "ts": 1.0000001 is epoch milliseconds finer than a nanosecond`},
		{"time field out of range", []string{"ts"}, []string{`{"ts":1e30}`},
			`infer schema: sample 1: time field "ts": 1e30 is epoch milliseconds outside the years 1678 to 2262`},
		{"a float no kind holds", nil, []string{`{"x":1e400}`},
			`infer schema: sample 1: field "x": want float, got number 1e400 (out of float64 range)`},
	} {
		samples := make([][]byte, len(tc.samples))
		for i, s := range tc.samples {
			samples[i] = []byte(s)
		}
		s, err := row.JSONOptions{TimeFields: tc.timeFields}.InferSchema(samples...)
		got := ""
		if err != nil {
			got = err.Error()
		} else {
			got = schemaString(s)
		}
		if got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

// An inferred schema decodes its samples; errors keep their class.
func TestInferSchemaDecodesSamples(t *testing.T) {
	samples := [][]byte{
		[]byte(`{"id":1,"price":9.5,"tags":["a"],"ts":"2026-01-02T03:04:05Z"}`),
		[]byte(`{"id":2,"price":10,"note":null,"ts":1767323045000}`),
	}
	opts := row.JSONOptions{TimeFields: []string{"ts"}}
	s, err := opts.InferSchema(samples...)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := schemaString(s), "id:int price:float tags:string ts:time note:string"; got != want {
		t.Fatalf("schema %s, want %s", got, want)
	}
	d := row.NewJSONDecoder(s, opts)
	r, err := d.Decode(samples[1])
	if err != nil {
		t.Fatal(err)
	}
	if ts, err := d.EventTime(r, s.Index("ts")); err != nil || ts != 1767323045000*1e6 {
		t.Errorf("event time %d, %v", ts, err)
	}
	if r[1] != row.FloatValue(10) || r[2] != (row.Value{}) {
		t.Errorf("row %v", r)
	}

	_, err = row.InferSchema([]byte(`{"x":`))
	var se *row.JSONSyntaxError
	if !errors.As(err, &se) || se.Offset != 5 {
		t.Errorf("error %v, want a *JSONSyntaxError at byte 5", err)
	}
	if _, err = row.InferSchema([]byte(`"x"`)); !errors.Is(err, row.ErrNotJSONObject) {
		t.Errorf("error %v, want ErrNotJSONObject", err)
	}
}
