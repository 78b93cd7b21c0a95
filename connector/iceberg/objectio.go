//go:build iceberg

package iceberg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	stdio "io"
	"io/fs"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	iceio "github.com/apache/iceberg-go/io"

	"github.com/ingest-engine/ingest/storage/blob"
)

// This file gives iceberg-go a file IO for s3:// warehouses (s3a:// and
// s3n:// too, as other engines write them) over storage/blob's minio-go
// driver: the tagged build reads and writes tables in S3 and S3-compatible
// stores without iceberg-go's cloud IO and the modules it brings.
//
// The store is configured by Iceberg's standard FileIO properties, which
// the catalog's properties (catalog.properties) carry: s3.endpoint,
// s3.region, s3.path-style-access (or its opposite,
// s3.force-virtual-addressing), s3.access-key-id and s3.secret-access-key.
// Without keys, credentials come from the environment, as for checkpoint
// storage (storage/blob).

func init() {
	for _, scheme := range []string{"s3", "s3a", "s3n"} {
		iceio.Register(scheme, openObjectIO)
	}
}

// objectCallTimeout bounds every store call: the IO's methods take no
// context, and a call that hangs must fail rather than stall the job.
const objectCallTimeout = 10 * time.Minute

// buckets are the buckets opened, by their blob URL: a table is loaded
// many times, and each load asks for its IO.
var buckets sync.Map // string → *blob.Objects

// openObjectIO is the iceio.SchemeFactory of s3 URLs.
func openObjectIO(ctx context.Context, u *url.URL, props map[string]string) (iceio.IO, error) {
	raw, err := bucketURL(u, props)
	if err != nil {
		return nil, err
	}
	if o, ok := buckets.Load(raw); ok {
		return &objectIO{o: o.(*blob.Objects), scheme: u.Scheme, bucket: u.Host}, nil
	}
	o, err := blob.OpenObjects(ctx, raw)
	if err != nil {
		return nil, fmt.Errorf("iceberg warehouse %s://%s: %w", u.Scheme, u.Host, err)
	}
	if prev, loaded := buckets.LoadOrStore(raw, o); loaded {
		_ = o.Close()
		o = prev.(*blob.Objects)
	}
	return &objectIO{o: o, scheme: u.Scheme, bucket: u.Host}, nil
}

// bucketURL is storage/blob's URL of u's bucket under props.
func bucketURL(u *url.URL, props map[string]string) (string, error) {
	if u.Host == "" {
		return "", fmt.Errorf("iceberg warehouse %s: no bucket (%s://bucket/path)", u.Redacted(), u.Scheme)
	}
	b := url.URL{Scheme: "s3", Host: u.Host}
	q := url.Values{}
	if v := props["s3.endpoint"]; v != "" {
		q.Set("endpoint", v)
	}
	if v := props["s3.region"]; v != "" {
		q.Set("region", v)
	} else if v := props["client.region"]; v != "" {
		q.Set("region", v)
	}
	for key, pathStyle := range map[string]bool{"s3.path-style-access": true, "s3.force-virtual-addressing": false} {
		if v := props[key]; v != "" {
			on, err := strconv.ParseBool(v)
			if err != nil {
				return "", fmt.Errorf("iceberg warehouse property %s=%q: want true or false", key, v)
			}
			q.Set("use_path_style", strconv.FormatBool(on == pathStyle))
		}
	}
	id, secret := props["s3.access-key-id"], props["s3.secret-access-key"]
	switch {
	case id != "" && secret != "":
		b.User = url.UserPassword(id, secret)
	case id != "" || secret != "":
		return "", errors.New("iceberg warehouse: s3.access-key-id and s3.secret-access-key go together")
	}
	if props["s3.session-token"] != "" {
		return "", errors.New("iceberg warehouse: s3.session-token is not supported: give temporary credentials in the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN)")
	}
	b.RawQuery = q.Encode()
	return b.String(), nil
}

// objectIO is one bucket as an iceio.IO: files are whole objects, read
// into memory when opened and stored when closed.
type objectIO struct {
	o              *blob.Objects
	scheme, bucket string
}

// key is name's object key, or an error when name is of another bucket.
func (f *objectIO) key(op, name string) (string, error) {
	u, err := url.Parse(name)
	if err != nil || !strings.EqualFold(u.Scheme, f.scheme) || u.Host != f.bucket {
		return "", &fs.PathError{Op: op, Path: name, Err: fmt.Errorf("not in %s://%s: %w", f.scheme, f.bucket, fs.ErrInvalid)}
	}
	return strings.TrimPrefix(u.Path, "/"), nil
}

func (f *objectIO) uri(key string) string { return f.scheme + "://" + f.bucket + "/" + key }

func call[T any](fn func(ctx context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(context.Background(), objectCallTimeout)
	defer cancel()
	return fn(ctx)
}

// Open reads the object name. A name under which no object is stored but
// some are stored below opens as a directory (as a local warehouse's
// directories do), so that a check for written files finds them.
func (f *objectIO) Open(name string) (iceio.File, error) {
	key, err := f.key("open", name)
	if err != nil {
		return nil, err
	}
	data, err := call(func(ctx context.Context) ([]byte, error) { return f.o.Get(ctx, key) })
	if errors.Is(err, fs.ErrNotExist) {
		below, lerr := call(func(ctx context.Context) ([]string, error) { return f.o.List(ctx, strings.TrimSuffix(key, "/")+"/") })
		if lerr == nil && len(below) > 0 {
			return &objectFile{name: path.Base(key), dir: true, Reader: bytes.NewReader(nil)}, nil
		}
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return &objectFile{name: path.Base(key), Reader: bytes.NewReader(data)}, nil
}

// ReadFile reads the object name.
func (f *objectIO) ReadFile(name string) ([]byte, error) {
	key, err := f.key("read", name)
	if err != nil {
		return nil, err
	}
	data, err := call(func(ctx context.Context) ([]byte, error) { return f.o.Get(ctx, key) })
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: name, Err: err}
	}
	return data, nil
}

// Remove deletes the object name.
func (f *objectIO) Remove(name string) error {
	key, err := f.key("remove", name)
	if err != nil {
		return err
	}
	if _, err := call(func(ctx context.Context) (struct{}, error) { return struct{}{}, f.o.Delete(ctx, key) }); err != nil {
		return &fs.PathError{Op: "remove", Path: name, Err: err}
	}
	return nil
}

// Create returns a writer whose Close stores the object name.
func (f *objectIO) Create(name string) (iceio.FileWriter, error) {
	key, err := f.key("create", name)
	if err != nil {
		return nil, err
	}
	return &objectWriter{io: f, name: name, key: key}, nil
}

// WriteFile stores p as the object name.
func (f *objectIO) WriteFile(name string, p []byte) error {
	key, err := f.key("write", name)
	if err != nil {
		return err
	}
	if _, err := call(func(ctx context.Context) (struct{}, error) { return struct{}{}, f.o.Put(ctx, key, [][]byte{p}) }); err != nil {
		return &fs.PathError{Op: "write", Path: name, Err: err}
	}
	return nil
}

// WalkDir calls fn for root, as a directory, then for every object below
// it, as a file. The listing has no sizes or times: an entry's Info has
// size 0 and the zero time, so age filters count every object as old.
func (f *objectIO) WalkDir(root string, fn fs.WalkDirFunc) error {
	key, err := f.key("walk", root)
	if err != nil {
		return err
	}
	prefix := strings.TrimSuffix(key, "/") + "/"
	if key == "" {
		prefix = ""
	}
	if err := fn(root, objectEntry{name: path.Base(key), dir: true}, nil); err != nil {
		if errors.Is(err, fs.SkipDir) || errors.Is(err, fs.SkipAll) {
			return nil
		}
		return err
	}
	keys, err := call(func(ctx context.Context) ([]string, error) { return f.o.List(ctx, prefix) })
	if err != nil {
		return fn(root, nil, err)
	}
	for _, k := range keys {
		if err := fn(f.uri(k), objectEntry{name: path.Base(k)}, nil); err != nil {
			if errors.Is(err, fs.SkipDir) || errors.Is(err, fs.SkipAll) {
				return nil
			}
			return err
		}
	}
	return nil
}

// objectFile is an object read whole, or a directory.
type objectFile struct {
	name string
	dir  bool
	*bytes.Reader
}

func (o *objectFile) Stat() (fs.FileInfo, error) {
	return objectEntry{name: o.name, dir: o.dir, size: o.Size()}, nil
}
func (o *objectFile) Close() error { return nil }

// objectEntry is a listed object or directory; it is its own FileInfo.
type objectEntry struct {
	name string
	dir  bool
	size int64
}

func (e objectEntry) Name() string { return e.name }
func (e objectEntry) IsDir() bool  { return e.dir }
func (e objectEntry) Type() fs.FileMode {
	return e.Mode().Type()
}
func (e objectEntry) Info() (fs.FileInfo, error) { return e, nil }
func (e objectEntry) Size() int64                { return e.size }
func (e objectEntry) Mode() fs.FileMode {
	if e.dir {
		return fs.ModeDir | 0o555
	}
	return 0o444
}
func (e objectEntry) ModTime() time.Time { return time.Time{} }
func (e objectEntry) Sys() any           { return nil }

// objectWriter buffers a file and stores it when closed: an object appears
// whole or not at all.
type objectWriter struct {
	io     *objectIO
	name   string
	key    string
	buf    bytes.Buffer
	closed bool
}

func (w *objectWriter) Write(p []byte) (int, error) {
	if w.closed {
		return 0, &fs.PathError{Op: "write", Path: w.name, Err: fs.ErrClosed}
	}
	return w.buf.Write(p)
}

func (w *objectWriter) ReadFrom(r stdio.Reader) (int64, error) {
	if w.closed {
		return 0, &fs.PathError{Op: "write", Path: w.name, Err: fs.ErrClosed}
	}
	return w.buf.ReadFrom(r)
}

// Close stores the object.
func (w *objectWriter) Close() error {
	if w.closed {
		return nil
	}
	w.closed = true
	data := w.buf.Bytes()
	if _, err := call(func(ctx context.Context) (struct{}, error) { return struct{}{}, w.io.o.Put(ctx, w.key, [][]byte{data}) }); err != nil {
		return &fs.PathError{Op: "close", Path: w.name, Err: err}
	}
	w.buf = bytes.Buffer{}
	return nil
}
