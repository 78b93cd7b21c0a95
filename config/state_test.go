package config_test

import (
	"path/filepath"
	"testing"

	"github.com/ingest-engine/ingest/config"
	"github.com/ingest-engine/ingest/state"
)

// The state block selects where keyed state lives; its mistakes name the
// line and field, and its directory may not overlap the checkpoint
// directory or a sink's.
func TestStateBlock(t *testing.T) {
	p, err := config.Parse("/work/p.yaml", []byte(base+"state:\n  backend: pebble\n  dir: st\n  cache: 64MiB\n"))
	if err != nil {
		t.Fatal(err)
	}
	if p.State == nil || p.State.Dir != filepath.Join("/work", "st") || p.State.CacheBytes != 64<<20 {
		t.Fatalf("state = %+v, want pebble in /work/st with a 64 MiB cache", p.State)
	}
	if p.RunOptions().LSM != p.State {
		t.Fatal("the run options do not carry the state backend")
	}
	p, err = config.Parse("/work/p.yaml", []byte(base+"state:\n  backend: pebble\n  dir: st\n"))
	if err != nil {
		t.Fatal(err)
	}
	if p.State.CacheBytes != state.DefaultLSMCacheBytes {
		t.Fatalf("default cache %d", p.State.CacheBytes)
	}
	for _, tc := range []struct{ name, block, want string }{
		{"unknown backend", "state:\n  backend: rocksdb\n", `p.yaml:20: state.backend: unknown state backend "rocksdb" (known: memory, pebble)`},
		{"no dir", "state:\n  backend: pebble\n", "p.yaml:20: state.dir: is required"},
		{"bad cache", "state:\n  backend: pebble\n  dir: st\n  cache: lots\n", `p.yaml:22: state.cache: "lots" is not a size`},
		{"zero cache", "state:\n  backend: pebble\n  dir: st\n  cache: 0\n", "p.yaml:22: state.cache: must be positive"},
		{"memory with a dir", "state:\n  dir: st\n", "p.yaml:20: state.dir: applies to backend: pebble only"},
		{"inside the sink", "state:\n  backend: pebble\n  dir: out/state\n", "p.yaml:21: state.dir: "},
		{"the checkpoint dir", "checkpoint:\n  dir: ck\nstate:\n  backend: pebble\n  dir: ck\n", "p.yaml:23: state.dir: "},
		{"unknown field", "state:\n  backend: pebble\n  dir: st\n  size: 1\n", "p.yaml:22: state.size: unknown field"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lines := parseErrs(t, base+tc.block)
			if !hasLine(lines, tc.want) {
				t.Fatalf("errors %q, want one starting %q", lines, tc.want)
			}
		})
	}
}
