package blob

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
)

// Objects is a bucket opened for plain objects: whole-object puts and gets
// of keys under the URL's prefix, with none of Storage's checkpoint layout
// or checksum trailers. A connector that writes files other programs read
// (an Iceberg table's data and metadata files) stores them through it.
// Its methods are safe for concurrent use.
type Objects struct {
	b     bucket
	owned bool
	loc   *location
}

// OpenObjects opens the bucket at rawURL, a URL of Open's forms (s3 with its
// parameters, file, mem); the URL's prefix is put before every key.
func OpenObjects(ctx context.Context, rawURL string) (*Objects, error) {
	loc, err := parseLocation(rawURL)
	if err != nil {
		return nil, err
	}
	if loc.lease != 0 || loc.timeout != 0 {
		return nil, fmt.Errorf("storage/blob: %s: parameters %s and %s are for checkpoint storage", loc.base, paramLease, paramTimeout)
	}
	b, owned, err := openBucket(ctx, loc)
	if err != nil {
		return nil, scrub(fmt.Errorf("storage/blob: open %s: %w", loc.base, err), loc.secrets)
	}
	return &Objects{b: b, owned: owned, loc: loc}, nil
}

func (o *Objects) fail(op, key string, err error) error {
	if errors.Is(err, errNotExist) {
		err = fmt.Errorf("%w: %w", fs.ErrNotExist, err)
	}
	return scrub(fmt.Errorf("storage/blob: %s %s/%s: %w", op, o.loc.base, key, err), o.loc.secrets)
}

// Put stores the concatenation of parts under key, atomically: a reader
// sees the old object or the whole new one.
func (o *Objects) Put(ctx context.Context, key string, parts [][]byte) error {
	if err := o.b.put(ctx, o.loc.prefix+key, parts, false); err != nil {
		return o.fail("put", key, err)
	}
	return nil
}

// Get returns the object under key; a missing one is an error wrapping
// fs.ErrNotExist.
func (o *Objects) Get(ctx context.Context, key string) ([]byte, error) {
	data, err := o.b.get(ctx, o.loc.prefix+key)
	if err != nil {
		return nil, o.fail("get", key, err)
	}
	return data, nil
}

// Delete deletes the object under key; a missing one is not an error.
func (o *Objects) Delete(ctx context.Context, key string) error {
	if err := o.b.del(ctx, o.loc.prefix+key); err != nil {
		return o.fail("delete", key, err)
	}
	return nil
}

// List returns the keys of every object whose key starts with prefix, at
// any depth, relative to the URL's prefix, in no particular order.
func (o *Objects) List(ctx context.Context, prefix string) ([]string, error) {
	entries, err := o.b.list(ctx, o.loc.prefix+prefix, false)
	if err != nil {
		return nil, o.fail("list", prefix, err)
	}
	keys := make([]string, 0, len(entries))
	for _, e := range entries {
		if !e.isDir {
			keys = append(keys, strings.TrimPrefix(e.key, o.loc.prefix))
		}
	}
	return keys, nil
}

// Close releases the bucket.
func (o *Objects) Close() error {
	if !o.owned {
		return nil
	}
	return o.b.close()
}
