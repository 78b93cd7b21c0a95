package kafka_test

import (
	"strings"
	"testing"

	"github.com/ingest-engine/ingest/connector/kafka"
)

// A broker address written with credentials has them masked in the plan's
// description and in the error of a client that cannot use it.
func TestBrokerSecretsHidden(t *testing.T) {
	cfg := kafka.SourceConfig{Brokers: []string{"127.0.0.1:1", "ingest:Pw-s3cr3t@127.0.0.1:2"}, Topic: "t"}
	src, err := kafka.NewSource(cfg, srcDecode)
	if err != nil {
		t.Fatalf("NewSource: %v", err) // it validates addresses only when connecting
	}
	if d := src.Describe(); strings.Contains(d, "s3cr3t") || !strings.Contains(d, "from 127.0.0.1:1,ingest:xxxxx@127.0.0.1:2") {
		t.Errorf("Describe = %q", d)
	}
}
