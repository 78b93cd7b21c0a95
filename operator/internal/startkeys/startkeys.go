// Package startkeys is the timer service of operators whose keys share their
// timer times: windows and buckets that start (or fall due) at the same
// instant for every key. It keeps, per start, the keys in the order they
// were added, and the starts in increasing order.
//
// A timer per key and window (state.Timers: a map entry and a heap item)
// repeats for every key what the window's start says once. An Index is not
// state: the operator rebuilds it at Open from its keyed state, which holds
// the same (key, start) pairs.
package startkeys

import "slices"

// Index holds keys by start. The zero value is empty and ready to use.
//
// INVARIANT: starts holds the keys of keys, each once, increasing.
type Index[K comparable] struct {
	keys   map[int64][]K
	starts []int64
	// listed holds every (start, key) of keys once AddOnce was called, so
	// that it answers without the caller's state (an LSM store's lookups);
	// nil before. INVARIANT: when not nil, it holds exactly the pairs of
	// keys.
	listed map[entry[K]]struct{}
}

// entry is a (start, key) pair of an Index.
type entry[K comparable] struct {
	start int64
	key   K
}

// AddOnce adds key to the keys of start unless it is listed there already,
// and reports whether it added it. The first call makes the Index keep a
// set of its entries (memory per entry) for every later Add and drop.
func (x *Index[K]) AddOnce(start int64, key K) (added bool) {
	if x.listed == nil {
		x.listed = make(map[entry[K]]struct{}, x.Entries())
		for s, ks := range x.keys {
			for _, k := range ks {
				x.listed[entry[K]{s, k}] = struct{}{}
			}
		}
	}
	if _, ok := x.listed[entry[K]{start, key}]; ok {
		return false
	}
	x.Add(start, key)
	return true
}

// Add appends key to the keys of start and reports whether start is new. A
// new start is nearly always the greatest, so Add is O(1) but for
// out-of-order starts. Adding a key twice lists it twice: callers add a key
// when its first record for the start arrives.
func (x *Index[K]) Add(start int64, key K) (isNew bool) {
	if x.keys == nil {
		x.keys = map[int64][]K{}
	}
	ks, ok := x.keys[start]
	x.keys[start] = append(ks, key)
	if x.listed != nil {
		x.listed[entry[K]{start, key}] = struct{}{}
	}
	if ok {
		return false
	}
	if n := len(x.starts); n > 0 && x.starts[n-1] > start {
		i, _ := slices.BinarySearch(x.starts, start)
		x.starts = slices.Insert(x.starts, i, start)
	} else {
		x.starts = append(x.starts, start)
	}
	return true
}

// Starts returns the starts, increasing. The slice is valid until the next
// Add or Drop and must not be modified.
func (x *Index[K]) Starts() []int64 { return x.starts }

// Keys returns the keys of start in the order they were added.
func (x *Index[K]) Keys(start int64) []K { return x.keys[start] }

// DropFirst forgets the n smallest starts and their keys.
func (x *Index[K]) DropFirst(n int) {
	for _, s := range x.starts[:n] {
		if x.listed != nil {
			for _, k := range x.keys[s] {
				delete(x.listed, entry[K]{s, k})
			}
		}
		delete(x.keys, s)
	}
	x.starts = slices.Delete(x.starts, 0, n)
}

// Fire calls fire for every key of every start at or before limit, in
// increasing order of start and, within a start, in the order the keys were
// added, forgetting each start before its keys fire, until fire returns an
// error. fire may Add keys at greater starts; those at or before limit fire
// in this same call.
func (x *Index[K]) Fire(limit int64, fire func(key K, start int64) error) error {
	for len(x.starts) > 0 && x.starts[0] <= limit {
		s := x.starts[0]
		ks := x.keys[s]
		x.DropFirst(1)
		for _, k := range ks {
			if err := fire(k, s); err != nil {
				return err
			}
		}
	}
	return nil
}

// Entries returns the number of (start, key) entries.
func (x *Index[K]) Entries() int {
	n := 0
	for _, ks := range x.keys {
		n += len(ks)
	}
	return n
}
