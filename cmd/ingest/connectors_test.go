package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// `ingest connectors` prints the reference docs/yaml.md holds, every
// registered source and sink type included.
func TestConnectorsCommandPrintsTheReference(t *testing.T) {
	root := rootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"connectors"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../../docs/yaml.md")
	if err != nil {
		t.Fatal(err)
	}
	if out.Len() == 0 || !strings.Contains(string(doc), out.String()) {
		t.Errorf("ingest connectors printed %d bytes that docs/yaml.md does not hold", out.Len())
	}
	for _, h := range []string{"#### `datagen` source", "#### `file` source", "#### `kafka` source", "#### `nats` source",
		"#### `file` sink", "#### `kafka` sink", "#### `postgres` sink", "#### `stdout` sink"} {
		if !strings.Contains(out.String(), h+"\n") {
			t.Errorf("no %q in the output", h)
		}
	}
}
