package blob

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/storage"
	"github.com/ingest-engine/ingest/storage/storagetest"
)

// isMetadata reports whether r is a request about a _metadata object.
func isMetadata(r *http.Request, method string) bool {
	return r.Method == method && strings.HasSuffix(r.URL.Path, "/"+storage.MetadataName)
}

func openFake(t *testing.T, f *fakeS3, extra ...string) *Storage {
	t.Helper()
	s, err := Open(context.Background(), f.url("m/"+uniqueName(t), extra...), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// The store commits the metadata but the response is lost; the SDK retries, and the retry's
// conditional create answers "already exists". The write happened: WriteMetadata must succeed,
// not report a failed checkpoint whose metadata is visible (a restore would pick it up while the
// sinks were told to abort its output).
func TestWriteMetadataResponseLost(t *testing.T) {
	t.Parallel()
	f := newFakeS3(t)
	s := openFake(t, f)
	storagetest.MustWrite(t, s, 1, "kg-0", []byte("state"))
	var puts atomic.Int64
	f.setFaults(func(r *http.Request) (int, bool) {
		if isMetadata(r, http.MethodPut) {
			return 0, puts.Add(1) == 1 // the first PUT lands, its answer is lost
		}
		return 0, false
	})
	if err := s.WriteMetadata(context.Background(), 1, []byte("meta")); err != nil {
		t.Fatalf("WriteMetadata = %v, want success: the first PUT landed", err)
	}
	if puts.Load() < 2 {
		t.Fatalf("%d PUTs: the SDK did not retry, so the already-exists path was not taken", puts.Load())
	}
	if got, err := s.ReadMetadata(context.Background(), 1); err != nil || string(got) != "meta" {
		t.Fatalf("ReadMetadata = %q, %v", got, err)
	}
}

// Every PUT of the metadata fails before reaching the store: the call fails, nothing is visible,
// and a later retry succeeds.
func TestWriteMetadataRejected(t *testing.T) {
	t.Parallel()
	f := newFakeS3(t)
	s := openFake(t, f)
	storagetest.MustWrite(t, s, 1, "kg-0", []byte("state"))
	f.setFaults(func(r *http.Request) (int, bool) {
		if isMetadata(r, http.MethodPut) {
			return http.StatusServiceUnavailable, false
		}
		return 0, false
	})
	err := s.WriteMetadata(context.Background(), 1, []byte("meta"))
	if err == nil || !strings.Contains(err.Error(), "chk-0000000001/_metadata") {
		t.Fatalf("WriteMetadata = %v, want an error naming the object", err)
	}
	f.setFaults(nil)
	if _, err := s.ReadMetadata(context.Background(), 1); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("ReadMetadata after a failed write = %v, want ErrNotFound", err)
	}
	if e, err := s.List(context.Background()); err != nil || len(e) != 1 || e[0].Complete {
		t.Fatalf("List = %v, %v; want one incomplete checkpoint", e, err)
	}
	if err := s.WriteMetadata(context.Background(), 1, []byte("meta")); err != nil {
		t.Fatalf("retry: %v", err)
	}
}

// The PUT lands but every answer is lost, and reading it back fails too: the outcome is unknown,
// so WriteMetadata deletes the object and fails. A checkpoint reported as failed must not become
// a recovery point.
func TestWriteMetadataOutcomeUnknown(t *testing.T) {
	t.Parallel()
	f := newFakeS3(t)
	s := openFake(t, f)
	storagetest.MustWrite(t, s, 1, "kg-0", []byte("state"))
	f.setFaults(func(r *http.Request) (int, bool) {
		switch {
		case isMetadata(r, http.MethodPut):
			return 0, true
		case isMetadata(r, http.MethodGet):
			return http.StatusServiceUnavailable, false
		}
		return 0, false
	})
	err := s.WriteMetadata(context.Background(), 1, []byte("meta"))
	if err == nil || !strings.Contains(err.Error(), "outcome unknown") || !strings.Contains(err.Error(), "deleted it") {
		t.Fatalf("WriteMetadata = %v, want a failure saying the outcome was unknown and the object deleted", err)
	}
	f.setFaults(nil)
	if _, err := s.ReadMetadata(context.Background(), 1); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("ReadMetadata = %v, want ErrNotFound: the failed checkpoint must not be complete", err)
	}
}

// A PUT that hangs is bounded by Options.Timeout instead of stalling checkpointing (the runtime
// writes metadata with a context that is never cancelled).
func TestWriteMetadataTimeout(t *testing.T) {
	t.Parallel()
	f := newFakeS3(t)
	s := openFake(t, f, "timeout=300ms")
	release := make(chan struct{})
	defer close(release)
	f.setFaults(func(r *http.Request) (int, bool) {
		if isMetadata(r, http.MethodPut) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return http.StatusServiceUnavailable, false
		}
		return 0, false
	})
	start := time.Now()
	err := s.WriteMetadata(context.Background(), 1, []byte("meta"))
	if err == nil || time.Since(start) > 5*time.Second {
		t.Fatalf("WriteMetadata = %v after %v, want a timeout error within seconds", err, time.Since(start))
	}
	t.Logf("failed after %v: %v", time.Since(start).Round(time.Millisecond), err)
}

// A truncated or corrupt state file is reported as corrupt, naming the object (not retried, not
// returned as data), also through the S3 path.
func TestS3ReadFileCorrupt(t *testing.T) {
	t.Parallel()
	f := newFakeS3(t)
	s := openFake(t, f)
	in := blobInstance(s)
	h := storagetest.MustWrite(t, s, 5, "kg-1", []byte("0123456789abcdef0123456789"))
	full, _ := in.get(t, "chk-0000000005/kg-1")
	in.put(t, "chk-0000000005/kg-1", full[:len(full)-3])
	_, err := s.ReadFile(context.Background(), h)
	if !storage.IsCorrupt(err) || !strings.Contains(err.Error(), s.Location()+"/chk-0000000005/kg-1") {
		t.Fatalf("ReadFile(truncated) = %v", err)
	}
}
