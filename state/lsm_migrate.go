package state

import (
	"encoding/binary"
	"fmt"
	"slices"
)

// Switching a job from the memory backend to the LSM one: an LSM backend
// given a memory backend's snapshot files (Restore) keeps them parsed, and
// each state's registration decodes its entries into the state's memory
// tables as the memory backend would, then writes them into the store
// (lsmSpiller.spillToLSM) and drops the tables. The whole state is in memory
// once, as it was in the job that wrote the checkpoint; the first checkpoint
// after it stores the whole store.

// lsmSpiller is implemented by every state type: it moves the entries a
// memory-format restore loaded into its tables into the store, through its
// LSM methods (which keep the store's bookkeeping: namespaces, timer
// counts), and empties the tables.
type lsmSpiller interface {
	spillToLSM() error
}

func (s *ValueState[K, V]) spillToLSM() error {
	for i := range s.tables {
		for k, v := range s.tables[i].m {
			s.lsmStore(i, k, v)
		}
		s.tables[i] = valueTable[K, V]{}
	}
	s.lsm.commitDirect(s.name)
	return s.b.err
}

func (s *MapState[K, UK, UV]) spillToLSM() error {
	for i := range s.tables {
		for k, um := range s.tables[i].m {
			for uk, uv := range um.m {
				s.lsmPut(i, k, uk, uv)
			}
		}
		s.tables[i] = mapTable[K, UK, UV]{}
	}
	return s.b.err
}

func (s *ListState[K, V]) spillToLSM() error {
	for i := range s.tables {
		for k, l := range s.tables[i].m {
			s.lsmStore(i, k, l.vs)
		}
		s.tables[i] = listTable[K, V]{}
	}
	s.lsm.commitDirect(s.name)
	return s.b.err
}

func (s *NamespacedValueState[K, V]) spillToLSM() error {
	// The memory tables' namespaces are counted again as the entries
	// reach the store (lsmMark).
	clear(s.spaces)
	s.namespaces = nil
	for i := range s.groups {
		g := &s.groups[i]
		for _, ns := range slices.Sorted(mapKeys(g.tables)) {
			for kb, vb := range g.tables[ns].All() {
				s.lsm.set(s.name, append(s.lsmPrefix(i, ns), kb...), vb)
			}
			s.lsmMark(i, ns, 0)
		}
		s.groups[i] = nsGroup{}
	}
	return s.b.err
}

func (t *Timers[K]) spillToLSM() error {
	for i := range t.tables {
		for id, seq := range t.tables[i].m {
			kb := t.kc.Append(nil, id.key)
			val := binary.AppendVarint(nil, id.ns)
			t.lsm.set(t.name, t.lsmQueueKey(i, id.ts, seq), append(val, kb...))
			t.lsm.set(t.name, t.lsmIndexKey(i, kb, id.ns, id.ts), binary.BigEndian.AppendUint64(nil, seq))
			t.lt.counts[i]++
			t.lt.live++
			t.lt.dirty[i] = true
			t.lt.nextSeq = max(t.lt.nextSeq, seq+1)
		}
		t.tables[i] = timerTable[K]{}
		t.lt.heads[i] = lsmTimerHead{}
	}
	t.queue, t.live, t.nextSeq = nil, 0, 0
	return t.b.err
}

// lsmAdopt moves the restored memory-format state r into the registered
// state s of an LSM backend: s's memory tables are loaded from r's parts as
// the memory backend's registration does, then spilled into the store.
func (b *Backend) lsmAdopt(s registered, r *restoredState) error {
	if err := loadParts(s, r.parts); err != nil {
		return err
	}
	if h, ok := s.(loadedHook); ok {
		h.loaded()
	}
	if err := s.(lsmSpiller).spillToLSM(); err != nil {
		return fmt.Errorf("state: operator %q state %q: moving the memory backend's state into the pebble store: %w", b.operator, r.meta.name, err)
	}
	return nil
}
