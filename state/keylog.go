package state

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// This file gives the map-based states (ValueState, ListState) deltas: a
// checkpoint snapshot writes a changed key group's keys written since the
// last complete checkpoint — each set to its value now, or deleted — instead
// of all its entries, so a checkpoint's cost follows what changed, not the
// state's size.
//
// Each key group's table logs the keys written to it (keyLog). A snapshot
// freezes the log with the table; a baseline is each key group's log
// position. A delta since a baseline is the keys logged between the two
// positions, each once. A log that outgrows its table restarts: a key group
// whose log restarted since the baseline cannot write a delta and is
// written in full (hasDelta false).
//
// Delta payloads are the namespaced value state's format with no dropped
// namespace (see the format comment in snapshot.go): u64le 0 | u64le
// deleteCount | key×deleteCount | u64le setCount | entry×setCount, where an
// entry is as the state's full payload has it. A value state's key is the
// namespaced state's entry key when their codecs match, so a namespaced
// state applies a value state's deltas; a value state applies a namespaced
// state's delta unless it drops namespaces (ErrStateMismatch).
//
// When a checkpoint completes, each log is trimmed to its position at that
// checkpoint (Backend.Complete): a log holds the writes since the last
// complete checkpoint.

// keyLog is the keys written to one key group's table since a position.
type keyLog[K comparable] struct {
	// keys are the keys written since position off, in order, with
	// repeats.
	// INVARIANT: elements below len(keys) are never written again (a
	// snapshot reads them on another goroutine): a restart allocates a
	// new slice.
	keys []K
	off  int
}

// keyLogMin is the length below which a log never restarts: a small
// table's log may hold this many keys.
const keyLogMin = 1024

// add logs key, written to a table now holding size keys. A log past
// keyLogMin and twice the table's size restarts first: writing the table in
// full is then cheaper than the delta, and the log's memory stays bounded
// by the table's.
func (l *keyLog[K]) add(key K, size int) {
	if key != key {
		// A key unequal to itself (a NaN in it) cannot be found in the
		// frozen table to be set: only a full write holds it.
		l.off += len(l.keys) + 1
		l.keys = nil
		return
	}
	if len(l.keys) >= keyLogMin && len(l.keys) > 2*size {
		l.off += len(l.keys)
		l.keys = nil
	}
	l.keys = append(l.keys, key)
}

// trim drops the keys logged before position from, which no delta needs
// once a checkpoint at from is complete: the log then holds the writes
// since the last complete checkpoint, and restarts only when those outgrow
// the table (not, for every key group at once, some checkpoints later).
// The kept keys move to a new slice: a frozen log may read the old one.
func (l *keyLog[K]) trim(from int) {
	if from <= l.off || from > l.pos() {
		return
	}
	l.keys = append([]K(nil), l.keys[from-l.off:]...)
	l.off = from
}

// frozen returns the log as of now, for a snapshot.
func (l *keyLog[K]) frozen() keyLog[K] {
	return keyLog[K]{keys: l.keys[:len(l.keys):len(l.keys)], off: l.off}
}

// pos is the log's position: the keys logged ever.
func (l *keyLog[K]) pos() int { return l.off + len(l.keys) }

// holds reports whether the log holds the keys logged from position from
// on (it did not restart since, and from is not past it).
func (l *keyLog[K]) holds(from int) bool { return from >= l.off && from <= l.pos() }

// since returns the distinct keys logged from position from on, in the
// order first logged, and false when the log restarted since (it no longer
// holds them).
func (l *keyLog[K]) since(from int) ([]K, bool) {
	if from < l.off {
		return nil, false
	}
	keys := l.keys[from-l.off:]
	seen := make(map[K]struct{}, len(keys))
	out := make([]K, 0, len(keys))
	for _, k := range keys {
		if _, dup := seen[k]; !dup {
			seen[k] = struct{}{}
			out = append(out, k)
		}
	}
	return out, true
}

// logBaseline is what a delta of a map-based state since a snapshot builds
// on: each key group's log position at the snapshot. It pins no table.
type logBaseline struct{ pos []int }

// logPositions returns the baseline of logs.
func logPositions[K comparable](logs []keyLog[K]) *logBaseline {
	bl := &logBaseline{pos: make([]int, len(logs))}
	for i := range logs {
		bl.pos[i] = logs[i].pos()
	}
	return bl
}

// appendMapDelta appends the delta payload of the keys logged since from
// (see the file comment): each key absent from the frozen table (has
// false) deleted, each present one set with put, which appends its entry.
func appendMapDelta[K comparable](dst []byte, keys []K, kc Codec[K], has func(K) bool, put func([]byte, K) []byte) []byte {
	dst = binary.LittleEndian.AppendUint64(dst, 0) // no namespace dropped
	dst = counted(dst, func(dst []byte) ([]byte, uint64) {
		n := uint64(0)
		for _, k := range keys {
			if !has(k) {
				dst = kc.Append(dst, k)
				n++
			}
		}
		return dst, n
	})
	return counted(dst, func(dst []byte) ([]byte, uint64) {
		n := uint64(0)
		for _, k := range keys {
			if has(k) {
				dst = put(dst, k)
				n++
			}
		}
		return dst, n
	})
}

// readMapDelta reads one delta payload from r (see the file comment),
// calling del for each deleted key and set for each set entry, which reads
// the entry's value from r.
func readMapDelta[K comparable](r *partReader, kr *keyRouter[K], kc Codec[K], del func(K), set func(K) error) error {
	drops, err := r.u64count("dropped namespaces")
	if err != nil {
		return err
	}
	if drops != 0 {
		return fmt.Errorf("%w: operator %q state %q key group %d: %w", ErrStateMismatch, r.operator, r.state, r.kg, errDropsInMapDelta)
	}
	deletes, err := r.u64count("deleted keys")
	if err != nil {
		return err
	}
	for range deletes {
		k, err := readKey(r, kc, kr, r.kg)
		if err != nil {
			return err
		}
		del(k)
	}
	sets, err := r.u64count("set entries")
	if err != nil {
		return err
	}
	for range sets {
		k, err := readKey(r, kc, kr, r.kg)
		if err != nil {
			return err
		}
		if err := set(k); err != nil {
			return err
		}
	}
	if len(r.src) != 0 {
		return r.corrupt("delta", fmt.Errorf("%d trailing bytes", len(r.src)))
	}
	return nil
}

// errDropsInMapDelta is a delta that drops namespaces restored into a value
// or list state, which cannot tell a key's namespace.
var errDropsInMapDelta = errors.New("a delta dropping namespaces, which only a namespaced value state applies")

// logTrimmer is implemented by states whose key groups log the keys
// written: trimLog trims each log to the baseline of a complete checkpoint.
type logTrimmer interface{ trimLog(base any) }
