package config

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/ingest-engine/ingest/storage/blob"
)

// FuzzParse feeds Parse, the YAML loader behind Load, arbitrary pipeline
// files (the seed corpus, testdata/fuzz/FuzzParse, holds the examples and
// every pipeline of the config tests). Whatever the input, Parse returns a
// pipeline or an error, never both and never a panic, and every error is a
// *Error (or several joined) naming the file, as `ingest validate` prints
// them.
//
// Parse is the entry point that only parses, validates and builds the graph:
// it runs nothing. It still reaches outside the process in three places,
// which the target keeps out of reach by skipping the inputs that would get
// there (see fuzzReachesOutside), so that an execution can neither hang nor
// touch the machine:
//   - a source that declares no fields samples its first record to infer
//     them: Kafka and NATS dial the broker, the file source waits up to
//     sampleTimeout for a file;
//   - a CSV file source with fields reads the header of every file its
//     glob matches, which outside the pipeline's directory could be a device;
//   - a checkpoint dir that is a URL opens object storage: file:// creates
//     directories, s3:// builds an AWS client (mem:// stays in memory and is
//     allowed).
//
// The pipeline file lives in a temporary directory holding the example's
// input/trades.csv, so relative paths resolve there and the CSV example
// builds.
func FuzzParse(f *testing.F) {
	dir := f.TempDir()
	trades, err := os.ReadFile(filepath.Join("..", "examples", "input", "trades.csv"))
	if err != nil {
		f.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "input"), 0o755); err != nil {
		f.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "input", "trades.csv"), trades, 0o644); err != nil {
		f.Fatal(err)
	}
	path := filepath.Join(dir, "pipeline.yaml")
	f.Fuzz(func(t *testing.T, data []byte) {
		if fuzzReachesOutside(data) {
			t.Skip("the pipeline would sample a service or read or create files outside its directory")
		}
		p, err := Parse(path, data)
		if err == nil {
			if p == nil || p.Stream == nil {
				t.Fatalf("Parse returned neither a pipeline nor an error")
			}
			return
		}
		if p != nil {
			t.Fatalf("Parse returned a pipeline and the error %v", err)
		}
		var leaves []error
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			leaves = j.Unwrap()
		} else {
			leaves = []error{err}
		}
		if len(leaves) == 0 {
			t.Fatalf("Parse returned an empty error %v", err)
		}
		for _, e := range leaves {
			var ce *Error
			if !errors.As(e, &ce) || ce.File != path || ce.Msg == "" || ce.Line < 0 {
				t.Fatalf("error %q (%T) is not a configuration error naming %s", e, e, path)
			}
		}
	})
}

// fuzzReachesOutside reports whether Parse could reach a service or files
// outside the pipeline's directory for data (see FuzzParse). It reads the
// YAML tree as Parse does (no alias expansion; Parse reads only mappings),
// conservatively: every occurrence of a repeated key counts.
func fuzzReachesOutside(data []byte) bool {
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) != nil || len(doc.Content) == 0 {
		return false // Parse stops at the syntax error or the empty file
	}
	top := doc.Content[0]
	for _, cp := range fuzzValues(top, "checkpoint") {
		for _, d := range fuzzValues(cp, "dir") {
			if blob.IsURL(d.Value) && !strings.HasPrefix(strings.ToLower(d.Value), "mem://") {
				return true
			}
		}
	}
	for _, sources := range fuzzValues(top, "sources") {
		if sources.Kind != yaml.MappingNode {
			continue
		}
		for i := 1; i < len(sources.Content); i += 2 {
			src := sources.Content[i]
			for _, p := range fuzzValues(src, "path") {
				if filepath.IsAbs(p.Value) || slices.Contains(strings.Split(filepath.ToSlash(p.Value), "/"), "..") {
					return true
				}
			}
			if len(fuzzValues(src, "fields")) > 0 {
				continue // declared fields: nothing is sampled
			}
			for _, typ := range fuzzValues(src, "type") {
				if _, ok := sourceTypes[typ.Value]; ok && typ.Value != "datagen" {
					return true
				}
			}
		}
	}
	return false
}

// fuzzValues returns the values of key in the mapping m, every occurrence.
func fuzzValues(m *yaml.Node, key string) []*yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	var out []*yaml.Node
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			out = append(out, m.Content[i+1])
		}
	}
	return out
}
