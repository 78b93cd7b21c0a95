package config_test

import (
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/ingest-engine/ingest/config"
)

// update rewrites the generated part of docs/yaml.md:
// go test ./config -run TestConnectorReferenceIsCurrent -update
var update = flag.Bool("update", false, "rewrite docs/yaml.md's generated connector reference")

const (
	referenceBegin = "<!-- BEGIN connector reference: generated from the connectors' specs by `go test ./config -run TestConnectorReferenceIsCurrent -update`; do not edit -->\n"
	referenceEnd   = "<!-- END connector reference -->\n"
)

// docs/yaml.md's connector reference is the one the registered specs give:
// a connector's fields, defaults and docs are written once, beside its code.
func TestConnectorReferenceIsCurrent(t *testing.T) {
	const path = "../docs/yaml.md"
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	i, j := strings.Index(doc, referenceBegin), strings.Index(doc, referenceEnd)
	if i < 0 || j < i {
		t.Fatalf("%s has no %q ... %q block", path, referenceBegin, referenceEnd)
	}
	got, want := doc[i+len(referenceBegin):j], "\n"+config.ConnectorReference()+"\n"
	if got == want {
		return
	}
	if *update {
		if err := os.WriteFile(path, []byte(doc[:i+len(referenceBegin)]+want+doc[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s's connector reference is not what the specs give; run\n  go test ./config -run TestConnectorReferenceIsCurrent -update", path)
}
