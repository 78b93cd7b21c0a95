package blob

import (
	"context"
	"errors"
	"fmt"
	"github.com/ingest-engine/ingest/internal/testkit"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/storage"
	"github.com/ingest-engine/ingest/stream"
)

// Hostile cases of object-storage checkpoints: each test names the sentence
// of checkpointing.txt it defends and the issue item.

// otherKeyID is the access key of "another process" in these tests: the fake
// store's faults hit the holder's requests (signed with testKeyID) and let
// the other's through, as a network partition would.
const otherKeyID = "AKIDOTHERHOLDER"

// fromHolder reports whether r was signed with the holder's access key.
func fromHolder(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Authorization"), "Credential="+testKeyID+"/")
}

// outage makes the fake store answer the holder's requests with 503 until
// the returned function is called.
func outage(f *fakeS3) (end func()) {
	f.setFaults(func(r *http.Request) (int, bool) {
		if fromHolder(r) {
			return http.StatusServiceUnavailable, false
		}
		return 0, false
	})
	return func() { f.setFaults(nil) }
}

// waitFor polls cond until it holds, failing the test after 60 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 60 s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// lockSeq returns the sequence number and owner of the lock object.
func lockSeq(t *testing.T, s *Storage) (int64, string) {
	t.Helper()
	rec, _, err := s.readLock(context.Background(), s.loc.prefix+LeaseName)
	if err != nil {
		t.Fatal(err)
	}
	return rec.Seq, rec.Owner
}

// checkpointing.txt: "Checkpoint data is recovery data … and should be
// stored on durable, highly available storage" — and a store that is briefly
// unavailable must not cost the job its lock: an outage shorter than the
// lease (it ends at the first failed renewal) leaves every call working and
// the lock renewed. (#12 item 4d)
func TestLeaseSurvivesAnOutageShorterThanTheLease(t *testing.T) {
	f := newFakeS3(t)
	// Renewals every 4 s, a lapse 9 s after the last one: a failed renewal
	// is retried 1 s later, 5 s before the lapse, room for a loaded machine.
	const lease = 12 * time.Second
	s := openWith(t, f.url("p/"+uniqueName(t)), &Options{Lease: lease})
	release, err := s.Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	var failed atomic.Int64
	f.setFaults(func(r *http.Request) (int, bool) {
		if strings.HasSuffix(r.URL.Path, LeaseName) {
			failed.Add(1)
			return http.StatusServiceUnavailable, false
		}
		return 0, false
	})
	waitFor(t, "a renewal meets the outage", func() bool { return failed.Load() > 0 })
	f.setFaults(nil)
	waitFor(t, "a renewal after the outage", func() bool { seq, _ := lockSeq(t, s); return seq >= 1 })
	if err := s.usable(); err != nil {
		t.Fatalf("after an outage shorter than the lease: %v", err)
	}
	storagetestWrite(t, s, 1)
}

// storagetestWrite writes a state file and the metadata of checkpoint id.
func storagetestWrite(t *testing.T, s *Storage, id int64) {
	t.Helper()
	if _, err := s.WriteFile(context.Background(), id, "kg-0", []byte("x")); err != nil {
		t.Fatalf("WriteFile: %v", err)
	}
	if err := s.WriteMetadata(context.Background(), id, []byte("m")); err != nil {
		t.Fatalf("WriteMetadata: %v", err)
	}
}

// checkpointing.txt: "A restart must not lose accepted data" — an outage
// longer than the lease, with no other process about: while the lease is
// lapsed every call fails with ErrLockLapsed (not ErrLocked: it is not
// final) and nothing reaches the store; once the store answers again and the
// lock object still names this holder, the lock is held again and calls
// succeed. The lapse and the renewal are logged. (#12 item 4d)
func TestLeaseLapsedDuringAnOutageIsReacquired(t *testing.T) {
	f := newFakeS3(t)
	const lease = 600 * time.Millisecond
	s := openWith(t, f.url("p/"+uniqueName(t)), &Options{Lease: lease})
	var log testkit.SyncBuffer
	s.ReportSlowCalls(slog.New(slog.NewTextHandler(&log, nil)), 0)
	release, err := s.Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	var others atomic.Int64 // requests of the holder other than the lease's
	f.setFaults(func(r *http.Request) (int, bool) {
		if !strings.HasSuffix(r.URL.Path, LeaseName) {
			others.Add(1)
		}
		return http.StatusServiceUnavailable, false
	})
	end := func() { f.setFaults(nil) }
	waitFor(t, "the lease lapses", func() bool { return errors.Is(s.usable(), storage.ErrLockLapsed) })
	for _, call := range []func() error{
		func() error { _, err := s.WriteFile(context.Background(), 1, "kg-0", []byte("x")); return err },
		func() error { return s.WriteMetadata(context.Background(), 1, []byte("m")) },
		func() error { return s.Discard(context.Background(), 1) },
		func() error { _, err := s.List(context.Background()); return err },
	} {
		if err := call(); !errors.Is(err, storage.ErrLockLapsed) || errors.Is(err, storage.ErrLocked) || !strings.Contains(err.Error(), "did not answer") {
			t.Fatalf("a call while the lease is lapsed = %v, want ErrLockLapsed (and not ErrLocked)", err)
		}
	}
	if n := others.Load(); n != 0 {
		t.Errorf("%d requests of refused calls reached the store", n)
	}
	end()
	waitFor(t, "the lease is held again", func() bool { return s.usable() == nil })
	if _, owner := lockSeq(t, s); !liveOwner(owner) {
		t.Fatalf("the lock object names %q, not this holder", owner)
	}
	storagetestWrite(t, s, 1)
	// The renewal is logged just after the lease is usable again: wait for
	// the line rather than read the log at once.
	logged := func() bool {
		text := log.String()
		return strings.Contains(text, "level=WARN msg=\"checkpoint storage lock lapsed") && strings.Contains(text, "level=INFO msg=\"checkpoint storage lock renewed after it lapsed")
	}
	waitFor(t, "the lapse and the renewal are logged", logged)
}

// liveOwner reports whether owner is a lock this process holds.
func liveOwner(owner string) bool { _, ok := liveOwners.Load(owner); return ok }

// checkpointing.txt: "A restart must not … combine state from different
// points in the stream" — fencing stays: if another process took the lock
// over while this holder's lease was lapsed, the holder finds it once the
// store answers and stops for good (ErrLocked, naming the new holder),
// leaving the new holder's lock object alone. (#12 item 4d)
func TestLeaseTakenOverDuringAnOutageFences(t *testing.T) {
	f := newFakeS3(t)
	const lease = 600 * time.Millisecond
	raw := f.url("p/" + uniqueName(t))
	s := openWith(t, raw, &Options{Lease: lease})
	release, err := s.Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	end := outage(f)
	waitFor(t, "the lease lapses", func() bool { return errors.Is(s.usable(), storage.ErrLockLapsed) })
	// Another process, which the store still answers, watched the lease
	// unchanged for a whole lease and took over: it deleted the object and
	// created its own.
	other := openWith(t, strings.Replace(raw, testKeyID, otherKeyID, 1), &Options{Lease: lease})
	if err := other.bucket.del(context.Background(), other.loc.prefix+LeaseName); err != nil {
		t.Fatal(err)
	}
	writeLockRecord(t, other, lockRecord{Owner: "usurper", Host: "other-host", PID: 7, Namespace: "other-machine", Lease: "600ms"})
	end()
	waitFor(t, "the holder sees the takeover", func() bool { return errors.Is(s.usable(), storage.ErrLocked) })
	if _, err := s.WriteFile(context.Background(), 1, "kg-0", []byte("x")); !errors.Is(err, storage.ErrLocked) || !strings.Contains(err.Error(), "taken over") {
		t.Fatalf("WriteFile after the takeover = %v, want ErrLocked saying it was taken over", err)
	}
	if _, owner := lockSeq(t, other); owner != "usurper" {
		t.Fatalf("the lock object names %q: the new holder's lock was touched", owner)
	}
}

// checkpointing.txt: "A restart must not lose accepted data, repeat
// already-visible output …" — the contract pipeline with checkpoints on S3
// survives an outage of the store longer than the lease: its lease lapses
// (checkpoints and restarts fail meanwhile), is held again once the store
// answers, and the job ends with exactly the expected windows. Before, it
// stopped with "another process may have taken over". (#12 item 4d)
func TestPipelineSurvivesAStoreOutageLongerThanTheLease(t *testing.T) {
	f := newFakeS3(t)
	st := openURL(t, f.url("jobs/"+uniqueName(t), "lease=900ms"))
	out := filepath.Join(t.TempDir(), "out")
	job := windowJobWith(t, st, out, func(ro *stream.RunOptions) {
		ro.Checkpoint.TolerableFailures = 2
		ro.Restart = runtime.RestartOptions{Delay: 5 * time.Millisecond, MaxDelay: 200 * time.Millisecond, Multiplier: 2, GiveUpAfter: time.Minute}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- job.Run(ctx) }()
	// running fails the test if the job ended, with its error.
	running := func(cond func() bool) func() bool {
		return func() bool {
			select {
			case err := <-done:
				t.Fatalf("the job ended during the outage: %v (stats %+v)", err, job.Stats())
			default:
			}
			return cond()
		}
	}
	waitFor(t, "two checkpoints", running(func() bool { return job.Stats().Completed >= 2 }))
	end := outage(f)
	waitFor(t, "the lease lapses", running(func() bool { return st.usable() != nil }))
	// Checkpoints fail, the job restarts and its recoveries fail, all while
	// the lease is lapsed.
	waitFor(t, "a restart while the lease is lapsed", running(func() bool { return job.Stats().Restarts >= 2 }))
	if !errors.Is(st.usable(), storage.ErrLockLapsed) {
		t.Fatalf("the lease is not lapsed any more during the outage: %v", st.usable())
	}
	completed := job.Stats().Completed
	end()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v (stats %+v), want the job to ride out the outage", err, job.Stats())
	}
	s := job.Stats()
	t.Logf("stats %+v", s)
	if s.Completed <= completed {
		t.Errorf("no checkpoint completed after the outage (%d before, %d at the end)", completed, s.Completed)
	}
	if r := readWindows(t, out); !r.OK() {
		t.Fatalf("committed output is not exact: %s", r)
	}
}

// checkpointing.txt: "Monitor at least: … checkpoint-storage latency" — a
// request the store does not answer is reported while it hangs, naming the
// call and the storage, and its return once it returns. (#12 item 4d)
func TestBlobReportsAHangingCall(t *testing.T) {
	f := newFakeS3(t)
	s := openWith(t, f.url("p/"+uniqueName(t)), nil)
	var log testkit.SyncBuffer
	s.ReportSlowCalls(slog.New(slog.NewTextHandler(&log, nil)), 20*time.Millisecond)
	hang := make(chan struct{})
	f.setFaults(func(r *http.Request) (int, bool) {
		if r.Method == http.MethodGet {
			<-hang
		}
		return 0, false
	})
	done := make(chan error, 1)
	go func() { _, err := s.List(context.Background()); done <- err }()
	waitFor(t, "a WARN for the hanging list", func() bool {
		text := log.String()
		return strings.Contains(text, "level=WARN") && strings.Contains(text, `call="list checkpoints"`) && strings.Contains(text, "storage="+s.Location())
	})
	close(hang)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	waitFor(t, "an INFO once it returned", func() bool {
		return strings.Contains(log.String(), `level=INFO msg="storage call returned" call="list checkpoints"`)
	})
	if strings.Contains(log.String(), testSecret) || strings.Contains(log.String(), testKeyID) {
		t.Errorf("the log shows the credentials:\n%s", log.String())
	}
}

// fakeIMDS is an EC2 instance-metadata service that answers nothing and
// counts the requests it gets; the AWS SDK is pointed at it, in the
// environment, instead of 169.254.169.254.
func fakeIMDS(t *testing.T) *atomic.Int64 {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	noAWSConfig(t)
	t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", srv.URL)
	return &n
}

// noAWSConfig empties the credential chain for the test: no keys, no
// profile, no web identity, no container credentials, no region.
func noAWSConfig(t *testing.T) {
	t.Helper()
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_ACCESS_KEY", "AWS_SECRET_ACCESS_KEY", "AWS_SECRET_KEY", "AWS_SESSION_TOKEN",
		"AWS_PROFILE", "AWS_REGION", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
		"AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_EC2_METADATA_DISABLED", "AWS_EC2_METADATA_SERVICE_ENDPOINT", "AWS_ENDPOINT_URL_STS"} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
}

// A pipeline sends no traffic to an address its user did not configure: an
// s3 URL without credentials, where nothing else provides them, is refused
// at Open with a message saying how to give them, and the instance-metadata
// address is never asked; instance_metadata=true opts in. (#12 item 4f)
func TestS3DoesNotAskInstanceMetadataUnlessAllowed(t *testing.T) {
	imds := fakeIMDS(t)
	f := newFakeS3(t)
	bare := fmt.Sprintf("s3://ckpt/p?endpoint=%s&region=us-east-1&use_path_style=true", f.srv.URL)
	for _, raw := range []string{bare, bare + "&role=arn:aws:iam::123456789012:role/ingest"} {
		s, err := Open(context.Background(), raw, nil)
		if err == nil {
			_, lerr := s.List(context.Background())
			s.Close()
			t.Errorf("Open(%s) without credentials succeeded (List: %v); want a refusal naming instance_metadata=true", raw, lerr)
		} else if !strings.Contains(err.Error(), "instance_metadata=true") || !strings.Contains(err.Error(), "AWS_ACCESS_KEY_ID") {
			t.Errorf("Open without credentials = %v, want a message naming the ways to give them", err)
		}
	}
	if n := imds.Load(); n != 0 {
		t.Fatalf("the instance-metadata address was asked %d times without the user allowing it", n)
	}

	s, err := Open(context.Background(), bare+"&instance_metadata=true", nil)
	if err != nil {
		t.Fatalf("Open with instance_metadata=true: %v", err)
	}
	defer s.Close()
	if _, err := s.List(context.Background()); err == nil {
		t.Fatal("List succeeded without credentials")
	}
	if imds.Load() == 0 {
		t.Fatal("with instance_metadata=true the SDK did not ask the instance-metadata service: the test proves nothing")
	}
	if _, err := Open(context.Background(), bare+"&instance_metadata=maybe", nil); err == nil || !strings.Contains(err.Error(), "want true or false") {
		t.Errorf("instance_metadata=maybe: %v, want a refusal", err)
	}
}
