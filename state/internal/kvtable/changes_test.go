package kvtable

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestChanges checks Frozen.Changes against a model: random puts (same and
// other lengths), modifies and deletes over a few keys, with Freezes and
// Marks taken at random and views released at random (so compaction runs
// between them, in a small geometry). At each Freeze, for every earlier mark
// of the seed: either the table compacted since (ok false, which must then
// be true of the compaction count) or the changes are exactly the keys
// written since the mark and still present, with their values as of the
// Freeze, and the mark's model, minus the keys deleted since, plus the
// changes, is the view's content (what an incremental checkpoint restores).
func TestChanges(t *testing.T) {
	totalAcross, totalUntracked = 0, 0
	for seed := range uint64(120) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { changesSeed(t, seed) })
	}
	if totalAcross == 0 || totalUntracked == 0 {
		t.Fatalf("changes checked across a compaction %d times, refused after an untracked interval %d times: want both", totalAcross, totalUntracked)
	}
}

type markedState struct {
	mark    Mark
	model   map[string]string
	written map[string]bool // keys written (put or modified) since
	deleted map[string]bool // keys deleted since
}

func changesSeed(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	var tab Table
	tab.cfg = config{minChunk: 64, maxChunk: 256, minCompact: 1 + rng.IntN(512)}
	model := map[string]string{}
	var marks []*markedState
	var views []*Frozen
	hash := func(k []byte) uint64 { return splitmix(uint64(k[0])) }
	checked, acrossCompaction, untracked := 0, 0, 0
	for step := range 600 {
		_ = step
		k := []byte{byte(rng.IntN(24))}
		switch op := rng.IntN(20); {
		case op < 8:
			v := bytes.Repeat([]byte{byte(step)}, 1+rng.IntN(3)*4)
			if err := tab.Put(hash(k), k, v); err != nil {
				t.Fatal(err)
			}
			model[string(k)] = string(v)
			for _, m := range marks {
				m.written[string(k)] = true
			}
		case op < 11:
			v, ok, err := tab.Modify(hash(k), k)
			if err != nil {
				t.Fatal(err)
			}
			if ok != (model[string(k)] != "") {
				t.Fatalf("step %d: Modify found %v", step, ok)
			}
			if ok {
				v[0] = byte(step)
				b := []byte(model[string(k)])
				b[0] = byte(step)
				model[string(k)] = string(b)
				for _, m := range marks {
					m.written[string(k)] = true
				}
			}
		case op < 14:
			if tab.Delete(hash(k), k) {
				delete(model, string(k))
				for _, m := range marks {
					m.deleted[string(k)] = true
					delete(m.written, string(k))
				}
			}
		case op < 16 && len(views) > 0:
			i := rng.IntN(len(views))
			views[i].Release()
			views = append(views[:i], views[i+1:]...)
		case op < 17:
			marks = append(marks, &markedState{mark: tab.Mark(), model: clone(model), written: map[string]bool{}, deleted: map[string]bool{}})
		default:
			f := tab.Freeze()
			for _, m := range marks {
				changes, ok := f.Changes(m.mark)
				if !ok {
					if m.mark.seq <= f.lastUntracked {
						untracked++
						continue
					}
					if m.mark.compactions == tab.compactions || m.mark.seq == f.prev.seq {
						t.Fatalf("step %d: Changes refused the last mark or one with no compaction since (and tracked since)", step)
					}
					continue
				}
				checked++
				if m.mark.compactions != tab.compactions {
					acrossCompaction++
				}
				got := map[string]string{}
				for key, v := range changes {
					got[string(key)] = string(v)
				}
				want := map[string]string{}
				for key := range m.written {
					want[key] = model[key]
				}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("step %d: changes since mark %+v = %q, want %q", step, m.mark, got, want)
				}
				rebuilt := clone(m.model)
				for key := range m.deleted {
					delete(rebuilt, key)
				}
				for key, v := range got {
					rebuilt[key] = v
				}
				if fmt.Sprint(rebuilt) != fmt.Sprint(model) {
					t.Fatalf("step %d: mark's state + deletes + changes = %q, want %q", step, rebuilt, model)
				}
			}
			marks = append(marks, &markedState{mark: f.Mark(), model: clone(model), written: map[string]bool{}, deleted: map[string]bool{}})
			if len(marks) > 6 {
				marks = marks[1:]
			}
			if seed%2 == 0 { // the views are encoded at once: writes find none live
				for _, v := range views {
					v.Release()
				}
				views = views[:0]
				f.Release()
				continue
			}
			views = append(views, f)
		}
		if err := checkInvariants(&tab); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
	}
	if checked == 0 {
		t.Fatal("no Changes checked")
	}
	totalAcross += acrossCompaction
	totalUntracked += untracked
}

// totalAcross counts, over TestChanges' seeds, the marks whose changes were
// checked across a compaction.
// totalUntracked counts the marks refused because the table stopped
// tracking its writes after them.
var totalAcross, totalUntracked int

func clone(m map[string]string) map[string]string {
	c := make(map[string]string, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// Modify of an entry below the mark with no view live needs a new version;
// when the arena's addresses are used up it compacts first, as Put does,
// instead of failing with ErrFull (found by review: the mark outlives the
// views, so Modify appends where it used to write in place).
func TestModifyReclaimsBelowTheMark(t *testing.T) {
	var tab Table
	tab.cfg = config{minChunk: 64, maxChunk: 64, maxChunks: 4, minCompact: 1 << 30}
	h := func(k byte) uint64 { return splitmix(uint64(k)) }
	n := 0
	for ; n < 200; n++ {
		if tab.Put(h(byte(n)), []byte{byte(n)}, make([]byte, 8)) != nil {
			break
		}
	}
	if n == 200 {
		t.Fatal("the arena never filled")
	}
	for k := 1; k < n; k += 2 {
		tab.Delete(h(byte(k)), []byte{byte(k)})
	}
	tab.Freeze().Release()
	v, ok, err := tab.Modify(h(0), []byte{0})
	if err != nil || !ok {
		t.Fatalf("Modify with dead bytes to reclaim and no view live: found %v, %v", ok, err)
	}
	v[0] = 7
	if got, _ := tab.Get(h(0), []byte{0}); got[0] != 7 {
		t.Fatalf("the modified value is %x", got)
	}
	if err := checkInvariants(&tab); err != nil {
		t.Fatal(err)
	}
}
