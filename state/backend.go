package state

import (
	"cmp"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"sync/atomic"

	"github.com/ingest-engine/ingest/internal/inorder"
)

// Kind is the shape of a registered state. It is stored in snapshots, so
// restoring a name as a different kind is detected.
type Kind uint8

// The kinds of keyed state. The numeric values are part of the snapshot
// format: never renumber them.
const (
	KindValue  Kind = 1 // ValueState: one value per key
	KindMap    Kind = 2 // MapState: a map per key
	KindList   Kind = 3 // ListState: a list per key
	KindTimers Kind = 4 // Timers: event-time timers per key
)

// String returns "value", "map", "list", "timers" or "kind(N)".
func (k Kind) String() string {
	switch k {
	case KindValue:
		return "value"
	case KindMap:
		return "map"
	case KindList:
		return "list"
	case KindTimers:
		return "timers"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Backend holds all keyed state of one operator subtask for the key groups in
// its range: in memory, one table per key group per state, with
// copy-on-write snapshots (see Snapshot).
//
// A Backend is owned by its subtask's task goroutine: every method, and every
// method of the states registered on it, must be called from that goroutine.
// Only a Snapshot's Encode and EncodeCheckpoint may run elsewhere,
// concurrently with further use.
//
// Lifecycle: NewBackend, then Restore (when recovering), then register states
// (the operator's Open), then process records, calling Snapshot at each
// checkpoint barrier.
type Backend struct {
	// Immutable after NewBackend.
	operator       string
	maxParallelism int
	kgRange        KeyGroupRange

	// epoch is the current copy-on-write epoch; Snapshot increments it.
	// INVARIANT: a container (key-group table, MapState user map, ListState
	// list, timer set) tagged with an epoch at or below frozen may be
	// referenced by a Snapshot and is never written again: the first write
	// replaces it with a copy tagged with the current epoch. A container
	// tagged above frozen (with the current epoch, or restored entries
	// tagged restoreEpoch before any Snapshot) is referenced by no Snapshot
	// and is written in place, retagged with the current epoch.
	epoch uint64
	// frozen is the epoch of the last Snapshot (0: none yet). INVARIANT:
	// a container tagged with an epoch above it is referenced by no
	// Snapshot, so a write may take it over (retag it) without a copy.
	frozen uint64
	// restoreEpoch is the epoch restored entries are loaded at: the epoch
	// before Restore started a new one, so that the key groups they fill
	// count as unwritten since the restored checkpoint's snapshot (see
	// CheckpointSnapshot) and every later write as written.
	restoreEpoch uint64

	// sizeHint is the size of the last encoded snapshot (see Snapshot.Encode,
	// which may run on another goroutine).
	sizeHint atomic.Int64

	// states holds the registered states by name.
	// INVARIANT: a name is registered at most once, whatever its kind.
	states map[string]registered

	// restored holds state read by Restore that no registration has
	// claimed yet, by name; registration decodes and removes its entry.
	// INVARIANT: its names are disjoint from states' names.
	restored map[string]*restoredState

	// dropped are the schemas of the states DropState removed.
	dropped []Schema

	// restoreCalled records that Restore ran (it may run once).
	restoreCalled bool

	// base is the snapshot of the last complete checkpoint, which the next
	// CheckpointSnapshot builds on; nil: the next one is full. pending
	// holds the plans of checkpoints not yet complete or aborted, by id;
	// completed is the last id Complete was told of.
	base      *chain
	pending   map[int64]*checkpointPlan
	completed int64

	// lsm is the store of an LSM backend (NewLSMBackend), nil for the
	// memory backend. With it, states keep their entries in the store, and
	// restored state is in its catalog, not in restored.
	lsm *lsmStore

	// err is the first error of an access: a key outside kgRange, or a
	// write a compact table could not take (see fail). INVARIANT: once set
	// it never changes.
	err error
}

// NewBackend returns an empty backend for the subtask of operator that owns
// kgRange out of maxParallelism key groups. The operator name appears in every
// error and is stored in snapshots; Restore requires it to match.
//
// It panics if maxParallelism is outside (0, UpperBoundMaxParallelism] or
// kgRange is empty or not inside [0, maxParallelism): the runtime derives
// these from the plan with KeyGroupRangeFor, so a bad value is a programming
// error.
func NewBackend(operator string, maxParallelism int, kgRange KeyGroupRange) *Backend {
	if maxParallelism <= 0 || maxParallelism > UpperBoundMaxParallelism {
		panic(fmt.Sprintf("state: operator %q: max parallelism %d out of range (0,%d]", operator, maxParallelism, UpperBoundMaxParallelism))
	}
	if kgRange.Start < 0 || kgRange.End > maxParallelism || kgRange.Len() == 0 {
		panic(fmt.Sprintf("state: operator %q: key group range %v is empty or outside [0,%d)", operator, kgRange, maxParallelism))
	}
	return &Backend{
		operator:       operator,
		maxParallelism: maxParallelism,
		kgRange:        kgRange,
		epoch:          1,
		states:         make(map[string]registered),
		restored:       make(map[string]*restoredState),
	}
}

// Operator returns the operator name given to NewBackend.
func (b *Backend) Operator() string { return b.operator }

// MaxParallelism returns the number of key groups of the operator.
func (b *Backend) MaxParallelism() int { return b.maxParallelism }

// KeyGroupRange returns the key groups this backend owns.
func (b *Backend) KeyGroupRange() KeyGroupRange { return b.kgRange }

// Err returns the first error of a state access: a key whose key group is
// outside this backend's range, which means the record was routed to the
// wrong subtask, or a write a NamespacedValueState's tables could not take
// (one key group's table past its 4 GiB, or a value its codec could not read
// back). The access was ignored (reads returned nothing, writes were
// dropped), so state is no longer trustworthy: the runtime should check Err
// after each batch and fail the job. Snapshots of a backend with an error
// fail to encode.
func (b *Backend) Err() error { return b.err }

// fail records err as the backend's error unless one is recorded already.
func (b *Backend) fail(err error) {
	if b.err == nil {
		b.err = err
	}
}

// Unclaimed returns the names, sorted, of restored states that no
// registration has claimed. After the operator's Open, a non-empty result
// means the pipeline no longer declares state its checkpoint holds; the runtime
// turns that into an error naming the operator unless the user allowed
// dropping state (then it calls DropUnclaimed). Until dropped, unclaimed state
// is carried unchanged into every snapshot, so it is never lost silently.
func (b *Backend) Unclaimed() []string {
	if b.lsm != nil {
		return slices.Sorted(slices.Values(append(b.lsmUnclaimed(), slices.Collect(maps.Keys(b.restored))...)))
	}
	return slices.Sorted(maps.Keys(b.restored))
}

// hasRestored reports whether a restored state called name is unclaimed.
func (b *Backend) hasRestored(name string) bool {
	if _, ok := b.restored[name]; ok {
		return true
	}
	return b.lsm != nil && b.lsm.catalog[name] != nil && !b.lsm.claimed[name]
}

// DropUnclaimed discards restored state that no registration claimed and
// returns the dropped names, sorted. Later snapshots no longer contain it.
func (b *Backend) DropUnclaimed() []string {
	names := b.Unclaimed()
	if b.lsm != nil {
		for _, name := range names {
			b.lsmDrop(name)
		}
		clear(b.restored)
		return names
	}
	clear(b.restored)
	b.resetChain()
	return names
}

// stateInfo describes a state as snapshots record it.
type stateInfo struct {
	name   string
	kind   Kind
	codecs []string // codec names: key first, then value(s)
}

func (i *stateInfo) String() string {
	return fmt.Sprintf("%s state with codecs %q", i.kind, i.codecs)
}

// registered is implemented by every state type.
type registered interface {
	info() *stateInfo
	// freeze captures the current tables for a Snapshot in
	// O(key groups): it copies table references, not entries. The caller
	// then increments the backend's epoch.
	freeze() frozenState
	// load installs one restored key group's entries. It runs during
	// registration, before the state is used.
	//
	// load may be called concurrently for different key groups of one
	// state; it must write only that key group's data (its table index,
	// p.kg - Start, and what only that table references). Anything that
	// spans key groups (a count, a queue, an index) is built by loaded.
	load(p restoredPart) error
	// writtenSince reports whether key group index i (kg - Start) may
	// have changed since the Snapshot taken at epoch: true when unsure.
	// INVARIANT: false only if every entry of that key group is as the
	// snapshot saw it (incremental snapshots reuse its section).
	writtenSince(i int, epoch uint64) bool
}

// deltaLoader is implemented by states whose load applies a part's deltas
// (restoredPart.deltas): those whose frozen form writes them.
type deltaLoader interface{ loadsDeltas() }

// loadedHook is implemented by states that finish their restore once every
// key group is loaded (building an index over all key groups). loaded runs
// on the registering goroutine after every load has returned.
type loadedHook interface{ loaded() }

// releaser is implemented by frozen states that pin memory until the
// snapshot is done with them (see Snapshot.Release).
type releaser interface{ release() }

// frozenState is a state's tables as of a Snapshot: immutable, so Encode may
// read it from another goroutine.
type frozenState interface {
	info() *stateInfo
	// count returns the number of entries in key group index i (kg-Start).
	count(i int) int
	// appendEntries appends the entries of key group index i.
	appendEntries(dst []byte, i int) []byte
}

// register returns the state named info.name: the one already registered if
// it has the same kind, Go types and codecs, else a new one from build, with
// its restored entries (if any) loaded (see loadParts).
func register[S registered](b *Backend, info *stateInfo, build func() (S, error)) (S, error) {
	var zero S
	if info.name == "" {
		return zero, fmt.Errorf("state: operator %q: state name is empty", b.operator)
	}
	if prev, ok := b.states[info.name]; ok {
		if s, ok := prev.(S); ok && slices.Equal(prev.info().codecs, info.codecs) {
			return s, nil
		}
		return zero, fmt.Errorf("state: operator %q state %q: already registered as a %v (%T), now requested as a %v (%T)",
			b.operator, info.name, prev.info(), prev, info, zero)
	}
	s, err := build()
	if err != nil {
		return zero, err
	}
	if b.lsm != nil {
		r := b.restored[info.name] // a memory backend's checkpoint (see lsm_migrate.go)
		if r != nil && (r.meta.kind != info.kind || !slices.Equal(r.meta.codecs, info.codecs)) {
			return zero, fmt.Errorf("%w: operator %q state %q: the snapshot holds a %v, the operator registers a %v",
				ErrStateMismatch, b.operator, info.name, &r.meta, info)
		}
		if err := b.lsmCheckRestored(info); err != nil {
			return zero, err
		}
		l, err := b.lsmRegister(info)
		if err != nil {
			return zero, err
		}
		if err := any(s).(lsmAttacher).attachLSM(l); err != nil {
			return zero, err
		}
		if r != nil {
			if err := b.lsmAdopt(s, r); err != nil {
				return zero, err
			}
			delete(b.restored, info.name)
		}
		b.states[info.name] = s
		return s, nil
	}
	if r, ok := b.restored[info.name]; ok {
		if r.meta.kind != info.kind || !slices.Equal(r.meta.codecs, info.codecs) {
			return zero, fmt.Errorf("%w: operator %q state %q: the snapshot holds a %v, the operator registers a %v",
				ErrStateMismatch, b.operator, info.name, &r.meta, info)
		}
		if _, ok := any(s).(deltaLoader); !ok {
			if i := slices.IndexFunc(r.parts, func(p restoredPart) bool { return len(p.deltas) > 0 }); i >= 0 {
				return zero, fmt.Errorf("%w: operator %q state %q: key group %d of the snapshot holds changes (a delta) that a %T cannot apply",
					ErrStateMismatch, b.operator, info.name, r.parts[i].kg, zero)
			}
		}
		if err := loadParts(s, r.parts); err != nil {
			return zero, err
		}
		if h, ok := any(s).(loadedHook); ok {
			h.loaded()
		}
		delete(b.restored, info.name)
	}
	b.states[info.name] = s
	return s, nil
}

// parallelRestoreMinEntries is the number of restored entries of a state
// from which loadParts decodes on several goroutines: below it, starting
// them costs more than it saves.
const parallelRestoreMinEntries = 4096

// restoreWorkers bounds the goroutines loadParts decodes one state with:
// GOMAXPROCS. It is a variable so tests and benchmarks can compare the
// parallel path with the sequential one (1).
var restoreWorkers = func() int { return runtime.GOMAXPROCS(0) }

// loadParts decodes a restored state's non-empty parts into s, on up to
// restoreWorkers goroutines, one key group at a time each; a state with
// fewer than parallelRestoreMinEntries entries loads on the calling
// goroutine. It returns when every load it started has returned, so no
// goroutine touches s afterwards.
//
// Its outcome is that of loading the parts in key-group order and stopping
// at the first failure: the error (or panic, re-raised on the calling
// goroutine) of the lowest key group that fails. Parts are handed out in
// increasing order, and workers take no new part once one has failed, so
// every part below the lowest failure has been loaded when they stop. (A
// re-raised panic keeps its value; its stack is the calling goroutine's.)
func loadParts(s registered, parts []restoredPart) error {
	todo := make([]int, 0, len(parts)) // indexes of the non-empty parts
	entries := 0
	for i := range parts {
		if parts[i].count > 0 || len(parts[i].deltas) > 0 {
			todo = append(todo, i)
			entries += parts[i].count + len(parts[i].deltas)
		}
	}
	workers := restoreWorkers()
	if entries < parallelRestoreMinEntries {
		workers = 1
	}
	return inorder.Run(len(todo), workers, func(j int) error { return s.load(parts[todo[j]]) })
}

// keyRouter maps a state's keys to key-group table indexes.
type keyRouter[K comparable] struct {
	b     *Backend
	hash  func(K) uint64
	start int // b.kgRange.Start
	n     int // b.kgRange.Len()
	maxP  int // b.maxParallelism
	name  string
}

func newKeyRouter[K comparable](b *Backend, name string) (keyRouter[K], error) {
	hash, err := Hasher[K]()
	if err != nil {
		return keyRouter[K]{}, fmt.Errorf("state: operator %q state %q: %w", b.operator, name, err)
	}
	return keyRouter[K]{b: b, hash: hash, start: b.kgRange.Start, n: b.kgRange.Len(), maxP: b.maxParallelism, name: name}, nil
}

// index returns the table index (key group - Start) of key. A key outside
// the backend's range records the routing error and returns false.
func (r *keyRouter[K]) index(key K) (int, bool) {
	i := KeyGroupFor(r.hash(key), r.maxP) - r.start
	if uint(i) >= uint(r.n) {
		r.misrouted(key, i+r.start)
		return 0, false
	}
	return i, true
}

func (r *keyRouter[K]) misrouted(key K, kg int) {
	if r.b.err == nil {
		r.b.err = fmt.Errorf("state: operator %q state %q: key %v is in key group %d, outside this subtask's range %v: the record was routed to the wrong subtask",
			r.b.operator, r.name, key, kg, r.b.kgRange)
	}
}

// checkKeyGroup verifies that a restored key hashes to the key group whose
// section held it. A mismatch means the hash of the key type or its codec
// changed since the snapshot was written.
func (r *keyRouter[K]) checkKeyGroup(key K, kg int) error {
	if got := KeyGroupFor(r.hash(key), r.maxP); got != kg {
		return fmt.Errorf("%w: operator %q state %q: key %v was stored in key group %d but hashes to key group %d: the key type, its hash or its codec changed",
			ErrStateMismatch, r.b.operator, r.name, key, kg, got)
	}
	return nil
}

// readKey decodes a restored key with kc and checks that it belongs to
// key group kg (see checkKeyGroup): the start of every entry of a load.
func readKey[K comparable](r *partReader, kc Codec[K], kr *keyRouter[K], kg int) (K, error) {
	k, err := readValue(r, kc, "key")
	if err != nil {
		return k, err
	}
	return k, kr.checkKeyGroup(k, kg)
}

// ownTable prepares the table tagged *epoch for a write: if a Snapshot may
// reference m (older epoch), it returns a copy tagged with the current epoch.
func ownTable[M ~map[K]V, K comparable, V any](b *Backend, m M, epoch *uint64) M {
	if *epoch == b.epoch && m != nil {
		return m
	}
	if m != nil && *epoch > b.frozen {
		*epoch = b.epoch // no Snapshot references m (restored tables)
		return m
	}
	*epoch = b.epoch
	if m == nil {
		return make(M)
	}
	return maps.Clone(m)
}

// checkCodecs rejects nil codecs, naming the state.
func checkCodecs(b *Backend, name string, nils ...bool) error {
	for i, isNil := range nils {
		if isNil {
			return fmt.Errorf("state: operator %q state %q: codec %d is nil", b.operator, name, i)
		}
	}
	return nil
}

// DropState removes the state called name, registered or restored and
// unclaimed, so that later snapshots no longer hold it, and reports whether
// there was one. It is for an operator that moves its state to another name
// or layout (after reading the old one): a registered state must not be used
// after it is dropped. The backend remembers the dropped schema (Dropped),
// so that the runtime's check of a checkpoint's recorded schemas against
// the registered ones counts the state as handled, not forgotten.
func (b *Backend) DropState(name string) bool {
	if b.lsm != nil {
		var schema Schema
		if s, ok := b.states[name]; ok {
			schema = s.info().schema()
			delete(b.states, name)
		} else if e := b.lsm.catalog[name]; e != nil {
			schema = e.meta.schema()
		} else if r := b.restored[name]; r != nil {
			delete(b.restored, name)
			b.dropped = append(b.dropped, r.meta.schema())
			return true
		}
		if !b.lsmDrop(name) {
			return false
		}
		b.dropped = append(b.dropped, schema)
		return true
	}
	b.resetChain() // even if there is none: cheap, and never wrong
	if s, ok := b.states[name]; ok {
		b.dropped = append(b.dropped, s.info().schema())
		delete(b.states, name)
		return true
	}
	if r, ok := b.restored[name]; ok {
		b.dropped = append(b.dropped, r.meta.schema())
		delete(b.restored, name)
		return true
	}
	return false
}

// Dropped returns the schemas of the states DropState removed, in the order
// it removed them.
func (b *Backend) Dropped() []Schema { return slices.Clone(b.dropped) }

// HasState reports whether the backend holds any registered or restored
// state: a subtask without state writes no state file at a checkpoint.
func (b *Backend) HasState() bool {
	return len(b.states) > 0 || len(b.restored) > 0 || (b.lsm != nil && len(b.lsm.catalog) > 0)
}

// Schema describes one state as a checkpoint records it: its name, kind and
// codec names (key codec first, then the value codecs). The codec names
// carry what decides the encoding and meaning of the entries (a window's
// size and aggregate, a JSON codec's Go type), so two states with equal
// schemas can read each other's entries. It is the state's schema version: a
// restore accepts a state only under an equal schema.
type Schema struct {
	Name   string
	Kind   Kind
	Codecs []string
}

// Schemas returns the schema of every state the backend holds, sorted by
// name: the registered states and the restored states no registration has
// claimed yet (they are carried into snapshots unchanged).
func (b *Backend) Schemas() []Schema {
	out := make([]Schema, 0, len(b.states)+len(b.restored))
	for _, s := range b.states {
		out = append(out, s.info().schema())
	}
	for _, r := range b.restored {
		out = append(out, r.meta.schema())
	}
	if b.lsm != nil {
		for _, name := range b.lsmUnclaimed() {
			out = append(out, b.lsm.catalog[name].meta.schema())
		}
	}
	slices.SortFunc(out, func(x, y Schema) int { return cmp.Compare(x.Name, y.Name) })
	return out
}

// schema returns the exported description of the state.
func (i *stateInfo) schema() Schema {
	return Schema{Name: i.name, Kind: i.kind, Codecs: slices.Clone(i.codecs)}
}

// MoveRestoredValues passes each entry of the value state called name that
// the backend restored and no registration claimed (an earlier layout of an
// operator's state, read with kc and vc) to put, which stores it in the
// current layout (a ValueState's Update), and drops it (see DropState).
// Without such a state it does nothing. It runs in the operator's Open,
// after the states put writes are registered.
func MoveRestoredValues[K comparable, V any](b *Backend, name string, kc Codec[K], vc Codec[V], put func(K, V)) error {
	if !b.hasRestored(name) {
		return nil
	}
	from, err := NewValueState(b, name, kc, vc)
	if err != nil {
		return err
	}
	from.All(func(k K, v V) bool {
		put(k, v)
		return true
	})
	b.DropState(name)
	return nil
}

// MoveRestoredLists is MoveRestoredValues for a list state.
func MoveRestoredLists[K comparable, V any](b *Backend, name string, kc Codec[K], vc Codec[V], into *ListState[K, V]) error {
	if !b.hasRestored(name) {
		return nil
	}
	from, err := NewListState(b, name, kc, vc)
	if err != nil {
		return err
	}
	from.All(func(k K, vs []V) bool {
		into.Update(k, vs)
		return true
	})
	b.DropState(name)
	return nil
}
