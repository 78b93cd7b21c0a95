// Command mismatch must not compile: it declares a stream of strings over a
// source of datagen.Event (TestSourceTypeIsChecked).
package main

import (
	"github.com/ingest-engine/ingest/connector/datagen"
	"github.com/ingest-engine/ingest/stream"
)

func main() {
	src, err := datagen.Events(datagen.Config{Count: 1})
	if err != nil {
		panic(err)
	}
	p := stream.New("mismatch")
	events := stream.From[string](p, "events", src)
	stream.To(events, "out", stream.Discard[string]())
}
