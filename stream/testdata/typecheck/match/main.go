// Command match is the control of TestSourceTypeIsChecked: the same program
// as ../mismatch with T inferred, which must compile.
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
	p := stream.New("match")
	events := stream.From(p, "events", src)
	stream.To(events, "out", stream.Discard[datagen.Event]())
}
