package state

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"
)

// maxChainFiles bounds the files one subtask's state is read from at a
// restore: an incremental snapshot that would reference more earlier files
// rewrites the key groups of the ones least used instead.
const maxChainFiles = 64

// maxReadAmplification bounds the earlier files a snapshot references, in
// bytes, as a multiple of the bytes a restore uses of them (the sections of
// the key groups not written again): a file stays referenced while one of
// its key groups still reads from it, so without the bound a few key groups
// that are rarely written could keep mostly dead files alive. Over the
// bound, the key groups of the least used files are written in full until
// it holds. It bounds both what storage keeps for a checkpoint and what a
// restore reads.
const maxReadAmplification = 3

// A key group's chain, its last full section and the delta sections written
// over it, is written in full again (materialised) at the latest when the
// key group is written and its deltas hold maxMaterialiseShare of its full
// section's bytes, or its chain reads from maxDeltaDepth files (it is due:
// chain.due). Before that, each checkpoint materialises the chains that
// will be due first at a steady rate: the least rate at which each is
// materialised before it is due (materialiseSteadily). So the key groups of
// a state updated everywhere, which would all be due at the same
// checkpoint, are rewritten a few at every checkpoint. Over time a
// checkpoint writes about twice and a quarter the bytes of the entries
// updated since the last one, whatever the state's size, as long as a
// checkpoint updates more than about 1.3% of a key group (0.8 over 61
// deltas; below that the depth limit decides: 3.6 times at 1%), and a
// restore reads, for each key group, a full section and deltas of which
// all but the last hold less than 0.8 of it.
const (
	maxMaterialiseShare = 0.8
	maxDeltaDepth       = maxChainFiles - 2
)

// due returns how near key group index i's chain is to the limit at which
// it must be materialised (1: at the limit), and how much nearer it gets
// per checkpoint if it is written as it was written last.
func (c *chain) due(i int) (due, step float64) {
	deltas, last := 0, 0
	for _, n := range c.bytes[i][1:] {
		deltas, last = deltas+n, n
	}
	step = 1 / float64(maxDeltaDepth-1)
	due = float64(c.depth(i)-1) * step
	if base := c.bytes[i][0]; base == 0 {
		due = math.Inf(1) // a full section costs no more than a delta
	} else if size := float64(deltas) / float64(base) / maxMaterialiseShare; size > due {
		due, step = size, float64(last)/float64(base)/maxMaterialiseShare
	}
	return due, step
}

// chain describes the files a complete checkpoint's snapshot of this
// backend reads from: for each key group, the checkpoints whose files hold
// its sections. It is immutable once built.
type chain struct {
	// epoch is the copy-on-write epoch the snapshot was taken at: a key
	// group whose states report writtenSince(i, epoch) false is as the
	// chain holds it.
	epoch uint64
	// files is, by key group - Start, the ids of the checkpoints whose
	// files hold the key group, oldest first: its last full section, then
	// the delta sections written over it. bytes are those sections'
	// lengths.
	// INVARIANT: files[i] is non-empty, and only its first section is full.
	files [][]int64
	bytes [][]int
	// fileBytes is each holder file's total section bytes.
	fileBytes map[int64]int
	// baselines is, by state name, what a delta of the state written
	// after the chain's snapshot builds on (deltaFrozen.baseline): set for
	// the states that write deltas, absent after a Restore.
	baselines map[string]any
}

// depth returns the number of files key group index i is read from.
func (c *chain) depth(i int) int { return len(c.files[i]) }

// deltaFrozen is implemented by frozen states that can write a key group's
// changes since an earlier snapshot of the same state as a delta part (see
// the format comment in snapshot.go), instead of all its entries.
type deltaFrozen interface {
	frozenState
	// baseline returns what a later snapshot of the state needs to write
	// its changes since this one. The chain keeps it: it must not pin the
	// snapshot's frozen tables.
	baseline() any
	// hasDelta reports whether key group index i can be written as a
	// delta since base; when it cannot, the key group is written in full.
	hasDelta(i int, base any) bool
	// appendDelta appends key group index i's delta payload since base, a
	// baseline of an earlier snapshot of the same state (hasDelta true).
	appendDelta(dst []byte, i int, base any) []byte
}

// deltaBase returns st as a deltaFrozen and the baseline in c it writes its
// delta over, or a nil baseline when it writes in full.
func deltaBase(st frozenState, c *chain) (deltaFrozen, any) {
	d, ok := st.(deltaFrozen)
	if !ok || c == nil {
		return nil, nil
	}
	return d, c.baselines[st.info().name]
}

// Encoded is a snapshot encoded for a checkpoint (Snapshot.EncodeCheckpoint).
type Encoded struct {
	// Data is the file to store for the checkpoint.
	Data []byte
	// Incremental reports that Data holds only what was written since the
	// snapshot it builds on: key groups in full or as deltas; the rest is
	// in the Shared files.
	Incremental bool
	// Shared are the ids of the earlier checkpoints whose files of this
	// subtask hold what Data does not, increasing. A restore needs Data and
	// all of them; none may be deleted while this checkpoint is kept.
	Shared []int64
	// Reused is how many bytes of the Shared files a restore reads with
	// Data (the sections of key groups not written in full).
	Reused int64
}

// sectionMode is what a checkpoint snapshot writes of one key group.
type sectionMode uint8

const (
	// reuseSection: nothing; the base's files hold the key group.
	reuseSection sectionMode = iota
	// writeFull: a full section, which ends the key group's chain.
	writeFull
	// writeDelta: a delta section over the base's.
	writeDelta
)

// checkpointPlan is what CheckpointSnapshot decided for a snapshot.
type checkpointPlan struct {
	id   int64
	base *chain // nil: a full snapshot
	// mode is, by key group - Start, what an incremental snapshot writes
	// of each key group; nil for a full snapshot.
	mode []sectionMode
	// written is, for a key group written as a delta, by index into the
	// snapshot's states, whether the state was written since the base.
	written [][]bool
	// stale is set when the set of states changed after the plan
	// (resetChain): its result must never become a base, though its
	// encoding still needs the files of its own base.
	stale bool
	// mu guards result, which EncodeCheckpoint sets (on the writing
	// goroutine) and Complete adopts (on the task goroutine).
	mu     sync.Mutex
	result *chain
}

// CheckpointSnapshot is Snapshot for checkpoint id: besides freezing the
// state it plans an incremental snapshot. It builds on the snapshot of the
// last checkpoint this backend was told is complete (Complete): a key group
// none of whose states was written since that snapshot is not written again
// but read from the files that snapshot read from; one that was is written
// as a delta section (the states written since, each as its changes when it
// can write them, NamespacedValueState, else in full) or in full: when its
// chain is due, or when it is among those materialised at a steady rate
// before they are due (both materialiseSteadily), when its files are
// retired (retireFiles), or when no state of it writes deltas. The plan
// costs O(key groups × (states + chain depth) + files²), on the task
// goroutine; the entries are read only by EncodeCheckpoint.
//
// The first snapshot after NewBackend, or after a Restore that cannot be
// built on (a rescaling, files of format version 1), the first after a state
// was dropped, and one that would write every key group in full are full;
// after any other Restore the first snapshot builds on the files restored
// from (in full for the key groups written since: the restore leaves no
// baseline for deltas). A state registered since the base needs nothing of
// it: the key groups it has entries in were written since. A snapshot never
// references more than maxChainFiles-1 earlier files, nor earlier files
// holding more than maxReadAmplification times the bytes it uses of them:
// the key groups of the least used files are written in full instead
// (retireFiles).
//
// With selfContained the snapshot is full whatever the base: a final
// checkpoint's, so that the checkpoint a finished or stopped job leaves
// needs no earlier one (retention keeps only it).
//
// INVARIANT: a snapshot only references files of checkpoints that completed
// (their base was adopted by Complete) or that a Restore read, never those of an in-flight or
// failed checkpoint, so aborting a checkpoint (and deleting its files) never
// breaks a later one.
//
// On an LSM backend it is the synchronous part of an LSM checkpoint (see
// lsm.go): the snapshot is stored with Upload, and selfContained has no
// effect (a final checkpoint references earlier files like any other).
func (b *Backend) CheckpointSnapshot(id int64, selfContained bool) *Snapshot {
	if b.lsm != nil {
		return b.lsmCheckpointSnapshot(id)
	}
	s := b.Snapshot()
	p := &checkpointPlan{id: id}
	s.plan = p
	s.epoch = b.epoch - 1 // Snapshot started a new epoch
	if base := b.base; base != nil && !selfContained {
		// When every key group is written in full, nothing is gained by
		// referencing the base: a full file is smaller (it writes no
		// section for an empty key group) and ends the chains.
		if mode, written := b.plan(s, base, id); slices.ContainsFunc(mode, func(m sectionMode) bool { return m != writeFull }) {
			p.base, p.mode, p.written = base, mode, written
		}
	}
	if b.pending == nil {
		b.pending = make(map[int64]*checkpointPlan)
	}
	b.pending[id] = p
	return s
}

// plan returns, by key group - Start, what a snapshot s of checkpoint id on
// base writes (see CheckpointSnapshot), and for the key groups written as
// deltas which of s's states were written since base.
func (b *Backend) plan(s *Snapshot, base *chain, id int64) ([]sectionMode, [][]bool) {
	n := b.kgRange.Len()
	mode := make([]sectionMode, n)
	written := make([][]bool, n)
	regs := make([]registered, len(s.states)) // nil for restored, unclaimed state
	for j, st := range s.states {
		regs[j] = b.states[st.info().name]
	}
	for i := range n {
		var w []bool
		deltas := false
		for j, r := range regs {
			if r == nil || !r.writtenSince(i, base.epoch) {
				continue
			}
			if w == nil {
				w = make([]bool, len(regs))
			}
			w[j] = true
			if d, bl := deltaBase(s.states[j], base); bl != nil && d.hasDelta(i, bl) {
				deltas = true
			}
		}
		switch {
		case w == nil:
			mode[i] = reuseSection
		case !deltas:
			mode[i] = writeFull
		default:
			mode[i], written[i] = writeDelta, w
		}
	}
	materialiseSteadily(base, mode, written)
	retireFiles(base, mode, written)
	return mode, written
}

// held returns the bytes of key group index i's chain: its full section and
// deltas, what a rewrite of it costs about.
func (c *chain) held(i int) int {
	n := 0
	for _, b := range c.bytes[i] {
		n += b
	}
	return n
}

// materialiseSteadily writes in full, in mode and written, the key groups
// written as deltas whose chains are due, and some of the others: the ones
// that will be due first, as many as a steady rate of bytes per checkpoint
// allows, the least rate at which every chain is materialised before it is
// due if each stays on its course (the most, over the chains by when they
// are due, of the bytes of those due by then divided by the checkpoints
// until then).
func materialiseSteadily(base *chain, mode []sectionMode, written [][]bool) {
	type course struct {
		i     int
		left  float64 // checkpoints until it is due
		bytes float64 // what the key group's chain holds
	}
	var cs []course
	for i, m := range mode {
		if m != writeDelta {
			continue
		}
		due, step := base.due(i)
		if due >= 1 {
			mode[i], written[i] = writeFull, nil
			continue
		}
		c := course{i: i, left: math.Inf(1), bytes: float64(base.held(i))}
		if step > 0 {
			c.left = max(1, math.Ceil((1-due)/step))
		}
		cs = append(cs, c)
	}
	slices.SortStableFunc(cs, func(a, b course) int { return cmp.Compare(a.left, b.left) })
	rate, sum := 0.0, 0.0
	for _, c := range cs {
		sum += c.bytes
		rate = max(rate, sum/c.left)
	}
	for spent := 0.0; len(cs) > 0 && spent+cs[0].bytes/2 <= rate; cs = cs[1:] {
		spent += cs[0].bytes
		mode[cs[0].i], written[cs[0].i] = writeFull, nil
	}
}

// retireFiles writes in full, in mode and written, the key groups that read
// from earlier files the snapshot should no longer reference: first those
// of files that supply no bytes (only empty key groups), then, while more
// than maxChainFiles-1 files are referenced, those of the file whose key
// groups cost the fewest bytes to rewrite, and while the files exceed
// maxReadAmplification, those of the file that frees the most dead bytes
// per byte rewritten. A key group's rewrite is costed at what its chain
// holds. It costs O(key groups × chain depth + files²).
func retireFiles(base *chain, mode []sectionMode, written [][]bool) {
	type fileUse struct {
		groups []int // the key groups reading from it (some may be retired since)
		refs   int   // how many of them are not retired
		used   int   // the bytes they read of it
		cost   int   // what their chains hold
	}
	uses := map[int64]*fileUse{}
	for i, m := range mode {
		if m == writeFull {
			continue
		}
		c := base.held(i)
		for k, id := range base.files[i] {
			u := uses[id]
			if u == nil {
				u = &fileUse{}
				uses[id] = u
			}
			u.groups = append(u.groups, i)
			u.refs++
			u.used += base.bytes[i][k]
			u.cost += c
		}
	}
	retire := func(id int64) {
		for _, i := range uses[id].groups {
			if mode[i] == writeFull {
				continue
			}
			mode[i], written[i] = writeFull, nil
			c := base.held(i)
			for k, f := range base.files[i] {
				u := uses[f]
				u.refs--
				u.used -= base.bytes[i][k]
				u.cost -= c
			}
		}
	}
	for {
		ids := make([]int64, 0, len(uses))
		total, supplied := 0, 0
		for id, u := range uses {
			if u.refs > 0 {
				ids = append(ids, id)
				total += base.fileBytes[id]
				supplied += u.used
			}
		}
		slices.Sort(ids) // the oldest first among equals
		var victim int64
		switch empty := slices.IndexFunc(ids, func(id int64) bool { return uses[id].used == 0 }); {
		case len(ids) == 0:
			return
		case empty >= 0:
			victim = ids[empty]
		case len(ids) >= maxChainFiles:
			victim = slices.MinFunc(ids, func(a, b int64) int { return cmp.Compare(uses[a].cost, uses[b].cost) })
		case total > maxReadAmplification*supplied:
			share := func(id int64) float64 { return float64(uses[id].used) / float64(max(base.fileBytes[id], 1)) }
			victim = slices.MinFunc(ids, func(a, b int64) int { return cmp.Compare(share(a), share(b)) })
		default:
			return
		}
		retire(victim)
	}
}

// EncodeCheckpoint encodes a snapshot taken by CheckpointSnapshot: what its
// plan writes, marked with the checkpoint's id, and which earlier
// checkpoints' files hold the rest. Like Encode it runs off the task
// goroutine; it may be called more than once (the last result is what
// Complete adopts). Errors are as for Encode.
func (s *Snapshot) EncodeCheckpoint() (*Encoded, error) { return s.EncodeCheckpointInto(nil) }

// EncodeCheckpointInto is EncodeCheckpoint appending the file to dst[:0]:
// when it fits in dst's capacity, Encoded.Data shares dst's array (a
// buffer the caller reuses from one checkpoint to the next, outside the Go
// heap: see internal/offheap), so Data is valid only while the caller
// keeps dst unchanged.
func (s *Snapshot) EncodeCheckpointInto(dst []byte) (*Encoded, error) {
	p := s.plan
	if p == nil {
		return nil, fmt.Errorf("state: operator %q: EncodeCheckpoint of a snapshot not taken by CheckpointSnapshot", s.operator)
	}
	data, lens, err := s.encode(p.id, p, dst)
	if err != nil {
		return nil, err
	}
	n := s.kgRange.Len()
	next := &chain{epoch: s.epoch, files: make([][]int64, n), bytes: make([][]int, n), fileBytes: map[int64]int{}, baselines: map[string]any{}}
	for _, st := range s.states {
		if d, ok := st.(deltaFrozen); ok {
			next.baselines[st.info().name] = d.baseline()
		}
	}
	enc := &Encoded{Data: data, Incremental: p.mode != nil}
	for i := range n {
		mode := writeFull
		if p.mode != nil {
			mode = p.mode[i]
		}
		if mode == writeFull {
			next.files[i], next.bytes[i] = []int64{p.id}, []int{lens[i]}
			next.fileBytes[p.id] += lens[i]
			continue
		}
		files, bytes := p.base.files[i], p.base.bytes[i]
		for k, h := range files {
			next.fileBytes[h] = p.base.fileBytes[h]
			enc.Reused += int64(bytes[k])
		}
		if mode == writeDelta {
			files, bytes = append(slices.Clip(files), p.id), append(slices.Clip(bytes), lens[i])
			next.fileBytes[p.id] += lens[i]
		}
		next.files[i], next.bytes[i] = files, bytes
	}
	if _, ok := next.fileBytes[p.id]; !ok {
		next.fileBytes[p.id] = 0
	}
	for id := range next.fileBytes {
		if id != p.id {
			enc.Shared = append(enc.Shared, id)
		}
	}
	slices.Sort(enc.Shared)
	p.mu.Lock()
	p.result = next
	p.mu.Unlock()
	return enc, nil
}

// Complete tells the backend that checkpoint id is complete: its snapshot,
// if it was encoded, becomes the base of later incremental snapshots.
// Without one (the backend took no snapshot for id, or its encoding failed)
// the next snapshot is full, since the old base may no longer be kept.
// Snapshots planned for id or earlier are forgotten. It runs on the task
// goroutine.
func (b *Backend) Complete(id int64) {
	if b.lsm != nil {
		b.lsmComplete(id)
		return
	}
	p := b.pending[id]
	for pid := range b.pending {
		if pid <= id {
			delete(b.pending, pid)
		}
	}
	if id <= b.completed {
		return // an old notification: a newer base is adopted
	}
	b.completed = id
	b.base = nil
	if p != nil && !p.stale {
		p.mu.Lock()
		b.base = p.result
		p.mu.Unlock()
	}
	if b.base != nil {
		for name, st := range b.states {
			if t, ok := st.(logTrimmer); ok && b.base.baselines[name] != nil {
				t.trimLog(b.base.baselines[name])
			}
		}
	}
}

// Abort tells the backend that checkpoint id failed: its snapshot never
// becomes a base (its files may be deleted).
func (b *Backend) Abort(id int64) {
	if b.lsm != nil {
		b.lsmAbort(id)
		return
	}
	delete(b.pending, id)
}

// resetChain makes the next checkpoint snapshot full and keeps every
// snapshot planned before from becoming a base: the set of states changed
// (DropState, DropUnclaimed), which a key group's section in an earlier file
// still holds.
func (b *Backend) resetChain() {
	b.base = nil
	for _, p := range b.pending {
		p.stale = true // still pending: ChainFiles keeps what it reads
	}
}

// ChainFiles returns the ids of the checkpoints whose files a snapshot may
// still reference, increasing: the files of the base, which the next
// snapshot builds on, and those of the bases of snapshots planned for
// checkpoints not yet complete (with concurrent checkpoints, a newer base
// can be adopted before an older plan is encoded). The runtime keeps their
// handles.
func (b *Backend) ChainFiles() []int64 {
	ids := map[int64]bool{}
	for _, c := range append([]*chain{b.base}, b.pendingBases()...) {
		if c != nil {
			for id := range c.fileBytes {
				ids[id] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(ids))
}

// pendingBases returns the bases of the pending plans.
func (b *Backend) pendingBases() []*chain {
	var out []*chain
	for _, p := range b.pending {
		if p.base != nil {
			out = append(out, p.base)
		}
	}
	return out
}
