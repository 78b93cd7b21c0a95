package row_test

import (
	"encoding/json"
	"maps"
	"slices"
	"testing"

	"github.com/ingest-engine/ingest/row"
)

// FuzzRowCodec holds RowCodec and ValueCodec, the encodings of rows in
// keyed state snapshots, to the state.Codec contract on arbitrary bytes:
// Decode returns an error or a value with 0 <= n <= len(src), never panics,
// and a decoded value re-encodes to bytes that decode to the same value,
// consuming exactly them. The seed corpus, testdata/fuzz/FuzzRowCodec, holds
// the encodings of real records (the JSON lines the examples wrote, NATS
// messages) decoded with their inferred schema.
func FuzzRowCodec(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		if r, n, err := (row.RowCodec{}).Decode(data); err == nil {
			if n < 0 || n > len(data) || len(r) > len(data) {
				t.Fatalf("RowCodec decoded %d values using %d of %d bytes", len(r), n, len(data))
			}
			enc := row.RowCodec{}.Append(nil, r)
			r2, n2, err := row.RowCodec{}.Decode(enc)
			if err != nil || n2 != len(enc) || !slices.Equal(r, r2) {
				t.Fatalf("row %v from %x re-encodes to %x, which decodes to %v using %d bytes, %v", r, data[:n], enc, r2, n2, err)
			}
		}
		if v, n, err := (row.ValueCodec{}).Decode(data); err == nil {
			if n <= 0 || n > len(data) {
				t.Fatalf("ValueCodec decoded %v using %d of %d bytes", v, n, len(data))
			}
			enc := row.ValueCodec{}.Append(nil, v)
			v2, n2, err := row.ValueCodec{}.Decode(enc)
			if err != nil || n2 != len(enc) || v2 != v {
				t.Fatalf("value %v from %x re-encodes to %x, which decodes to %v using %d bytes, %v", v, data[:n], enc, v2, n2, err)
			}
		}
	})
}

// FuzzInferSchema infers a schema from two samples, with timeField (when
// not empty) as a time field; FuzzJSONDecode checks single samples against
// encoding/json. The seed corpus, testdata/fuzz/FuzzInferSchema, pairs real
// records. Whatever the input:
//   - the samples' order does not matter: InferSchema(a, b) succeeds exactly
//     when InferSchema(b, a) does, and gives each field the same kind;
//   - on valid JSON, the fields are the keys of a, then the new keys of b,
//     in order of first appearance;
//   - the schema decodes both samples, and a time field is Time.
func FuzzInferSchema(f *testing.F) {
	f.Fuzz(func(t *testing.T, a, b []byte, timeField string) {
		var opts row.JSONOptions
		if timeField != "" {
			opts.TimeFields = []string{timeField}
		}
		s, err := opts.InferSchema(a, b)
		s2, err2 := opts.InferSchema(b, a)
		if (err == nil) != (err2 == nil) {
			t.Fatalf("InferSchema(a, b): %v; InferSchema(b, a): %v", err, err2)
		}
		if err != nil {
			return
		}
		kinds := func(s *row.Schema) map[string]row.Kind {
			m := map[string]row.Kind{}
			for _, f := range s.Fields {
				m[f.Name] = f.Kind
			}
			return m
		}
		k1, k2 := kinds(s), kinds(s2)
		if len(k1) != len(s.Fields) || !maps.Equal(k1, k2) {
			t.Fatalf("the samples' order changes the schema: %v, then %v", s.Fields, s2.Fields)
		}
		if timeField != "" && k1[timeField] != row.Time {
			t.Fatalf("time field %q inferred %v", timeField, k1[timeField])
		}
		d := row.NewJSONDecoder(s, opts)
		for _, sample := range [][]byte{a, b} {
			if _, err := d.Decode(sample); err != nil {
				t.Fatalf("the inferred schema %v does not decode sample %q: %v", s.Fields, sample, err)
			}
		}
		if json.Valid(a) && json.Valid(b) {
			var keys []string
			for _, sample := range [][]byte{a, b} {
				members, _ := oracleMembers(t, sample)
				for _, m := range members {
					if !slices.Contains(keys, m.key) {
						keys = append(keys, m.key)
					}
				}
			}
			if !slices.Equal(s.Names(), keys) {
				t.Fatalf("inferred fields %q, the samples' keys %q", s.Names(), keys)
			}
		}
	})
}
