//go:build iceberg

package iceberg_test

import (
	"context"
	"testing"
	"time"
)

// TestIcebergHeldBackGrowth: with a commit interval far longer than the
// checkpoint interval, every barrier re-offers every held-back file: the
// committable (encoded on the task goroutine, stored in every checkpoint's
// metadata) grows with each checkpoint.
func TestIcebergHeldBackGrowth(t *testing.T) {
	f := newFixture(t)
	cfg := f.config("growth", kvSchema)
	cfg.CommitInterval = time.Hour
	h := newHarness(t, cfg, "job1", 1)
	ctx := context.Background()
	var sizes []int
	for id := int64(1); id <= 200; id++ {
		h.write(0, ints(id, id))
		c := h.barrier(id)
		n := 0
		for _, b := range c.Committables {
			n += len(b)
		}
		sizes = append(sizes, n)
		if err := h.commit(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("committable bytes at checkpoints 2, 10, 100, 200: %d, %d, %d, %d", sizes[1], sizes[9], sizes[99], sizes[199])
}
