package config_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/config"
	"github.com/ingest-engine/ingest/runtime"
)

// Windows and joins describe their keys (runtime.Node.KeyDesc) in the words
// of the spec, so checkpoints record them and a restore after the key
// changed is refused (docs/reliability.md, "Failure handling").
func TestKeyedNodesDescribeTheirKeys(t *testing.T) {
	p, _ := load(t, `pipeline: keys
sources:
  a: {type: datagen, count: 10}
  b: {type: datagen, count: 10}
transforms:
  per_key: {type: window, input: a, key: key, size: 1s, aggregates: {n: count()}}
  pairs:
    type: join
    kind: window
    left: a
    right: b
    on: {left: key % 4, right: value}
    size: 1s
    select: {lid: left.id, rid: right.id}
sinks:
  out: {type: stdout, input: per_key}
  pairs_out: {type: stdout, input: pairs}
`)
	n := nodes(t, p)
	for id, want := range map[string]string{
		"per_key": "field key",
		"pairs":   "left expression key % 4, right field value",
		"a":       "",
	} {
		if got := n[id].KeyDesc; got != want {
			t.Errorf("node %s: KeyDesc %q, want %q", id, got, want)
		}
	}
}

// A YAML window whose key field changed does not restore the checkpoint its
// old version wrote: the error names the operator and both keys.
func TestWindowKeyChangeRefusedAtRestore(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a pipeline")
	}
	dir := t.TempDir()
	ckpts := filepath.Join(dir, "ckpts")
	spec := func(key string) string {
		return fmt.Sprintf(`pipeline: rekey
checkpoint: {interval: 50ms, dir: %s}
restart: {max_attempts: 3}
sources:
  events: {type: datagen, count: 300, keys: 5}
transforms:
  per_key: {type: window, input: events, key: %s, size: 100ms, parallelism: 2, aggregates: {n: count()}}
sinks:
  out: {type: file, input: per_key, path: out}
`, ckpts, key)
	}
	run := func(key string) error {
		t.Helper()
		p, err := config.Parse(filepath.Join(dir, "p.yaml"), []byte(spec(key)))
		if err != nil {
			t.Fatalf("Parse:\n%v", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		return p.Stream.Run(ctx, p.RunOptions())
	}
	if err := run("key"); err != nil {
		t.Fatalf("first run: %v", err)
	}
	err := run("value")
	if !errors.Is(err, runtime.ErrIncompatible) || !strings.Contains(err.Error(), `operator "per_key": key changed from "field key" to "field value"`) {
		t.Fatalf("run with another key field = %v, want a refusal naming per_key and both keys", err)
	}
	if err := run("key"); err != nil {
		t.Errorf("run with the original key again: %v", err)
	}
}
