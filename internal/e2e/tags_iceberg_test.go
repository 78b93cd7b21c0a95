//go:build iceberg

package e2e

// binaryTags are the build flags of the ingest binary the tests run: the
// test binary's own build tags, so that a run with -tags iceberg drives a
// binary that has the Iceberg sink.
var binaryTags = []string{"-tags", "iceberg"}
