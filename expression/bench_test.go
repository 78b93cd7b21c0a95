package expression_test

import (
	"testing"

	"github.com/ingest-engine/ingest/expression"
	"github.com/ingest-engine/ingest/row"
)

var datagen = &row.Schema{Fields: []row.Field{{Name: "id", Kind: row.Int}, {Name: "key", Kind: row.Int}, {Name: "value", Kind: row.Int}}}

// BenchmarkFilterMap measures the per-record cost of a filter (value > 500)
// followed by a map of two fields (key, value * 2), as the YAML operators run
// them: bind, test, bind, evaluate each field into a new row. Half the rows
// pass the filter. Target (issue): at least 2 M rows/s per core.
func BenchmarkFilterMap(b *testing.B) {
	where, err := expression.Compile(datagen, "value > 500", row.Bool)
	if err != nil {
		b.Fatal(err)
	}
	k, err := expression.Compile(datagen, "key", row.Null)
	if err != nil {
		b.Fatal(err)
	}
	doubled, err := expression.Compile(datagen, "value * 2", row.Null)
	if err != nil {
		b.Fatal(err)
	}
	filter, _ := expression.NewEvaluator(where)
	mapper, _ := expression.NewEvaluator(k, doubled)
	rows := make([]row.Row, 1000)
	for i := range rows {
		rows[i] = row.Row{row.IntValue(int64(i)), row.IntValue(int64(i % 100)), row.IntValue(int64(i % 1000))}
	}
	out := make([]row.Value, 2)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		r := rows[i%len(rows)]
		filter.Bind(r, int64(i))
		keep, err := filter.Bool(where)
		if err != nil {
			b.Fatal(err)
		}
		if !keep {
			continue
		}
		mapper.Bind(r, int64(i))
		if out[0], err = mapper.Value(k); err != nil {
			b.Fatal(err)
		}
		if out[1], err = mapper.Value(doubled); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mrows/s")
}

// BenchmarkFilter is the filter alone: one comparison per row.
func BenchmarkFilter(b *testing.B) {
	where, err := expression.Compile(datagen, "value > 500", row.Bool)
	if err != nil {
		b.Fatal(err)
	}
	ev, _ := expression.NewEvaluator(where)
	r := row.Row{row.IntValue(1), row.IntValue(2), row.IntValue(700)}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		ev.Bind(r, int64(i))
		if _, err := ev.Bool(where); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mrows/s")
}
