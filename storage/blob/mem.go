package blob

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
)

// memStore is the bucket of mem:// URLs: objects in a map of this process.
type memStore struct {
	mu      sync.Mutex
	objects map[string][]byte // guarded by mu; values are never modified once stored
}

func newMemStore() *memStore { return &memStore{objects: map[string][]byte{}} }

func (m *memStore) put(ctx context.Context, key string, parts [][]byte, ifNotExist bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b := bytes.Join(parts, nil)
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.objects[key]; ok && ifNotExist {
		return &driverError{kind: errExists, err: fmt.Errorf("mem: %s: %w", key, errExists)}
	}
	m.objects[key] = b
	return nil
}

func (m *memStore) get(ctx context.Context, key string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	b, ok := m.objects[key]
	m.mu.Unlock()
	if !ok {
		return nil, &driverError{kind: errNotExist, err: fmt.Errorf("mem: %s: %w", key, errNotExist)}
	}
	return bytes.Clone(b), nil
}

func (m *memStore) exists(ctx context.Context, key string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.objects[key]
	return ok, nil
}

func (m *memStore) del(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.objects, key)
	return nil
}

func (m *memStore) list(ctx context.Context, prefix string, delimiter bool) ([]listEntry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []listEntry
	dirs := map[string]bool{}
	for key := range m.objects {
		rest, ok := strings.CutPrefix(key, prefix)
		if !ok {
			continue
		}
		if i := strings.IndexByte(rest, '/'); delimiter && i >= 0 {
			if dir := prefix + rest[:i+1]; !dirs[dir] {
				dirs[dir] = true
				out = append(out, listEntry{key: dir, isDir: true})
			}
			continue
		}
		out = append(out, listEntry{key: key})
	}
	return out, nil
}

func (m *memStore) close() error { return nil }

// memBuckets holds the named in-memory buckets of mem:// URLs, so that opening the same URL twice
// (a restart in the same process) finds the same checkpoints. They are never freed.
var memBuckets = struct {
	sync.Mutex
	m map[string]*memStore
}{m: map[string]*memStore{}}

// memBucket returns the process-wide in-memory bucket called name, creating it if needed.
func memBucket(name string) *memStore {
	memBuckets.Lock()
	defer memBuckets.Unlock()
	b := memBuckets.m[name]
	if b == nil {
		b = newMemStore()
		memBuckets.m[name] = b
	}
	return b
}
