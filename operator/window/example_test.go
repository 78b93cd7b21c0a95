package window_test

import (
	"time"

	"github.com/ingest-engine/ingest/connector/datagen"
	"github.com/ingest-engine/ingest/operator/window"
	"github.com/ingest-engine/ingest/state"
	"github.com/ingest-engine/ingest/stream"
)

// Window options mix with node options in a window builder's trailing
// arguments (the snippet of AllowedLateness's documentation). (Compiled, not
// run.)
func ExampleAllowedLateness() {
	p := stream.New("late")
	src, _ := datagen.Events(datagen.Config{Keys: 100})
	ks := stream.KeyBy(stream.From[datagen.Event](p, "events", src), func(e datagen.Event) int64 { return e.Key })
	agg := window.Aggregate[datagen.Event, int64]{
		Init:  func() int64 { return 0 },
		Add:   func(n int64, _ datagen.Event) int64 { return n + 1 },
		Codec: state.Int64Codec{},
	}
	out := func(key int64, w window.Window, n int64) int64 { return n }
	window.Tumbling(ks, "per_key", time.Minute, agg, out,
		stream.Parallelism(4), window.AllowedLateness(10*time.Second), window.LateRecordsTo("late"))
}
