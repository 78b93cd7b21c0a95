package checkpoint

import (
	"maps"
	"slices"

	"github.com/ingest-engine/ingest/storage"
)

// Reference-counted retention: which checkpoints, and which of their files,
// stay in storage (see Coordinator).

// fileSet is a set of files of one checkpoint: every file it has (all), or
// those named.
type fileSet struct {
	// all: every file of the checkpoint, whatever its names.
	all bool
	// base is a sorted list of names the set holds, shared with whoever
	// handed it over (Coordinator.trimmed): never modified in place.
	base []string
	// extra are the names added to base.
	extra map[string]bool
}

// everything is the fileSet of a checkpoint kept whole.
func everything() *fileSet { return &fileSet{all: true} }

// has reports whether the set holds the file called name.
func (f *fileSet) has(name string) bool {
	if f.all || f.extra[name] {
		return true
	}
	_, ok := slices.BinarySearch(f.base, name)
	return ok
}

// add adds the file called name.
func (f *fileSet) add(name string) {
	if f.has(name) {
		return
	}
	if f.extra == nil {
		f.extra = map[string]bool{}
	}
	f.extra[name] = true
}

// addSet adds every file of o.
func (f *fileSet) addSet(o *fileSet) {
	switch {
	case f.all:
	case o.all:
		f.all, f.base, f.extra = true, nil, nil
	case f.base == nil && len(f.extra) == 0:
		f.base = o.base
		for n := range o.extra {
			f.add(n)
		}
	default:
		for _, n := range o.base {
			f.add(n)
		}
		for n := range o.extra {
			f.add(n)
		}
	}
}

// names returns the names of a set that is not all, sorted.
func (f *fileSet) names() []string {
	if len(f.extra) == 0 {
		return f.base
	}
	out := append(slices.Clone(f.base), slices.Collect(maps.Keys(f.extra))...)
	slices.Sort(out)
	return slices.Compact(out)
}

// files returns the files of checkpoint id kept in storage: every file of a
// retained checkpoint or of a held one not trimmed, the names a held one was
// trimmed to; ok is false when id is neither retained nor held.
func (c *Coordinator) files(id int64) (f *fileSet, ok bool) {
	if _, ok := slices.BinarySearch(c.retained, id); ok {
		return everything(), true
	}
	if _, ok := slices.BinarySearch(c.held, id); !ok {
		return nil, false
	}
	if names, trimmed := c.trimmed[id]; trimmed {
		return &fileSet{base: names}, true
	}
	return everything(), true
}

// retire takes the oldest complete checkpoints beyond the retention count out
// of the retained set: each is held (whole), and collect decides at the end
// of the step what of it stays.
func (c *Coordinator) retire() {
	for len(c.retained) > c.cfg.Options.Retain {
		c.held = append(c.held, c.retained[0])
		c.retained = c.retained[1:]
	}
	slices.Sort(c.held)
	c.collectDue = true
}

// cut is what collect does to one held checkpoint: discard it, or trim it to
// keep.
type cut struct {
	id      int64
	discard bool
	keep    []string
}

// collect trims every held checkpoint to the files still needed (see live)
// and discards those of which nothing is needed. It runs at the end of every
// step in which something that keeps files ended: a retirement, a pending
// checkpoint's end, a failure recorded in the ledger (and at the first step,
// for what Config left): once, so that a checkpoint gets at most one Trim or
// Discard per step.
//
// A checkpoint that a pending one may build on whole stays whole. Another is
// trimmed when it becomes held and again whenever what is needed of it
// shrinks; what a Trim left out never comes back (a need for it would be a
// dangling reference, which acked refuses).
//
// The Trims and Discards come in increasing id order, except that a
// checkpoint comes before every checkpoint it references: the caller carries
// them out one by one, and both delete the metadata first, so a crash between
// two never leaves a complete checkpoint without a file it references.
func (c *Coordinator) collect(out []Action) []Action {
	if len(c.held) == 0 {
		return out
	}
	live := c.live()
	var keep []int64
	var cuts []cut
	for _, id := range c.held {
		need, ok := live[id]
		cur, trimmed := c.trimmed[id]
		var names []string
		if ok && !need.all {
			names = need.names()
			if trimmed {
				// Only what is still there can be kept. INVARIANT: that is
				// all of names (acked refuses files a Trim left out).
				names = slices.DeleteFunc(slices.Clone(names), func(n string) bool {
					_, there := slices.BinarySearch(cur, n)
					return !there
				})
			}
			ok = len(names) > 0
		}
		switch {
		case !ok:
			cuts = append(cuts, cut{id: id, discard: true})
		case need.all:
			keep = append(keep, id) // a pending checkpoint may build on any file it has
		default:
			keep = append(keep, id)
			if !trimmed || !slices.Equal(cur, names) {
				cuts = append(cuts, cut{id: id, keep: names})
				c.trimmed[id] = names
			}
		}
	}
	c.held = keep
	for len(cuts) > 0 {
		i := slices.IndexFunc(cuts, func(x cut) bool {
			return !slices.ContainsFunc(cuts, func(o cut) bool {
				return o.id != x.id && slices.ContainsFunc(c.refs[o.id], func(r storage.FileRef) bool { return r.Checkpoint == x.id })
			})
		})
		if i < 0 {
			i = 0 // a reference cycle, which ids increasing along references rule out
		}
		if x := cuts[i]; x.discard {
			out = append(out, Discard{ID: x.id})
		} else {
			out = append(out, Trim{ID: x.id, Keep: slices.Clone(x.keep)})
		}
		cuts = slices.Delete(cuts, i, i+1)
	}
	for id := range c.trimmed {
		if !slices.Contains(c.held, id) {
			delete(c.trimmed, id)
		}
	}
	for id := range c.refs {
		// A trimmed checkpoint has no metadata left: nothing can be restored
		// from it, and what it referenced orders nothing any more.
		if _, trimmed := c.trimmed[id]; trimmed || !c.kept(id) {
			delete(c.refs, id)
		}
	}
	return out
}

// live returns, for every checkpoint of which something must stay in
// storage, what must: all of each retained checkpoint and the files they
// reference, what each pending checkpoint may build on (protects), and the
// files each failed metadata write not yet recorded references.
//
// References are direct: a checkpoint's references name every earlier file
// its state is read from (an incremental snapshot's Shared list is the whole
// chain, not its last link), so a held checkpoint, which is no recovery point,
// needs nothing of what it referenced itself. Following references
// transitively would keep chains of files that no kept checkpoint reads, and
// they can grow without bound.
func (c *Coordinator) live() map[int64]*fileSet {
	live := map[int64]*fileSet{}
	at := func(id int64) *fileSet {
		f := live[id]
		if f == nil {
			f = &fileSet{}
			live[id] = f
		}
		return f
	}
	addRefs := func(rs []storage.FileRef) {
		for _, r := range rs {
			at(r.Checkpoint).add(r.Name)
		}
	}
	for _, id := range c.retained {
		at(id).addSet(everything())
		addRefs(c.refs[id])
	}
	for _, p := range c.pending {
		for id, f := range p.protects {
			at(id).addSet(f)
		}
	}
	for _, rs := range c.unrecordedRefs {
		addRefs(rs)
	}
	return live
}

// kept reports whether checkpoint id is complete and (some of it) kept in
// storage: retained or held (both increasing: an LSM backend's files can
// keep thousands of checkpoints held, and every file an acknowledgement
// names is looked up).
func (c *Coordinator) kept(id int64) bool {
	_, r := slices.BinarySearch(c.retained, id)
	_, h := slices.BinarySearch(c.held, id)
	return r || h
}

// protectAtTrigger returns what a checkpoint triggered now may build on:
// every file in storage (all of each retained checkpoint and of each held one
// not trimmed, the files each trimmed one keeps).
func (c *Coordinator) protectAtTrigger() map[int64]*fileSet {
	protects := make(map[int64]*fileSet, len(c.retained)+len(c.held))
	for _, id := range append(slices.Clone(c.retained), c.held...) {
		protects[id], _ = c.files(id)
	}
	return protects
}
