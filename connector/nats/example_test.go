package nats_test

import (
	"fmt"
	"time"

	"github.com/ingest-engine/ingest/connector/nats"
	"github.com/ingest-engine/ingest/stream"
	"github.com/ingest-engine/ingest/watermark"
)

// Event is the JSON payload of the example's messages.
type Event struct {
	ID int64  `json:"id"`
	TS string `json:"ts"`
}

// The package documentation's source: a JetStream stream read from the
// sequence of the restored checkpoint, its event time taken from each
// message's "ts" field. (Compiled, not run: it needs a server.)
func Example() {
	p := stream.New("clicks")
	src, err := nats.NewSource(nats.SourceConfig{
		URL:       "nats://127.0.0.1:4222",
		Stream:    "EVENTS",
		Subject:   "events.>",
		Watermark: watermark.Strategy{MaxDelay: time.Second, IdleTimeout: 5 * time.Second},
	}, nats.JSONWithTime[Event]("ts"))
	if err != nil {
		fmt.Println(err)
		return
	}
	events := stream.From(p, "events", src)
	_ = events
}
