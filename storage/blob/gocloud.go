//go:build gocloud

package blob

// With the build tag gocloud, URLs of schemes this package has no driver of (gs, azblob, …) open
// through gocloud.dev/blob's default URL mux, for programs that link a gocloud.dev driver in:
//
//	import _ "gocloud.dev/blob/gcsblob"   // gs://
//	import _ "gocloud.dev/blob/azureblob" // azblob://
//
// The default build leaves gocloud.dev out: it brings gRPC, the Google API client and
// OpenTelemetry into every build (docs/benchmarks.md, "First build").

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"

	gcblob "gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

func init() { openOther = openGocloud }

// openGocloud opens loc through gocloud.dev's default URL mux; the URL's parameters (all but
// lease, timeout and prefix) go to the driver.
func openGocloud(ctx context.Context, loc *location) (bucket, bool, error) {
	mux := gcblob.DefaultURLMux()
	if !mux.ValidBucketScheme(loc.scheme) {
		return nil, false, fmt.Errorf("no driver for scheme %q in this binary (linked: s3, file, mem, and through gocloud.dev %v); gs and azblob need "+
			`import _ "gocloud.dev/blob/gcsblob" or _ "gocloud.dev/blob/azureblob" in the main package`, loc.scheme, mux.BucketSchemes())
	}
	b, err := mux.OpenBucketURL(ctx, &url.URL{Scheme: loc.scheme, Host: loc.bucket, RawQuery: loc.query.Encode()})
	if err != nil {
		return nil, false, err
	}
	return &gocloudBucket{b: b}, true, nil
}

// gocloudBucket is a bucket through gocloud.dev/blob.
type gocloudBucket struct {
	b *gcblob.Bucket // immutable
}

// gcClassify marks gocloud.dev's NotFound and FailedPrecondition errors as errNotExist and
// errExists.
func gcClassify(err error) error {
	switch gcerrors.Code(err) {
	case gcerrors.OK:
		return err
	case gcerrors.NotFound:
		return &driverError{kind: errNotExist, err: err}
	case gcerrors.FailedPrecondition:
		return &driverError{kind: errExists, err: err}
	}
	return err
}

func (g *gocloudBucket) put(ctx context.Context, key string, parts [][]byte, ifNotExist bool) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := g.b.NewWriter(ctx, key, &gcblob.WriterOptions{ContentType: "application/octet-stream", IfNotExist: ifNotExist})
	if err != nil {
		return gcClassify(err)
	}
	for _, p := range parts {
		if _, err := w.Write(p); err != nil {
			cancel() // abort: Close then discards the upload
			_ = w.Close()
			return gcClassify(err)
		}
	}
	return gcClassify(w.Close())
}

func (g *gocloudBucket) get(ctx context.Context, key string) ([]byte, error) {
	b, err := g.b.ReadAll(ctx, key)
	return b, gcClassify(err)
}

func (g *gocloudBucket) exists(ctx context.Context, key string) (bool, error) {
	ok, err := g.b.Exists(ctx, key)
	return ok, gcClassify(err)
}

func (g *gocloudBucket) del(ctx context.Context, key string) error {
	if err := gcClassify(g.b.Delete(ctx, key)); err != nil && !errors.Is(err, errNotExist) {
		return err
	}
	return nil
}

func (g *gocloudBucket) list(ctx context.Context, prefix string, delimiter bool) ([]listEntry, error) {
	opts := &gcblob.ListOptions{Prefix: prefix}
	if delimiter {
		opts.Delimiter = "/"
	}
	it := g.b.List(opts)
	var out []listEntry
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, gcClassify(err)
		}
		out = append(out, listEntry{key: obj.Key, isDir: obj.IsDir})
	}
}

func (g *gocloudBucket) close() error { return g.b.Close() }
