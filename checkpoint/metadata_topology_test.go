package checkpoint

import (
	"strings"
	"testing"
)

// The topology a checkpoint records survives Encode and DecodeMetadata, its
// nodes sorted by id so Node finds each; metadata written before topologies
// were recorded decodes with a nil Topology (a restore then skips the checks
// that need it).
func TestMetadata_TopologyRoundTrip(t *testing.T) {
	m := &Metadata{Version: MetadataVersion, Pipeline: "p", JobID: "j", ID: 4, Topology: &Topology{
		MaxParallelism: 64,
		Nodes: []NodeTopology{
			{ID: "w", Type: "window", Parallelism: 3, Key: "field user"},
			{ID: "events", Type: "datagen", Parallelism: 1},
			{ID: "out", Type: "file", Parallelism: 2},
		},
	}}
	data, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeMetadata(data)
	if err != nil {
		t.Fatal(err)
	}
	if got.Topology == nil || got.Topology.MaxParallelism != 64 || len(got.Topology.Nodes) != 3 {
		t.Fatalf("decoded topology %+v", got.Topology)
	}
	for i, id := range []string{"events", "out", "w"} {
		if got.Topology.Nodes[i].ID != id {
			t.Fatalf("decoded nodes %+v, want them sorted by id", got.Topology.Nodes)
		}
	}
	if n, ok := got.Topology.Node("w"); !ok || n != (NodeTopology{ID: "w", Type: "window", Parallelism: 3, Key: "field user"}) {
		t.Errorf("Node(w) = %+v, %v", n, ok)
	}
	if _, ok := got.Topology.Node("gone"); ok {
		t.Error("Node found a node the topology does not have")
	}

	old := strings.Replace(string(data), `"topology"`, `"unknown_field"`, 1)
	got, err = DecodeMetadata([]byte(old))
	if err != nil {
		t.Fatalf("metadata without a topology: %v", err)
	}
	if got.Topology != nil {
		t.Errorf("metadata without a topology decoded with %+v", got.Topology)
	}
}
