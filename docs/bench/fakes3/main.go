// Command fakes3 serves an S3-compatible API from memory on 127.0.0.1, for
// the recovery benchmark from object storage (docs/benchmarks.md): it keeps
// every object in its own process's memory and loses them when it stops.
//
//	go run ./docs/bench/fakes3 -addr 127.0.0.1:9000 -bucket ckpt
package main

import (
	"flag"
	"log"
	"net/http"

	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/ingest-engine/ingest/internal/fakes3"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9000", "address to listen on")
	bucket := flag.String("bucket", "ckpt", "bucket to create")
	flag.Parse()
	backend := s3mem.New()
	if err := backend.CreateBucket(*bucket); err != nil {
		log.Fatalf("fakes3: creating bucket %s: %v", *bucket, err)
	}
	log.Printf("fakes3: serving bucket %s on http://%s (in memory)", *bucket, *addr)
	log.Fatal(http.ListenAndServe(*addr, fakes3.Handler(backend)))
}
