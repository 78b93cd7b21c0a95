package stream_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/ingest-engine/ingest/connector/datagen"
	"github.com/ingest-engine/ingest/connector/file"
	"github.com/ingest-engine/ingest/internal/testkit"
	"github.com/ingest-engine/ingest/operator/window"
	"github.com/ingest-engine/ingest/state"
	"github.com/ingest-engine/ingest/stream"
)

// PerKey is one committed line of the example: a key's count of records in
// a one-second window.
type PerKey struct {
	Key   int64 `json:"key"`
	Start int64 `json:"start"`
	Count int64 `json:"count"`
}

// The pipeline of the package documentation, run to its end: a bounded
// generator, per-key tumbling windows of one second counting records, and
// the two-phase-commit file sink, whose committed lines it then reads.
func Example() {
	dir, err := os.MkdirTemp("", "stream-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)

	p := stream.New("clicks")
	src, err := datagen.Events(datagen.Config{Count: 3000, Keys: 10}) // one record per ms of event time
	if err != nil {
		fmt.Println(err)
		return
	}
	events := stream.From(p, "events", src, stream.Parallelism(2))
	byKey := stream.KeyBy(events, func(e datagen.Event) int64 { return e.Key })
	count := window.Aggregate[datagen.Event, int64]{
		Init:  func() int64 { return 0 },
		Add:   func(n int64, _ datagen.Event) int64 { return n + 1 },
		Codec: state.Int64Codec{},
	}
	perKey := window.Tumbling(byKey, "per_key", time.Second, count, func(key int64, w window.Window, n int64) PerKey {
		return PerKey{Key: key, Start: w.Start, Count: n}
	})
	stream.To(perKey, "out", file.JSONLines[PerKey](filepath.Join(dir, "out")))
	if err := p.Run(context.Background(), stream.RunOptions{CheckpointDir: filepath.Join(dir, "checkpoints")}); err != nil {
		fmt.Println(err)
		return
	}

	lines, err := testkit.ReadCommitted(filepath.Join(dir, "out"))
	if err != nil {
		fmt.Println(err)
		return
	}
	var total int64
	for _, l := range lines {
		var r PerKey
		if err := json.Unmarshal(l.Text, &r); err != nil {
			fmt.Println(l.File, l.Number, err)
			return
		}
		total += r.Count
	}
	fmt.Printf("%d windows, %d records\n", len(lines), total)
	// Output: 30 windows, 3000 records
}
