package window

// dueKeys is the timer service of a window operator whose keys share their
// timer times (window ends and cleanup times are multiples of the slide,
// minus one, for every key): per time, the keys due then, in the order they
// were added, and the distinct times in a min-heap. One list entry is a key
// (8 bytes for an int64 key) where a state.Timers timer is a map entry and a
// heap item per key.
//
// Removal is lazy: a key stays in the list of a time it is no longer due at
// (its timer moved), and the caller's fire checks the key's own record of
// its due time (paneSet.timer) and skips the stale entry. Lists are dropped
// when their time passes, so stale entries do not accumulate.
//
// It is not state: the operator rebuilds it at Open from the due times its
// keyed state records.
type dueKeys[K comparable] struct {
	lists map[int64][]K
	// times holds the keys of lists, as a binary min-heap.
	// INVARIANT: times and the keys of lists are the same set.
	times []int64
}

// add makes key due at ts.
func (d *dueKeys[K]) add(ts int64, key K) {
	if d.lists == nil {
		d.lists = map[int64][]K{}
	}
	l, ok := d.lists[ts]
	d.lists[ts] = append(l, key)
	if !ok {
		d.times = append(d.times, ts)
		d.up(len(d.times) - 1)
	}
}

// advance calls fire for every key due at or before wm, in increasing order
// of time and, within a time, in the order the keys were added, until fire
// returns an error. fire may add keys at later times; those at or before wm
// fire in this same advance.
func (d *dueKeys[K]) advance(wm int64, fire func(key K, ts int64) error) error {
	for len(d.times) > 0 && d.times[0] <= wm {
		ts := d.pop()
		l := d.lists[ts]
		delete(d.lists, ts)
		for _, key := range l {
			if err := fire(key, ts); err != nil {
				return err
			}
		}
	}
	return nil
}

// entries returns the number of list entries, stale ones included.
func (d *dueKeys[K]) entries() int {
	n := 0
	for _, l := range d.lists {
		n += len(l)
	}
	return n
}

func (d *dueKeys[K]) pop() int64 {
	h := d.times
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	d.times = h[:last]
	for i := 0; ; {
		c := 2*i + 1
		if c >= last {
			break
		}
		if r := c + 1; r < last && d.times[r] < d.times[c] {
			c = r
		}
		if d.times[i] <= d.times[c] {
			break
		}
		d.times[i], d.times[c] = d.times[c], d.times[i]
		i = c
	}
	return top
}

func (d *dueKeys[K]) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if d.times[p] <= d.times[i] {
			return
		}
		d.times[p], d.times[i] = d.times[i], d.times[p]
		i = p
	}
}
