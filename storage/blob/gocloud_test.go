//go:build gocloud

package blob

import (
	"context"
	"strings"
	"testing"

	gcblob "gocloud.dev/blob"
	"gocloud.dev/blob/memblob"

	"github.com/ingest-engine/ingest/storage/storagetest"
)

// A scheme served by a gocloud.dev driver (here memblob, registered as gcmem: mem is this
// package's own) passes the same contract as the built-in drivers, and the lock works on it.
// Run with: go test -tags gocloud -run Gocloud ./storage/blob/
func init() { gcblob.DefaultURLMux().RegisterBucket("gcmem", &memblob.URLOpener{}) }

func TestGocloudContract(t *testing.T) {
	for name, test := range map[string]func(*testing.T, storagetest.Opener){
		"storage": storagetest.TestStorage, "retention": storagetest.TestRetention,
	} {
		t.Run(name, func(t *testing.T) {
			test(t, func(t *testing.T) storagetest.Instance {
				in := openInstance(t, "gcmem://"+uniqueName(t)+"/p")
				return storagetest.Instance{Storage: in.Storage, Where: in.where, Get: in.get, Put: in.put}
			})
		})
	}
}

func TestGocloudLock(t *testing.T) {
	s := openWith(t, "gcmem://"+uniqueName(t)+"/p", nil)
	release, err := s.Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := s.bucket.exists(context.Background(), s.loc.prefix+LeaseName); err != nil || !ok {
		t.Fatalf("the lease object after Lock: exists %v, %v", ok, err)
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.bucket.exists(context.Background(), s.loc.prefix+LeaseName); err != nil || ok {
		t.Fatalf("the lease object after release: exists %v, %v", ok, err)
	}
}

func TestGocloudUnknownScheme(t *testing.T) {
	_, err := Open(context.Background(), "nosuch://b/p", nil)
	if err == nil || !strings.Contains(err.Error(), "gcmem") || !strings.Contains(err.Error(), "gocloud.dev/blob/gcsblob") {
		t.Fatalf("Open(nosuch://) = %v, want an error naming the linked gocloud.dev schemes and the drivers to import", err)
	}
}
