package blob

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/ingest-engine/ingest/internal/fakes3"
	"github.com/ingest-engine/ingest/storage"
)

// Test credentials: gofakes3 does not check them, the AWS SDK needs some to sign, and giving them
// keeps the SDK from looking for credentials anywhere else (instance metadata is never asked).
const (
	testKeyID  = "AKIDINGESTTEST"
	testSecret = "s3cr3t-do-not-log-me"
)

// fakeS3 is an in-process S3-compatible server (gofakes3 with its in-memory backend) on
// 127.0.0.1, behind a handler that can inject faults.
type fakeS3 struct {
	srv    *httptest.Server
	faults atomic.Pointer[faultFunc]
	// requests counts requests by method.
	mu       sync.Mutex
	requests map[string]int
}

// faultFunc decides about one request: serve it normally (pass), answer with an error status
// without passing it on (reject > 0), or pass it on and then answer with an error status as if
// the response were lost (lose).
type faultFunc func(r *http.Request) (reject int, lose bool)

// newFakeS3 starts a server with the bucket "ckpt". It stops when the test ends.
func newFakeS3(t testing.TB) *fakeS3 {
	t.Helper()
	backend := s3mem.New()
	if err := backend.CreateBucket("ckpt"); err != nil {
		t.Fatal(err)
	}
	f := &fakeS3{requests: map[string]int{}}
	inner := fakes3.Handler(backend)
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.requests[r.Method]++
		f.mu.Unlock()
		if fp := f.faults.Load(); fp != nil {
			reject, lose := (*fp)(r)
			if reject > 0 {
				// An S3 error document whose message echoes the request's credentials, as a
				// misbehaving proxy might: the SDK puts the message into its error.
				w.Header().Set("Content-Type", "application/xml")
				w.WriteHeader(reject)
				fmt.Fprintf(w, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>InjectedFault</Code>"+
					"<Message>injected fault; authorization %s</Message></Error>", html.EscapeString(r.Header.Get("Authorization")))
				return
			}
			if lose {
				inner.ServeHTTP(httptest.NewRecorder(), r)
				http.Error(w, "injected fault: response lost", http.StatusServiceUnavailable)
				return
			}
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// setFaults installs fn (nil: none).
func (f *fakeS3) setFaults(fn faultFunc) {
	if fn == nil {
		f.faults.Store(nil)
		return
	}
	f.faults.Store(&fn)
}

// url returns the s3 URL of prefix in bucket ckpt, with credentials and extra parameters.
func (f *fakeS3) url(prefix string, extra ...string) string {
	u := fmt.Sprintf("s3://%s:%s@ckpt/%s?endpoint=%s&region=us-east-1&use_path_style=true", testKeyID, testSecret, prefix, f.srv.URL)
	for _, e := range extra {
		u += "&" + e
	}
	return u
}

// instance is one storage under test and raw access to what it stores, by key relative to its
// root (e.g. "chk-0000000001/_metadata").
type instance struct {
	storage.Storage
	// where returns the location messages use for rel.
	where func(rel string) string
	get   func(t *testing.T, rel string) ([]byte, bool)
	put   func(t *testing.T, rel string, b []byte)
}

// backend makes fresh instances of one kind of storage.
type backend struct {
	name string
	open func(t *testing.T) instance
}

// backends are every storage the contract tests run against: Local (to show the tests state
// Local's behaviour) and blob over mem://, file:// and s3 (gofakes3).
func backends() []backend {
	return []backend{
		{"local", func(t *testing.T) instance {
			dir := filepath.Join(t.TempDir(), "checkpoints")
			l, err := storage.NewLocal(dir)
			if err != nil {
				t.Fatal(err)
			}
			return instance{
				Storage: l,
				where:   func(rel string) string { return filepath.Join(dir, rel) },
				get: func(t *testing.T, rel string) ([]byte, bool) {
					b, err := os.ReadFile(filepath.Join(dir, rel))
					if os.IsNotExist(err) {
						return nil, false
					}
					if err != nil {
						t.Fatal(err)
					}
					return b, true
				},
				put: func(t *testing.T, rel string, b []byte) {
					p := filepath.Join(dir, rel)
					if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(p, b, 0o644); err != nil {
						t.Fatal(err)
					}
				},
			}
		}},
		{"mem", func(t *testing.T) instance {
			return openInstance(t, "mem://"+uniqueName(t)+"/some/prefix")
		}},
		{"file", func(t *testing.T) instance {
			return openInstance(t, "file://"+filepath.Join(t.TempDir(), "checkpoints"))
		}},
		{"s3", func(t *testing.T) instance {
			return openInstance(t, newFakeS3(t).url("jobs/"+uniqueName(t)))
		}},
	}
}

// openInstance opens rawURL as a blob Storage with raw access through its own bucket.
func openInstance(t *testing.T, rawURL string) instance {
	t.Helper()
	s, err := Open(context.Background(), rawURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return blobInstance(s)
}

func blobInstance(s *Storage) instance {
	return instance{
		Storage: s,
		where:   func(rel string) string { return s.Location() + "/" + rel },
		get: func(t *testing.T, rel string) ([]byte, bool) {
			b, err := s.bucket.get(context.Background(), s.loc.prefix+rel)
			if err != nil {
				return nil, false
			}
			return b, true
		},
		put: func(t *testing.T, rel string, b []byte) {
			if err := s.bucket.put(context.Background(), s.loc.prefix+rel, [][]byte{b}, false); err != nil {
				t.Fatal(err)
			}
		},
	}
}

// uniqueName returns a name unique in the process, for mem buckets and prefixes.
func uniqueName(t testing.TB) string {
	clean := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, t.Name())
	return fmt.Sprintf("%s-%d", clean, nameSeq.Add(1))
}

var nameSeq atomic.Int64
