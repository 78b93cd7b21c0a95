package nats_test

import (
	"strings"
	"testing"

	"github.com/ingest-engine/ingest/connector/nats"
)

// A password or token in the URL appears neither in the plan's description
// nor in the error of a failed connection, which still names the server.
func TestURLSecretsHidden(t *testing.T) {
	t.Parallel()
	for _, url := range []string{
		"nats://ingest:Pw-s3cr3t@127.0.0.1:1",
		"nats://Tok-s3cr3t@127.0.0.1:1",
		"nats://127.0.0.1:2,nats://ingest:Pw-s3cr3t@127.0.0.1:1",
	} {
		src, err := nats.NewSource(nats.SourceConfig{URL: url, Stream: "S"}, nats.JSON[event])
		if err != nil {
			t.Fatal(err)
		}
		if d := src.Describe(); strings.Contains(d, "s3cr3t") || !strings.Contains(d, "xxxxx@127.0.0.1:1") {
			t.Errorf("%s: Describe = %q", url, d)
		}
		_, err = tryOpen(src, nil)
		if err == nil || strings.Contains(err.Error(), "s3cr3t") || !strings.Contains(err.Error(), "127.0.0.1:1") {
			t.Errorf("%s: Open without a server: %v, want an error naming the server without the secret", url, err)
		}
	}
}
