//go:build iceberg

package iceberg_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ingest-engine/ingest/config"
	ice "github.com/ingest-engine/ingest/connector/iceberg"
)

// TestIcebergSpecExampleLoads loads the spec's example (the YAML reference
// shows it) in a binary that has the sink, and the mistakes a pipeline file
// can make with it: each refused at load, naming the field.
func TestIcebergSpecExampleLoads(t *testing.T) {
	node := "    " + strings.ReplaceAll(strings.TrimSpace(ice.SinkSpec.Example), "\n", "\n    ") + "\n"
	load := func(sources, node string) error {
		dir := t.TempDir()
		path := filepath.Join(dir, "p.yaml")
		src := "pipeline: p\ncheckpoint: {dir: ckpt}\nsources:\n" + sources + "sinks:\n  out:\n" + node
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := config.Parse(path, []byte(src))
		return err
	}
	gen := "  events: {type: datagen, count: 10}\n"
	if err := load(gen, node); err != nil {
		t.Fatalf("the spec's example does not load: %v", err)
	}
	for _, tc := range []struct{ name, from, to, want string }{
		{"unknown transform", "bucket(8, key)", "weekday(key)", `unknown transform "weekday"`},
		{"no such column", "bucket(8, key)", "bucket(8, nope)", `no field "nope"`},
		{"day of an int", "bucket(8, key)", "day(key)", "day applies to a time field"},
		{"bad table", "analytics.events", "events", "want namespace.table"},
		{"no warehouse", "warehouse: /var/lib/ingest/warehouse", "name: other", "needs a warehouse"},
		{"unknown catalog", "type: sql", "type: hive", `unknown catalog type "hive"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := strings.Replace(node, tc.from, tc.to, 1)
			if bad == node {
				t.Fatalf("the example has no %q", tc.from)
			}
			err := load(gen, bad)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("loading with %q: %v; want an error saying %q", tc.to, err, tc.want)
			}
		})
	}
}
