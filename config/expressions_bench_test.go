package config_test

import (
	"testing"

	"github.com/ingest-engine/ingest/config"
	"github.com/ingest-engine/ingest/row"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/stream"
)

// countOutput counts the records emitted to it.
type countOutput struct{ n int }

func (c *countOutput) Emit(r runtime.Records) error {
	c.n += len(r.(stream.Batch[row.Row]))
	return nil
}

// BenchmarkFilterMapOperators runs the operators a YAML filter (value > 500)
// and map (key, doubled: value * 2) build, batch by batch as the runtime
// hands them over (1024 datagen rows a batch, half kept), on one goroutine:
// the per-row cost on one core, without channels or the source.
//
//	go test -run '^$' -bench FilterMapOperators ./config/
func BenchmarkFilterMapOperators(b *testing.B) {
	p, err := config.Parse("p.yaml", []byte(`pipeline: bench
sources:
  events:
    type: datagen
transforms:
  f:
    type: filter
    input: events
    where: value > 500
  m:
    type: map
    input: f
    select:
      key: key
      doubled: value * 2
sinks:
  out:
    type: stdout
    input: m
`))
	if err != nil {
		b.Fatal(err)
	}
	plan, err := p.Stream.Plan()
	if err != nil {
		b.Fatal(err)
	}
	ops := map[string]runtime.Operator{}
	for _, n := range plan.Nodes {
		if n.ID == "f" || n.ID == "m" {
			ops[n.ID] = n.NewOperator()
		}
	}
	sink := &countOutput{}
	// The filter's output goes straight into the map, as in a chain.
	toMap := outputFunc(func(r runtime.Records) error { return ops["m"].ProcessBatch(0, r) })
	if err := ops["m"].Open(&runtime.Context{Output: sink}); err != nil {
		b.Fatal(err)
	}
	if err := ops["f"].Open(&runtime.Context{Output: toMap}); err != nil {
		b.Fatal(err)
	}
	batch := make(stream.Batch[row.Row], 1024)
	for i := range batch {
		batch[i] = stream.Record[row.Row]{Value: row.Row{row.IntValue(int64(i)), row.IntValue(int64(i % 100)), row.IntValue(int64(i % 1000))}, Time: int64(i)}
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := ops["f"].ProcessBatch(0, batch); err != nil {
			b.Fatal(err)
		}
	}
	rows := float64(b.N) * float64(len(batch))
	b.ReportMetric(b.Elapsed().Seconds()*1e9/rows, "ns/row")
	b.ReportMetric(rows/b.Elapsed().Seconds()/1e6, "Mrows/s")
	if sink.n == 0 {
		b.Fatal("nothing reached the map's output")
	}
}

// outputFunc is a runtime.Output calling a function.
type outputFunc func(runtime.Records) error

func (f outputFunc) Emit(r runtime.Records) error { return f(r) }
