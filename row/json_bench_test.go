package row_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/row"
)

// benchSchema is a small event: the shape of a typical Kafka message value.
var benchSchema = &row.Schema{Fields: []row.Field{
	{Name: "id", Kind: row.Int},
	{Name: "price", Kind: row.Float},
	{Name: "name", Kind: row.String},
	{Name: "ok", Kind: row.Bool},
	{Name: "ts", Kind: row.Time},
}}

var benchInputs = []struct{ name, in string }{
	{"5fields", `{"id":12345,"price":19.99,"name":"widget","ok":true,"ts":"2026-01-02T03:04:05.123Z"}`},
	{"5fields-epoch-ms", `{"id":12345,"price":19.99,"name":"widget","ok":true,"ts":1767323045123}`},
	{"5fields-zone", `{"id":12345,"price":19.99,"name":"widget","ok":true,"ts":"2026-01-02T04:04:05.123+01:00"}`},
	{"5fields-reordered", `{"ts":"2026-01-02T03:04:05.123Z","ok":true,"name":"widget","price":19.99,"id":12345}`},
	{"5fields-utf8", `{"id":12345,"price":19.99,"name":"wïdget délüxe – 東京","ok":true,"ts":"2026-01-02T03:04:05.123Z"}`},
	{"5fields-escaped", `{"id":12345,"price":19.99,"name":"w\u00efdget \"deluxe\"\n","ok":true,"ts":"2026-01-02T03:04:05.123Z"}`},
	{"5fields+5unknown", `{"id":12345,"user":{"id":7,"tags":["a","b"]},"price":19.99,"sku":"X-1","name":"widget","qty":3,"ok":true,"geo":[1.5,2.5],"ts":"2026-01-02T03:04:05.123Z","v":null}`},
}

func reportRate(b *testing.B) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

func BenchmarkJSONDecode(b *testing.B) {
	d := row.NewJSONDecoder(benchSchema, row.JSONOptions{})
	for _, bi := range benchInputs {
		data := []byte(bi.in)
		b.Run(bi.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := d.Decode(data); err != nil {
					b.Fatal(err)
				}
			}
			reportRate(b)
		})
	}
}

// BenchmarkJSONStdlib is the baseline the hand-rolled decoder replaces:
// encoding/json into a struct (the best case: no Row built) and into a map.
func BenchmarkJSONStdlib(b *testing.B) {
	data := []byte(benchInputs[0].in)
	b.Run("struct", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			var v struct {
				ID    int64     `json:"id"`
				Price float64   `json:"price"`
				Name  string    `json:"name"`
				OK    bool      `json:"ok"`
				TS    time.Time `json:"ts"`
			}
			if err := json.Unmarshal(data, &v); err != nil {
				b.Fatal(err)
			}
		}
		reportRate(b)
	})
	b.Run("map", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			var v map[string]any
			if err := json.Unmarshal(data, &v); err != nil {
				b.Fatal(err)
			}
		}
		reportRate(b)
	})
}

func BenchmarkJSONInferSchema(b *testing.B) {
	samples := make([][]byte, len(benchInputs))
	for i, bi := range benchInputs {
		samples[i] = []byte(bi.in)
	}
	opts := row.JSONOptions{TimeFields: []string{"ts"}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := opts.InferSchema(samples...); err != nil {
			b.Fatal(err)
		}
	}
}
