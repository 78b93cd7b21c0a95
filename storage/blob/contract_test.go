package blob

import (
	"testing"

	"github.com/ingest-engine/ingest/storage"
	"github.com/ingest-engine/ingest/storage/storagetest"
)

// The contract of storage.Storage and the retention functions, as storagetest checks them, run
// against every backend: blob over mem://, file:// and s3, and Local too, so that a difference in
// behaviour shows as a failure of one backend (storage's own tests run the same checks on Local).

func TestContract(t *testing.T) { forEachBackend(t, storagetest.TestStorage) }

func TestContractRetention(t *testing.T) { forEachBackend(t, storagetest.TestRetention) }

// forEachBackend runs test against each of backends() as parallel subtests named after it.
func forEachBackend(t *testing.T, test func(*testing.T, storagetest.Opener)) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			test(t, func(t *testing.T) storagetest.Instance {
				in := b.open(t)
				return storagetest.Instance{Storage: in.Storage, Where: in.where, Get: in.get, Put: in.put}
			})
		})
	}
}

// ids returns the ids of the checkpoints s lists (for location_test.go).
func ids(t *testing.T, s storage.Storage) []int64 {
	t.Helper()
	return storagetest.IDs(t, s)
}
