//go:build !gocloud

package blob

import (
	"context"
	"strings"
	"testing"
)

// The default build has no gocloud.dev: a gs:// URL is refused, saying how to build one that
// has it.
func TestGsNeedsTheGocloudTag(t *testing.T) {
	_, err := Open(context.Background(), "gs://bucket/p", nil)
	if err == nil || !strings.Contains(err.Error(), "-tags gocloud") {
		t.Fatalf("Open(gs://) = %v, want an error naming -tags gocloud", err)
	}
}
