package blob

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/storage"
	"github.com/ingest-engine/ingest/storage/storagetest"
)

func TestIsURL(t *testing.T) {
	for s, want := range map[string]bool{
		"s3://b/p": true, "file:///tmp/x": true, "mem://": true, "gs://b": true, "azblob://c/p": true,
		"/var/lib/ingest": false, "data/checkpoints": false, `C:\ck`: false, "C:/ck": false, "": false,
		"s3:/b": false, "://b": false,
	} {
		if got := IsURL(s); got != want {
			t.Errorf("IsURL(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestParseLocation(t *testing.T) {
	for _, tc := range []struct {
		raw                 string
		base, prefix, dir   string
		lease, timeout      time.Duration
		driverParams, wrong string
	}{
		{raw: "s3://bucket", base: "s3://bucket"},
		{raw: "s3://bucket/", base: "s3://bucket"},
		{raw: "s3://bucket/a/b/", base: "s3://bucket/a/b", prefix: "a/b/"},
		{raw: "s3://bucket?prefix=a/b&region=eu-west-1", base: "s3://bucket/a/b", prefix: "a/b/", driverParams: "region=eu-west-1"},
		{raw: "s3://k:s@bucket/p?lease=1m&timeout=5s&endpoint=http://127.0.0.1:9000", base: "s3://bucket/p", prefix: "p/",
			lease: time.Minute, timeout: 5 * time.Second, driverParams: "endpoint=http%3A%2F%2F127.0.0.1%3A9000"},
		{raw: "gs://b/x", base: "gs://b/x", prefix: "x/"},
		{raw: "mem://", base: "mem://"},
		{raw: "mem://name/p", base: "mem://name/p", prefix: "p/"},
		{raw: "file:///tmp/ck/", base: "file:///tmp/ck", dir: "/tmp/ck"},
		{raw: "file://localhost/tmp/ck", base: "file:///tmp/ck", dir: "/tmp/ck"},
		{raw: "file://tmp/ck", wrong: "host"},
		{raw: "file:///", wrong: "no directory"},
		{raw: "file:///tmp/ck?prefix=x", wrong: "not supported for file"},
		{raw: "s3:///p", wrong: "no bucket"},
		{raw: "s3://b/p?prefix=q", wrong: "given twice"},
		{raw: "s3://b/a//b", wrong: "empty"},
		{raw: "s3://b/a/../b", wrong: `".."`},
		{raw: "s3://b?lease=soon", wrong: "positive duration"},
		{raw: "s3://b?timeout=-1s", wrong: "positive duration"},
		{raw: "gs://user:pw@b", wrong: "s3 only"},
		{raw: "/not/a/url", wrong: "not a URL"},
	} {
		loc, err := parseLocation(tc.raw)
		if tc.wrong != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wrong) {
				t.Errorf("parseLocation(%q) = %v, want an error saying %q", tc.raw, err, tc.wrong)
			}
			continue
		}
		if err != nil {
			t.Errorf("parseLocation(%q): %v", tc.raw, err)
			continue
		}
		if loc.base != tc.base || loc.prefix != tc.prefix || loc.dir != tc.dir || loc.lease != tc.lease ||
			loc.timeout != tc.timeout || loc.query.Encode() != tc.driverParams {
			t.Errorf("parseLocation(%q) = base %q prefix %q dir %q lease %v timeout %v params %q; want %q %q %q %v %v %q",
				tc.raw, loc.base, loc.prefix, loc.dir, loc.lease, loc.timeout, loc.query.Encode(),
				tc.base, tc.prefix, tc.dir, tc.lease, tc.timeout, tc.driverParams)
		}
	}
}

// No message shows credentials: not Location, not the errors of Open or of any operation.
func TestCredentialsRedacted(t *testing.T) {
	ctx := context.Background()
	f := newFakeS3(t)
	secrets := []string{testSecret, testKeyID, "hunter2", "sekret-token"}
	check := func(what, msg string) {
		t.Helper()
		for _, s := range secrets {
			if strings.Contains(msg, s) {
				t.Errorf("%s shows a secret %q: %s", what, s, msg)
			}
		}
	}

	s, err := Open(ctx, f.url("p"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	check("Location", s.Location())
	if s.Location() != "s3://ckpt/p" {
		t.Errorf("Location = %q, want s3://ckpt/p", s.Location())
	}
	storagetest.MustMeta(t, s, 1, "m")
	entries, err := s.List(ctx)
	if err != nil || len(entries) != 1 {
		t.Fatalf("List = %v, %v", entries, err)
	}
	check("Entry.Path", entries[0].Path)

	// Every operation fails while the server answers 403 with an echo of the request's
	// Authorization header (as a misbehaving proxy might): messages must still be clean.
	f.setFaults(func(r *http.Request) (int, bool) { return http.StatusForbidden, false })
	var errs []error
	_, err = s.WriteFile(ctx, 1, "a", []byte("x"))
	errs = append(errs, err)
	_, err = s.ReadMetadata(ctx, 1)
	errs = append(errs, err)
	_, err = s.List(ctx)
	errs = append(errs, err)
	errs = append(errs, s.Discard(ctx, 1), s.WriteMetadata(ctx, 2, []byte("m")))
	f.setFaults(nil)
	if len(errs) > 0 && errs[0] != nil {
		t.Logf("a failed write reads: %v", errs[0])
		if !strings.Contains(errs[0].Error(), "authorization AWS4-HMAC-SHA256 Credential="+redacted) {
			t.Errorf("the fault did not echo the (redacted) credentials, so redaction went untested: %v", errs[0])
		}
	}
	for i, err := range errs {
		if err == nil {
			t.Errorf("operation %d succeeded against a failing server", i)
			continue
		}
		check(fmt.Sprintf("operation %d error", i), err.Error())
		if !strings.Contains(err.Error(), "s3://ckpt/p") {
			t.Errorf("operation %d error does not name the location: %v", i, err)
		}
	}

	// Errors of Open.
	for _, raw := range []string{
		"s3://" + testKeyID + ":" + testSecret + "@ckpt/p?bogus=1&region=us-east-1",
		"s3://" + testKeyID + ":" + testSecret + "%zz@ckpt/p", // does not parse
		"s3://" + testKeyID + ":" + testSecret + "@ckpt/p?lease=forever",
		"s3://" + testKeyID + "@ckpt/p?region=us-east-1",
		"gs://" + testKeyID + ":hunter2@b/p",
		"nosuch://" + testKeyID + ":hunter2@b/p",
		"mem://b/p?token=sekret-token",
		"s3://ckpt/p?endpoint=http://" + testKeyID + ":hunter2@127.0.0.1:1&lease=x",
	} {
		_, err := Open(ctx, raw, nil)
		if err == nil {
			t.Errorf("Open(%s) succeeded", raw)
			continue
		}
		check("Open error", err.Error())
	}

	// scrub keeps the chain for errors.Is while cleaning the message.
	inner := fmt.Errorf("GET http://u:%s@host/x: %w", testSecret, storage.ErrNotFound)
	clean := scrub(inner, []string{testSecret})
	if strings.Contains(clean.Error(), testSecret) || !errors.Is(clean, storage.ErrNotFound) {
		t.Errorf("scrub = %v (Is ErrNotFound: %v)", clean, errors.Is(clean, storage.ErrNotFound))
	}
	if got := redactRaw("s3://a:b@c/p?x=y"); got != "s3://REDACTED@c/p?REDACTED" {
		t.Errorf("redactRaw = %q", got)
	}
}

func TestOptionsFromURLAndCode(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, "mem://"+uniqueName(t)+"?lease=2m&timeout=3s", nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.opts.Lease != 2*time.Minute || s.opts.Timeout != 3*time.Second {
		t.Errorf("options = %+v", s.opts)
	}
	s, err = Open(ctx, "mem://"+uniqueName(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.opts.Lease != DefaultLease || s.opts.Timeout != DefaultTimeout {
		t.Errorf("default options = %+v", s.opts)
	}
	s, err = Open(ctx, "mem://"+uniqueName(t)+"?lease=2m", &Options{Lease: 2 * time.Minute, Timeout: time.Second})
	if err != nil || s.opts.Lease != 2*time.Minute || s.opts.Timeout != time.Second {
		t.Errorf("Open with agreeing options = %+v, %v", s, err)
	}
	if _, err := Open(ctx, "mem://x?lease=2m", &Options{Lease: time.Minute}); err == nil || !strings.Contains(err.Error(), "set it once") {
		t.Errorf("conflicting lease: %v", err)
	}
	if _, err := Open(ctx, "mem://x", &Options{Timeout: -time.Second}); err == nil || !strings.Contains(err.Error(), "negative") {
		t.Errorf("negative timeout: %v", err)
	}
}

func TestOpenStorage(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "ck")
	st, err := OpenStorage(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := st.(*storage.Local); !ok || st.Location() != dir {
		t.Fatalf("OpenStorage(%s) = %T at %s, want *storage.Local", dir, st, st.Location())
	}
	st, err = OpenStorage(ctx, "mem://"+uniqueName(t)+"/p")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := st.(*Storage); !ok {
		t.Fatalf("OpenStorage(mem://) = %T, want *blob.Storage", st)
	}
	if _, ok := st.(storage.Locker); !ok {
		t.Fatal("blob storage is not a storage.Locker")
	}
	for raw, want := range map[string]string{
		"gs://bucket/p":      `import _ "gocloud.dev/blob/gcsblob"`,
		"azblob://bucket/p":  `import _ "gocloud.dev/blob/gcsblob" or _ "gocloud.dev/blob/azureblob"`,
		"mem://x?region=foo": "no parameters",
	} {
		if _, err := OpenStorage(ctx, raw); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("OpenStorage(%s) = %v, want an error saying %s", raw, err, want)
		}
	}
}

// Opening the same mem:// URL twice finds the same checkpoints (a restart in one process);
// different prefixes of one bucket do not see each other, nor does a prefix its longer siblings.
func TestPrefixesAndSharedMem(t *testing.T) {
	ctx := context.Background()
	name := uniqueName(t)
	open := func(raw string) *Storage {
		s, err := Open(ctx, raw, nil)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a := open("mem://" + name + "/jobs/a")
	storagetest.MustMeta(t, a, 1, "a")
	a.Close()
	again := open("mem://" + name + "/jobs/a")
	if got, err := again.ReadMetadata(ctx, 1); err != nil || string(got) != "a" {
		t.Fatalf("reopened mem bucket: %q, %v", got, err)
	}
	for _, other := range []string{"mem://" + name + "/jobs/ab", "mem://" + name + "/jobs", "mem://" + name, "mem://" + uniqueName(t) + "/jobs/a"} {
		if got := ids(t, open(other)); len(got) != 0 {
			t.Errorf("%s lists %v from mem://%s/jobs/a", other, got, name)
		}
	}
	// The same with s3.
	f := newFakeS3(t)
	s1, s2 := open(f.url("jobs/a")), open(f.url("jobs/ab"))
	storagetest.MustMeta(t, s1, 1, "a")
	storagetest.MustMeta(t, s2, 2, "ab")
	if got := ids(t, s1); len(got) != 1 || got[0] != 1 {
		t.Errorf("jobs/a lists %v", got)
	}
	if got := ids(t, s2); len(got) != 1 || got[0] != 2 {
		t.Errorf("jobs/ab lists %v", got)
	}
}

// fileblob leaves empty directories behind deleted files; Discard removes the checkpoint's.
func TestFileDiscardRemovesDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ck")
	s, err := Open(context.Background(), "file://"+dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	storagetest.MustWrite(t, s, 3, "a", []byte("x"))
	storagetest.MustMeta(t, s, 3, "m")
	if err := s.Discard(context.Background(), 3); err != nil {
		t.Fatal(err)
	}
	if matches, _ := filepath.Glob(filepath.Join(dir, "*")); len(matches) != 0 {
		t.Fatalf("left behind: %v", matches)
	}
}
