package state

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// writeCache is an LSM store's write-back cache: the entries read or written
// lately, so that the hot keys of a state (the open windows, the active
// sessions) are read and written in memory, and the store sees one write per
// key between two flushes instead of one per record. It holds encoded
// entries, by store key, in one bucket per key prefix (key group and state
// id), so that an operation on a prefix (a scan, a range deletion) touches
// one bucket.
//
// INVARIANT: for every key, the cache's entry, if any, is what the store
// would read after the dirty entries are written: a clean entry equals the
// store's value (or its absence), a dirty one replaces it.
// INVARIANT: a cached value slice is never written after it is cached: a
// write replaces the slice (readers may keep what get returned).
type writeCache struct {
	buckets map[uint32]*cacheBucket
	// bytes approximates the memory the entries take; budget bounds it:
	// past it, flush writes the dirty entries and drops every entry.
	bytes, budget int
	dirty         int // dirty entries
	// drops counts the times flush forgot every entry: readers that rely
	// on the cache holding what they wrote compare it (see
	// lsmNamespaced.present).
	drops uint64
}

// cacheBucket is the entries under one 4-byte key prefix.
type cacheBucket struct {
	m     map[string]*cacheEntry
	dirty int
	// keys lists the keys whose entries became dirty since the bucket's
	// last write, so that writing costs what changed. INVARIANT: every
	// dirty entry's key is in it (a key may be in it more than once, or be
	// clean or gone by then).
	keys []string
}

// cacheEntry is a cached value, or a cached absence (deleted).
type cacheEntry struct {
	val     []byte
	deleted bool
	dirty   bool
}

// entryOverhead approximates what an entry costs besides its key and value
// bytes: the map slot, the string and slice headers, the entry.
const entryOverhead = 96

func newWriteCache(budget int) *writeCache {
	return &writeCache{buckets: map[uint32]*cacheBucket{}, budget: budget}
}

// bucketOf returns the bucket number of a store key (its first 4 bytes).
func bucketOf(key []byte) uint32 {
	return uint32(key[0])<<24 | uint32(key[1])<<16 | uint32(key[2])<<8 | uint32(key[3])
}

// lookup returns the cached entry of key, or nil.
func (c *writeCache) lookup(key []byte) *cacheEntry {
	b := c.buckets[bucketOf(key)]
	if b == nil {
		return nil
	}
	return b.m[string(key)]
}

// put caches val (nil with deleted: an absence) for key, dirty or clean.
func (c *writeCache) put(key, val []byte, deleted, dirty bool) {
	n := bucketOf(key)
	b := c.buckets[n]
	if b == nil {
		b = &cacheBucket{m: map[string]*cacheEntry{}}
		c.buckets[n] = b
	}
	e := b.m[string(key)]
	var k string
	if e == nil {
		e = &cacheEntry{}
		k = string(key)
		b.m[k] = e
		c.bytes += len(key) + entryOverhead
	} else {
		c.bytes -= len(e.val)
	}
	if dirty && !e.dirty {
		if k == "" {
			k = string(key)
		}
		b.keys = append(b.keys, k)
		b.dirty++
		c.dirty++
	} else if !dirty && e.dirty {
		b.dirty--
		c.dirty--
	}
	e.val, e.deleted, e.dirty = val, deleted, dirty
	c.bytes += len(val)
}

// full reports whether the cache is past its budget.
func (c *writeCache) full() bool { return c.bytes > c.budget }

// writeDirty adds the dirty entries of bucket b to batch and marks them
// clean.
func (c *writeCache) writeDirty(b *cacheBucket, batch *pebble.Batch) error {
	if b.dirty == 0 {
		return nil
	}
	for _, k := range b.keys {
		e := b.m[k]
		if e == nil || !e.dirty {
			continue
		}
		var err error
		if e.deleted {
			err = batch.Delete([]byte(k), nil)
		} else {
			err = batch.Set([]byte(k), e.val, nil)
		}
		if err != nil {
			return err
		}
		e.dirty = false
	}
	c.dirty -= b.dirty
	b.dirty = 0
	clear(b.keys)
	b.keys = b.keys[:0]
	return nil
}

// flushBucket writes the dirty entries under key's 4-byte prefix to db.
func (c *writeCache) flushBucket(db *pebble.DB, prefix []byte) error {
	b := c.buckets[bucketOf(prefix)]
	if b == nil || b.dirty == 0 {
		return nil
	}
	batch := db.NewBatch()
	if err := c.writeDirty(b, batch); err != nil {
		_ = batch.Close()
		return err
	}
	return commit(batch)
}

// commit commits batch and closes it (returning it to Pebble's pool).
func commit(batch *pebble.Batch) error {
	err := batch.Commit(pebble.NoSync)
	if cerr := batch.Close(); err == nil {
		err = cerr
	}
	return err
}

// flush writes every dirty entry to db in one batch; with drop it also
// forgets every entry (the cache is past its budget).
func (c *writeCache) flush(db *pebble.DB, drop bool) error {
	if c.dirty > 0 {
		batch := db.NewBatch()
		for _, b := range c.buckets {
			if err := c.writeDirty(b, batch); err != nil {
				_ = batch.Close()
				return err
			}
		}
		if err := commit(batch); err != nil {
			return fmt.Errorf("writing cached entries: %w", err)
		}
	}
	if drop {
		clear(c.buckets)
		c.bytes = 0
		c.drops++
	}
	return nil
}

// dropRange forgets the entries of keys in [start, end), which a range
// deletion removes; start and end share their 4-byte prefix (or end is
// that prefix's end).
func (c *writeCache) dropRange(start, end []byte) {
	b := c.buckets[bucketOf(start)]
	if b == nil {
		return
	}
	lo, hi := string(start), string(end)
	for k, e := range b.m {
		if k >= lo && (end == nil || k < hi) {
			if e.dirty {
				b.dirty--
				c.dirty--
			}
			c.bytes -= len(k) + entryOverhead + len(e.val)
			delete(b.m, k)
		}
	}
}
