package state

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// Hostile tests of value and list state deltas (state/keylog.go), written by a
// reviewer: a random model with concurrent encodes, aborted and abandoned
// checkpoints, savepoints, dropped states and failovers; NaN keys; a
// restarted log; checkpoint sizes; formats of other states and versions.

// klrStates is the set of states the review tests drive: a value state, a
// list state, and a value state that is dropped and registered again.
type klrStates struct {
	b *Backend
	v *ValueState[int64, int64]
	l *ListState[int64, int64]
	x *ValueState[int64, int64]
}

func klrRegister(t testing.TB, b *Backend) *klrStates {
	t.Helper()
	s := &klrStates{b: b}
	var err error
	if s.v, err = NewValueState(b, "v", Int64Codec{}, Int64Codec{}); err != nil {
		t.Fatal(err)
	}
	if s.l, err = NewListState(b, "l", Int64Codec{}, Int64Codec{}); err != nil {
		t.Fatal(err)
	}
	if s.x, err = NewValueState(b, "x", Int64Codec{}, Int64Codec{}); err != nil {
		t.Fatal(err)
	}
	return s
}

// klrModel is what the states should hold.
type klrModel struct {
	v map[int64]int64
	l map[int64][]int64
	x map[int64]int64
}

func newKlrModel() *klrModel {
	return &klrModel{v: map[int64]int64{}, l: map[int64][]int64{}, x: map[int64]int64{}}
}

func (m *klrModel) clone() *klrModel {
	c := &klrModel{v: maps.Clone(m.v), l: map[int64][]int64{}, x: maps.Clone(m.x)}
	for k, vs := range m.l {
		c.l[k] = slices.Clone(vs)
	}
	return c
}

// diff returns the first difference between s's contents and m, or "".
func (m *klrModel) diff(s *klrStates) string {
	got := map[int64]int64{}
	s.v.All(func(k, v int64) bool { got[k] = v; return true })
	if !maps.Equal(got, m.v) {
		return fmt.Sprintf("value state: %d keys, want %d: %s", len(got), len(m.v), klrMapDiff(got, m.v))
	}
	gotX := map[int64]int64{}
	s.x.All(func(k, v int64) bool { gotX[k] = v; return true })
	if !maps.Equal(gotX, m.x) {
		return fmt.Sprintf("value state x: %d keys, want %d: %s", len(gotX), len(m.x), klrMapDiff(gotX, m.x))
	}
	gotL := map[int64][]int64{}
	s.l.All(func(k int64, vs []int64) bool { gotL[k] = slices.Clone(vs); return true })
	if !maps.EqualFunc(gotL, m.l, slices.Equal) {
		for k, vs := range m.l {
			if !slices.Equal(gotL[k], vs) {
				return fmt.Sprintf("list state: key %d: %v, want %v", k, gotL[k], vs)
			}
		}
		for k, vs := range gotL {
			if _, ok := m.l[k]; !ok {
				return fmt.Sprintf("list state: key %d: %v, want none", k, vs)
			}
		}
	}
	return ""
}

func klrMapDiff(got, want map[int64]int64) string {
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			return fmt.Sprintf("key %d: %d %v, want %d", k, g, ok, v)
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			return fmt.Sprintf("key %d: %d, want none", k, g)
		}
	}
	return ""
}

// klrPending is a checkpoint snapshot not yet encoded or ended.
type klrPending struct {
	id    int64
	snap  *Snapshot
	model *klrModel
	enc   *Encoded
	done  chan struct{} // closed when an asynchronous encode ended
	err   error
}

// klrRun drives a backend through random writes and checkpoints: several
// in flight, encoded late or concurrently, completed out of order, aborted
// or abandoned, savepoints, plain Snapshots, DropState and registration
// again, and restores (failover) from the last complete checkpoint. Every
// encoded checkpoint must restore to exactly the state at its barrier and
// reference no aborted checkpoint's file.
func klrRun(t *testing.T, seed uint64, steps int, async bool) {
	const maxP = 8
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	rng := KeyGroupRange{Start: 0, End: maxP}
	b := NewBackend("op", maxP, rng)
	s := klrRegister(t, b)
	m := newKlrModel()

	files := map[int64][]byte{}     // encoded checkpoints' files
	models := map[int64]*klrModel{} // the state at each encoded checkpoint
	shared := map[int64][]int64{}   // each encoded checkpoint's Shared
	aborted := map[int64]bool{}     // checkpoints aborted (files deleted)
	var pending []*klrPending
	nextID := int64(1)
	lastComplete := int64(0)
	keys := int64(30 + r.IntN(60))

	restoreOf := func(id int64) (*klrStates, error) {
		nb := NewBackend("op", maxP, rng)
		var data [][]byte
		for _, sid := range append(slices.Clone(shared[id]), id) {
			f, ok := files[sid]
			if !ok {
				return nil, fmt.Errorf("checkpoint %d needs file %d, which is gone (aborted %v)", id, sid, aborted[sid])
			}
			data = append(data, f)
		}
		if err := nb.Restore(data...); err != nil {
			return nil, err
		}
		var err error
		ns := &klrStates{b: nb}
		if ns.v, err = NewValueState(nb, "v", Int64Codec{}, Int64Codec{}); err != nil {
			return nil, err
		}
		if ns.l, err = NewListState(nb, "l", Int64Codec{}, Int64Codec{}); err != nil {
			return nil, err
		}
		if ns.x, err = NewValueState(nb, "x", Int64Codec{}, Int64Codec{}); err != nil {
			return nil, err
		}
		return ns, nil
	}
	verify := func(id int64, step int) {
		t.Helper()
		ns, err := restoreOf(id)
		if err != nil {
			t.Fatalf("seed %d step %d: restore of checkpoint %d: %v", seed, step, id, err)
		}
		if d := models[id].diff(ns); d != "" {
			t.Fatalf("seed %d step %d: checkpoint %d restored wrong: %s", seed, step, id, d)
		}
	}
	finish := func(p *klrPending, step int) bool {
		t.Helper()
		if p.done != nil {
			<-p.done
			p.done = nil
		}
		if p.enc == nil && p.err == nil {
			p.enc, p.err = p.snap.EncodeCheckpoint()
		}
		if p.err != nil {
			t.Fatalf("seed %d step %d: encode of checkpoint %d: %v", seed, step, p.id, p.err)
		}
		if _, ok := files[p.id]; !ok {
			for _, sid := range p.enc.Shared {
				if aborted[sid] {
					t.Fatalf("seed %d step %d: checkpoint %d references aborted checkpoint %d", seed, step, p.id, sid)
				}
			}
			files[p.id] = p.enc.Data
			klrDeltaParts += countDeltas(t, p.enc.Data)
			models[p.id] = p.model
			shared[p.id] = p.enc.Shared
			verify(p.id, step)
		}
		return true
	}
	remove := func(p *klrPending) {
		pending = slices.DeleteFunc(pending, func(q *klrPending) bool { return q == p })
	}

	for step := range steps {
		switch op := r.IntN(100); {
		case op < 30:
			k := r.Int64N(keys)
			v := r.Int64N(1000)
			s.v.Update(k, v)
			m.v[k] = v
		case op < 36:
			k := r.Int64N(keys)
			s.v.Clear(k)
			delete(m.v, k)
		case op < 50:
			k := r.Int64N(keys)
			v := r.Int64N(1000)
			s.l.Add(k, v)
			m.l[k] = append(m.l[k], v)
		case op < 54:
			k := r.Int64N(keys)
			vs := []int64{r.Int64N(9), r.Int64N(9)}[:r.IntN(3)]
			s.l.Update(k, vs)
			if len(vs) == 0 {
				delete(m.l, k)
			} else {
				m.l[k] = slices.Clone(vs)
			}
		case op < 57:
			k := r.Int64N(keys)
			s.l.Clear(k)
			delete(m.l, k)
		case op < 62:
			k := r.Int64N(keys)
			v := r.Int64N(1000)
			s.x.Update(k, v)
			m.x[k] = v
		case op < 63:
			// A hot key: its key group's log restarts.
			k := r.Int64N(keys)
			for i := range 1100 + r.IntN(1200) {
				s.v.Update(k, int64(i))
				m.v[k] = int64(i)
			}
		case op < 72:
			// A barrier.
			id := nextID
			nextID++
			savepoint := r.IntN(10) == 0
			p := &klrPending{id: id, snap: b.CheckpointSnapshot(id, savepoint), model: m.clone()}
			if async && r.IntN(2) == 0 {
				p.done = make(chan struct{})
				go func() {
					defer close(p.done)
					p.enc, p.err = p.snap.EncodeCheckpoint()
				}()
			}
			pending = append(pending, p)
		case op < 75:
			if r.IntN(3) == 0 {
				b.Snapshot() // a plain snapshot, never encoded
			}
		case op < 85 && len(pending) > 0:
			// A checkpoint completes (any pending one, oldest most often).
			p := pending[0]
			if r.IntN(3) == 0 {
				p = pending[r.IntN(len(pending))]
			}
			finish(p, step)
			b.Complete(p.id)
			lastComplete = max(lastComplete, p.id)
			// Complete forgets every plan up to p.id.
			pending = slices.DeleteFunc(pending, func(q *klrPending) bool {
				if q.id <= p.id && q != p {
					if q.done != nil {
						<-q.done
					}
				}
				return q.id <= p.id
			})
		case op < 88 && len(pending) > 0:
			// A checkpoint fails: maybe after encoding; its files go.
			p := pending[r.IntN(len(pending))]
			if r.IntN(2) == 0 {
				finish(p, step)
			} else if p.done != nil {
				<-p.done
			}
			b.Abort(p.id)
			aborted[p.id] = true
			delete(files, p.id)
			remove(p)
		case op < 89:
			// DropState and registration again.
			b.DropState("x")
			var err error
			if s.x, err = NewValueState(b, "x", Int64Codec{}, Int64Codec{}); err != nil {
				t.Fatal(err)
			}
			clear(m.x)
		case op < 90 && lastComplete > 0 && files[lastComplete] != nil:
			// Failover: restore the last complete checkpoint.
			for _, p := range pending {
				if p.done != nil {
					<-p.done
				}
			}
			pending = nil
			ns, err := restoreOf(lastComplete)
			if err != nil {
				t.Fatalf("seed %d step %d: failover to %d: %v", seed, step, lastComplete, err)
			}
			b, s, m = ns.b, ns, models[lastComplete].clone()
		}
	}
	for _, p := range pending {
		finish(p, steps)
	}
}

// klrDeltaParts counts the delta parts the model runs wrote (so that they
// are known to test deltas).
var klrDeltaParts int

// A random model of checkpoints, synchronous encodes.
func TestDeltasModel(t *testing.T) {
	klrDeltaParts = 0
	for seed := range uint64(40) {
		klrRun(t, seed, 3000, false)
	}
	if klrDeltaParts < 100 {
		t.Fatalf("the runs wrote %d delta parts: the model does not exercise deltas", klrDeltaParts)
	}
	t.Logf("%d delta parts", klrDeltaParts)
}

// The same with encodes on other goroutines while writes continue (run
// with -race).
func TestDeltasModelConcurrentEncode(t *testing.T) {
	for seed := range uint64(20) {
		klrRun(t, 1000+seed, 3000, true)
	}
}

// klrChain checkpoints b as checkpoint id, completes it, stores its file in
// files and returns the files a restore of it reads, oldest first.
func klrChain(t *testing.T, b *Backend, id int64, files map[int64][]byte) [][]byte {
	t.Helper()
	s := b.CheckpointSnapshot(id, false)
	enc, err := s.EncodeCheckpoint()
	s.Release()
	if err != nil {
		t.Fatal(err)
	}
	b.Complete(id)
	files[id] = enc.Data
	var out [][]byte
	for _, sid := range append(slices.Clone(enc.Shared), id) {
		out = append(out, files[sid])
	}
	return out
}

// A NamespacedValueState applies a ValueState's deltas (codecs matching:
// pairCodec writes the namespaced entry key): values updated, cleared
// (emptying a namespace in a key group) and set in a namespace the base did
// not have.
func TestDeltasNamespacedAppliesValueStateDeltas(t *testing.T) {
	b := fullBackend("op")
	vs := must(NewValueState(b, "ns", pairCodec{}, StringCodec{}))
	want := nsModel{}
	set := func(ns int64, k, v string) { vs.Update(pairKey{k, ns}, v); want[nsKey{ns, k}] = v }
	clr := func(ns int64, k string) { vs.Clear(pairKey{k, ns}); delete(want, nsKey{ns, k}) }
	for i := range 3000 {
		set(int64(i%5), fmt.Sprint("key", i%700), fmt.Sprint(i))
	}
	files := map[int64][]byte{}
	klrChain(t, b, 1, files)
	for i := range 300 {
		set(int64(i%3), fmt.Sprint("key", i*7%700), fmt.Sprint("u", i))
		clr(4, fmt.Sprint("key", i*13%700))
		set(9, fmt.Sprint("new", i), "n")
	}
	clr(3, "key3") // maybe the last of namespace 3 in its key group
	chain := klrChain(t, b, 2, files)
	if countDeltas(t, chain[len(chain)-1]) == 0 {
		t.Fatal("checkpoint 2 wrote no delta")
	}
	nb := fullBackend("op")
	if err := nb.Restore(chain...); err != nil {
		t.Fatal(err)
	}
	if d := diffNS(nsContents(t, nsState(t, nb)), want); d != "" {
		t.Fatalf("the namespaced state applied the value state's deltas wrong:\n%s", d)
	}
}

// A ValueState applies a NamespacedValueState's delta that drops no
// namespace (values rewritten in place, keys deleted: no table replaced).
func TestDeltasValueStateAppliesNamespacedDeltaWithoutDrops(t *testing.T) {
	b := NewBackend("op", 4, KeyGroupRange{Start: 0, End: 4})
	ns := nsState(t, b)
	want := nsModel{}
	for i := range 20000 {
		k := nsKey{int64(i % 4), fmt.Sprint("key", i%5000)}
		want[k] = fmt.Sprintf("v%04d", i)
		ns.Update(k.ns, k.key, want[k])
	}
	files := map[int64][]byte{}
	klrChain(t, b, 1, files)
	for i := range 100 {
		k := nsKey{int64(i % 4), fmt.Sprint("key", i*4%5000)}
		if _, ok := want[k]; ok {
			want[k] = fmt.Sprintf("u%04d", i)
			ns.Update(k.ns, k.key, want[k])
		}
		d := nsKey{int64(i % 4), fmt.Sprint("key", i*12%5000)}
		if _, ok := want[d]; ok {
			ns.Clear(d.ns, d.key)
			delete(want, d)
		}
	}
	chain := klrChain(t, b, 2, files)
	if countDeltas(t, chain[len(chain)-1]) == 0 {
		t.Fatal("checkpoint 2 wrote no delta")
	}
	vb := NewBackend("op", 4, KeyGroupRange{Start: 0, End: 4})
	if err := vb.Restore(chain...); err != nil {
		t.Fatal(err)
	}
	vs, err := NewValueState(vb, "ns", pairCodec{}, StringCodec{})
	if err != nil {
		t.Fatal(err)
	}
	got := nsModel{}
	vs.All(func(k pairKey, v string) bool { got[nsKey{k.ns, k.key}] = v; return true })
	if d := diffNS(got, want); d != "" {
		t.Fatalf("the value state applied the namespaced delta wrong:\n%s", d)
	}
}

// A ValueState cannot apply a NamespacedValueState's delta that drops a
// namespace (a window fired): its registration must fail with
// ErrStateMismatch, as it did before this commit for any delta (the state
// does not fit the registration; the runtime then fails the job as
// incompatible), not with ErrCorrupt, which tells the runtime the
// checkpoint is damaged (recovery falls back past a "damaged" checkpoint;
// an Open error that is not a mismatch is retried as transient).
func TestDeltasValueStateRefusesNamespacedDropsAsMismatch(t *testing.T) {
	b := fullBackend("op")
	ns := nsState(t, b)
	for i := range 2000 {
		ns.Update(int64(i%4), fmt.Sprint("key", i%500), fmt.Sprint(i))
	}
	files := map[int64][]byte{}
	klrChain(t, b, 1, files)
	ns.DropNamespace(0)
	ns.Update(1, "key1", "u")
	chain := klrChain(t, b, 2, files)
	if countDeltas(t, chain[len(chain)-1]) == 0 {
		t.Fatal("checkpoint 2 wrote no delta")
	}
	vb := fullBackend("op")
	if err := vb.Restore(chain...); err != nil {
		t.Fatal(err)
	}
	_, err := NewValueState(vb, "ns", pairCodec{}, StringCodec{})
	if err == nil {
		t.Fatal("a value state registered over a delta dropping namespaces")
	}
	if !errors.Is(err, ErrStateMismatch) || IsCorrupt(err) {
		t.Fatalf("registration: %v\nwant ErrStateMismatch (the checkpoint is sound; the registration does not fit it), not ErrCorrupt", err)
	}
}

// A checkpoint chain written by the build before this commit (baf88a9):
// value and list states in full in delta sections (written there by a
// namespaced state's deltas), restored by this build's value and list
// states. Checkpoints 1 (full), 2 and 3.
var klrOldChain = [][]byte{
	[]byte("IGKS\x03\x02op\x04\x00\x04\x01\x00\xcc\xc0.\xc3\x00\x00\x03\x01l\x03\x02\x05int64\x05int64\x03/\x00\x00\x00\x00\x00\x00\x00\x00\n\x00\x1a4Nh\x82\x01\x9c\x01\xb6\x01\xd0\x01\xea\x01\x0e\t\x0e(B\\v\x90\x01\xaa\x01\xc4\x01\xde\x01\x12\t\x12,F`z\x94\x01\xae\x01\xc8\x01\xe2\x01\x02ns\x01\x02\fpair(string)\x06string\x18\xab\x00\x00\x00\x00\x00\x00\x00\x03k63\x00\x01x\x03k33\x00\x01x\x03k57\x00\x01x\x04k102\x00\x01x\x03k72\x00\x01x\x03k93\x00\x01x\x04k108\x00\x01x\x03k81\x00\x01x\x03k87\x00\x01x\x03k10\x02\x01x\x04k103\x02\x01x\x03k43\x02\x01x\x04k118\x02\x01x\x03k22\x02\x01x\x02k2\x04\x01x\x03k47\x04\x01x\x04k113\x04\x01x\x02k8\x04\x01x\x03k65\x04\x01x\x03k71\x04\x01x\x03k20\x04\x01x\x03k14\x04\x01x\x03k89\x04\x01x\x03k23\x04\x01x\x01v\x01\x02\x05int64\x05int64$v\x00\x00\x00\x00\x00\x00\x00\xe4\x01\xe8\x11\x12\xb4\x01\x1c\x98\x02\xce\x01\x8c\x10\x00\x00,\xb8\x030\xe0\x03>\xec\x04H\xd0\x05N\x8c\x06h\x90\bv\x9c\t\xb4\x01\x88\x0e\xdc\x01\x98\x11\xe2\x01\xd4\x11\x1a\x84\x02 \xc0\x024\x88\x048\xb0\x04`\xc0\a\xee\x01\xcc\x12\"\xd4\x02\xe8\x01\x90\x12:\xc4\x04D\xa8\x05T\xc8\x06~\xec\t\xd2\x01\xb4\x10\x0e\x8c\x01X\xf0\x06f\xfc\a\xba\x01\xc4\x0en\xcc\bx\xb0\t\xc0\x01\x80\x0f\xd4\x01\xc8\x10\x9eR\xd8\x0e\x01\x00\x03\x01l\x03\x02\x05int64\x05int64\x05N\x00\x00\x00\x00\x00\x00\x00\x02\n\x02\x1c6Pj\x84\x01\x9e\x01\xb8\x01\xd2\x01\xec\x01\x06\t\x06 :Tn\x88\x01\xa2\x01\xbc\x01\xd6\x01\n\t\n$>Xr\x8c\x01\xa6\x01\xc0\x01\xda\x01\f\t\f&@Zt\x8e\x01\xa8\x01\xc2\x01\xdc\x01\x18\t\x182Lf\x80\x01\x9a\x01\xb4\x01\xce\x01\xe8\x01\x02ns\x01\x02\fpair(string)\x06string%\x04\x01\x00\x00\x00\x00\x00\x00\x03k24\x00\x01x\x02k0\x00\x01x\x03k45\x00\x01x\x03k99\x00\x01x\x03k42\x00\x01x\x03k66\x00\x01x\x03k51\x00\x01x\x03k48\x00\x01x\x03k90\x00\x01x\x03k27\x00\x01x\x03k69\x00\x01x\x03k75\x00\x01x\x03k19\x02\x01x\x03k94\x02\x01x\x02k1\x02\x01x\x03k91\x02\x01x\x03k79\x02\x01x\x03k49\x02\x01x\x03k37\x02\x01x\x03k76\x02\x01x\x04k106\x02\x01x\x04k104\x04\x01x\x03k56\x04\x01x\x03k59\x04\x01x\x03k26\x04\x01x\x03k83\x04\x01x\x03k98\x04\x01x\x03k38\x04\x01x\x03k80\x04\x01x\x03k29\x04\x01x\x03k77\x04\x01x\x04k107\x04\x01x\x03k41\x04\x01x\x03k68\x04\x01x\x03k17\x04\x01x\x03k95\x04\x01x\x03k62\x04\x01x\x01v\x01\x02\x05int64\x05int64\x1ec\x00\x00\x00\x00\x00\x00\x00r\xf4\b\x8e\x01\x8c\vF\xbc\x05^\xac\a\x8c\x01\xf8\n\x9a\x01\x84\f\x06<\fx$\xe8\x02\x8a\x01\xe4\n\xb6\x01\x9c\x0e\x18\xf0\x01.\xcc\x03b\xd4\a\x98\x01\xf0\v\x02\x14z\xc4\t|\xd8\t\xb8\x01\xb0\x0e\xde\x01\xac\x11\xa0\x01\xc0\fV\xdc\x06\xa4\x01\xe8\f\xa8\x01\x90\rJ\xe4\x05P\xa0\x06\xca\x01\xe4\x0f\xcc\x01\xf8\x0f\nd<\xd8\x04\xa8\x15\x90M\x02\x00\x03\x01l\x03\x02\x05int64\x05int64\x02\x1e\x00\x00\x00\x00\x00\x00\x00\x16\t\x160Jd~\x98\x01\xb2\x01\xcc\x01\xe6\x01\x10\t\x10*D^x\x92\x01\xac\x01\xc6\x01\xe0\x01\x02ns\x01\x02\fpair(string)\x06string \xe6\x00\x00\x00\x00\x00\x00\x00\x04k114\x00\x01x\x03k18\x00\x01x\x03k96\x00\x01x\x02k6\x00\x01x\x03k30\x00\x01x\x04k117\x00\x01x\x03k21\x00\x01x\x04k111\x00\x01x\x03k36\x00\x01x\x03k34\x02\x01x\x03k64\x02\x01x\x03k85\x02\x01x\x03k97\x02\x01x\x03k82\x02\x01x\x03k31\x02\x01x\x03k58\x02\x01x\x04k109\x02\x01x\x04k100\x02\x01x\x03k40\x02\x01x\x03k88\x02\x01x\x02k4\x02\x01x\x03k52\x02\x01x\x03k61\x02\x01x\x03k55\x02\x01x\x04k112\x02\x01x\x03k16\x02\x01x\x03k74\x04\x01x\x03k32\x04\x01x\x04k101\x04\x01x\x04k116\x04\x01x\x03k86\x04\x01x\x03k35\x04\x01x\x01v\x01\x02\x05int64\x05int64\x18V\x00\x00\x00\x00\x00\x00\x00B\x94\x05\x86\x01\xbc\n\xb2\x01\xf4\r\xc8\x01\xd0\x0f\xe6\x01\xfc\x11\x10\xa0\x01\x16\xdc\x01*\xa4\x03R\xb4\x06\xac\x01\xb8\r\xae\x01\xcc\r\xb0\x01\xe0\r\xc4\x01\xa8\x0f(\x90\x032\xf4\x036\x9c\x04d\xe8\a\x96\x01\xdc\v\x9e\x01\xac\f\xd0\x01\xa0\x10\xd6\x01\xdc\x10l\xb8\b\x84\x01\xa8\n\xbc\x01\xd8\x0eԟ\xa6\xd9\x03\x00\x03\x01l\x03\x02\x05int64\x05int64\x03/\x00\x00\x00\x00\x00\x00\x00\x04\n\x04\x1e8Rl\x86\x01\xa0\x01\xba\x01\xd4\x01\xee\x01\b\t\b\"<Vp\x8a\x01\xa4\x01\xbe\x01\xd8\x01\x14\t\x14.Hb|\x96\x01\xb0\x01\xca\x01\xe4\x01\x02ns\x01\x02\fpair(string)\x06string\x1b\xbd\x00\x00\x00\x00\x00\x00\x00\x03k54\x00\x01x\x03k84\x00\x01x\x02k3\x00\x01x\x02k9\x00\x01x\x03k39\x00\x01x\x03k12\x00\x01x\x03k15\x00\x01x\x03k60\x00\x01x\x03k78\x00\x01x\x04k105\x00\x01x\x03k13\x02\x01x\x03k73\x02\x01x\x03k25\x02\x01x\x04k115\x02\x01x\x03k28\x02\x01x\x03k67\x02\x01x\x03k70\x02\x01x\x02k7\x02\x01x\x03k46\x02\x01x\x02k5\x04\x01x\x03k44\x04\x01x\x03k50\x04\x01x\x04k110\x04\x01x\x03k53\x04\x01x\x03k92\x04\x01x\x04k119\x04\x01x\x03k11\x04\x01x\x01v\x01\x02\x05int64\x05int64\x1ej\x00\x00\x00\x00\x00\x00\x00\xec\x01\xb8\x12\xbe\x01\xec\x0e\xea\x01\xa4\x12\x90\x01\xa0\v\x04(\x82\x01\x94\n\xc2\x01\x94\x0f\xa2\x01\xd4\f\xe0\x01\xc0\x11\x14\xc8\x01\x1e\xac\x02Z\x84\a\x88\x01\xd0\n&\xfc\x02@\x80\x05\xc6\x01\xbc\x0f\xd8\x01\xf0\x10\xda\x01\x84\x11p\xe0\b\x9c\x01\x98\f\bP\x80\x01\x80\n\xaa\x01\xa4\r\x92\x01\xb4\v\x94\x01\xc8\v\xa6\x01\xfc\fL\xf8\x05\\\x98\aj\xa4\bt\x88\tO\xee$\xa2\x04\x00\x11\xab\x03\x01\xbc\x03\x90\x04\x02\xcc\a\xb5\x03\x03\x81\v\xb1\x032\a\x00\x00\x00\x00\x00\x00\xfd\xa6ObIGKS"),
	[]byte("IGKS\x03\x02op\x04\x00\x04\x02\x01V\xeb\xa2\x05\x00\x01\x02\x02ns\x81\x02\fpair(string)\x06string\x00N\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\b\x00\x00\x00\x00\x00\x00\x00\x03k33\x00\x01y\x03k10\x02\x01y\x03k22\x02\x01y\x02k2\x04\x01y\x02k8\x04\x01y\x03k20\x04\x01y\x03k14\x04\x01y\x03k23\x04\x01y\x01v\x01\x02\x05int64\x05int64\x1fd\x00\x00\x00\x00\x00\x00\x00v\x9c\t\xb4\x01\x88\x0e\xdc\x01\x98\x11\xe2\x01\xd4\x11\x1a\x194\x88\x04`\xc0\a\xee\x01\xcc\x12\"!\xe8\x01\x90\x12:9D\xa8\x05T\xc8\x06~\xec\t\xd2\x01\xb4\x10\x0e\x8c\x01X\xf0\x06f\xfc\a\xba\x01\xc4\x0en\xcc\bx\xb0\t\xc0\x01\x80\x0f\xd4\x01\xc8\x10\xe4\x01\xe8\x11\x12\x11\x1c\x98\x02\xce\x01\x8c\x10,\xb8\x03>\xec\x04N\x8c\x06h\x90\b>?\x89\xbe\x01\x01\x03\x01l\x03\x02\x05int64\x05int64\x05E\x00\x00\x00\x00\x00\x00\x00\x02\v\x02\x1c6Pj\x84\x01\x9e\x01\xb8\x01\xd2\x01\xec\x01\xc8\x01\x06\x02\x0e\x10\n\t\n$>Xr\x8c\x01\xa6\x01\xc0\x01\xda\x01\f\t\f&@Zt\x8e\x01\xa8\x01\xc2\x01\xdc\x01\x18\t\x182Lf\x80\x01\x9a\x01\xb4\x01\xce\x01\xe8\x01\x02ns\x81\x02\fpair(string)\x06string\x00\\\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\n\x00\x00\x00\x00\x00\x00\x00\x03k24\x00\x01y\x02k0\x00\x01y\x03k27\x00\x01y\x03k19\x02\x01y\x02k1\x02\x01y\x03k37\x02\x01y\x03k26\x04\x01y\x03k38\x04\x01y\x03k29\x04\x01y\x03k17\x04\x01y\x01v\x01\x02\x05int64\x05int64\x1d_\x00\x00\x00\x00\x00\x00\x00z\xc4\t|\xd8\t\xb8\x01\xb0\x0e\xde\x01\xac\x11\xa0\x01\xc0\fV\xdc\x06\xa4\x01\xe8\f\xa8\x01\x90\rJIP\xa0\x06\xca\x01\xe4\x0f\xcc\x01\xf8\x0f\n\t<\xd8\x04r\xf4\b\x8e\x01\x8c\vF\xbc\x05^\xac\a\x8c\x01\xf8\n\x9a\x01\x84\f\x06<\fx$\xe8\x02\x8a\x01\xe4\n\xb6\x01\x9c\x0e.\xcc\x03b\xd4\a\x98\x01\xf0\v\x02\x01\xd2\xd0Z\n\x02\x01\x02\x02ns\x81\x02\fpair(string)\x06string\x00c\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\v\x00\x00\x00\x00\x00\x00\x00\x03k18\x00\x01y\x02k6\x00\x01y\x03k30\x00\x01y\x03k21\x00\x01y\x03k36\x00\x01y\x03k34\x02\x01y\x03k31\x02\x01y\x02k4\x02\x01y\x03k16\x02\x01y\x03k32\x04\x01y\x03k35\x04\x01y\x01v\x01\x02\x05int64\x05int64\x16M\x00\x00\x00\x00\x00\x00\x00BA\x86\x01\xbc\n\xb2\x01\xf4\r\xc8\x01\xd0\x0f\xe6\x01\xfc\x11\x16\xdc\x01*)R\xb4\x06\xac\x01\xb8\r\xae\x01\xcc\r\xb0\x01\xe0\r\xc4\x01\xa8\x0f216\x9c\x04d\xe8\a\x96\x01\xdc\v\x9e\x01\xac\f\xd0\x01\xa0\x10\xd6\x01\xdc\x10l\xb8\b\x84\x01\xa8\n\xbc\x01\xd8\x0e:\xac\x84V\x03\x01\x03\x01l\x03\x02\x05int64\x05int64\x02\x1e\x00\x00\x00\x00\x00\x00\x00\b\t\b\"<Vp\x8a\x01\xa4\x01\xbe\x01\xd8\x01\x14\t\x14.Hb|\x96\x01\xb0\x01\xca\x01\xe4\x01\x02ns\x81\x02\fpair(string)\x06string\x00a\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\v\x00\x00\x00\x00\x00\x00\x00\x02k3\x00\x01y\x02k9\x00\x01y\x03k39\x00\x01y\x03k12\x00\x01y\x03k15\x00\x01y\x03k13\x02\x01y\x03k25\x02\x01y\x03k28\x02\x01y\x02k7\x02\x01y\x02k5\x04\x01y\x03k11\x04\x01y\x01v\x01\x02\x05int64\x05int64\x1ce\x00\x00\x00\x00\x00\x00\x00\x04(\x82\x01\x94\n\xc2\x01\x94\x0f\xa2\x01\xd4\f\xe0\x01\xc0\x11\x14\xc8\x01\x1e\xac\x02Z\x84\a\x88\x01\xd0\n&\xfc\x02\xc6\x01\xbc\x0f\xd8\x01\xf0\x10\xda\x01\x84\x11p\xe0\b\x9c\x01\x98\f\x80\x01\x80\n\xaa\x01\xa4\r\x92\x01\xb4\v\x94\x01\xc8\v\xa6\x01\xfc\fL\xf8\x05\\\x98\aj\xa4\bt\x88\t\xec\x01\xb8\x12\xbe\x01\xec\x0e\xea\x01\xa4\x12\x90\x01\xa0\v\xb6\xb8\xd7\xcd\x04\x00\x11\xf4\x01\x01\x85\x02\xdb\x02\x02\xe0\x04\xf2\x01\x03\xd2\x06\xbf\x02\x91\x04\x00\x00\x00\x00\x00\x00:OԌIGKS"),
	[]byte("IGKS\x03\x02op\x04\x00\x04\x03\x01!s\x00\x16\x01\x00\x03\x01l\x03\x02\x05int64\x05int64\x05G\x00\x00\x00\x00\x00\x00\x00\x02\f\x02\x1c6Pj\x84\x01\x9e\x01\xb8\x01\xd2\x01\xec\x01\xc8\x01\xca\x01\x06\x02\x0e\x10\n\t\n$>Xr\x8c\x01\xa6\x01\xc0\x01\xda\x01\f\t\f&@Zt\x8e\x01\xa8\x01\xc2\x01\xdc\x01\x18\t\x182Lf\x80\x01\x9a\x01\xb4\x01\xce\x01\xe8\x01\x02ns\x01\x02\fpair(string)\x06string%\x04\x01\x00\x00\x00\x00\x00\x00\x03k24\x00\x01y\x02k0\x00\x01y\x03k45\x00\x01x\x03k99\x00\x01x\x03k42\x00\x01x\x03k66\x00\x01x\x03k51\x00\x01x\x03k48\x00\x01x\x03k90\x00\x01x\x03k27\x00\x01y\x03k69\x00\x01x\x03k75\x00\x01x\x03k19\x02\x01y\x03k94\x02\x01x\x02k1\x02\x01z\x03k91\x02\x01x\x03k79\x02\x01x\x03k49\x02\x01x\x03k37\x02\x01y\x03k76\x02\x01x\x04k106\x02\x01x\x04k104\x04\x01x\x03k56\x04\x01x\x03k59\x04\x01x\x03k26\x04\x01y\x03k83\x04\x01x\x03k98\x04\x01x\x03k38\x04\x01y\x03k80\x04\x01x\x03k29\x04\x01y\x03k77\x04\x01x\x04k107\x04\x01x\x03k41\x04\x01x\x03k68\x04\x01x\x03k17\x04\x01y\x03k95\x04\x01x\x03k62\x04\x01x\x01v\x01\x02\x05int64\x05int64\x1eb\x00\x00\x00\x00\x00\x00\x00\x02\x01z\xc4\t|\xd8\t\xb8\x01\xb0\x0e\xde\x01\xac\x11\xd0\x0f\x02\xa0\x01\xc0\fV\xdc\x06\xa4\x01\xe8\f\xa8\x01\x90\rJIP\xa0\x06\xca\x01\xe4\x0f\xcc\x01\xf8\x0f\n\t<\xd8\x04r\xf4\b\x8e\x01\x8c\vF\xbc\x05^\xac\a\x8c\x01\xf8\n\x9a\x01\x84\f\x06<\fx$\xe8\x02\x8a\x01\xe4\n\xb6\x01\x9c\x0e.\xcc\x03b\xd4\a\x98\x01\xf0\v\xe7\xd5\xe76\x02\x00\x03\x01l\x03\x02\x05int64\x05int64\x02\x1e\x00\x00\x00\x00\x00\x00\x00\x10\t\x10*D^x\x92\x01\xac\x01\xc6\x01\xe0\x01\x16\t\x160Jd~\x98\x01\xb2\x01\xcc\x01\xe6\x01\x02ns\x01\x02\fpair(string)\x06string \xe6\x00\x00\x00\x00\x00\x00\x00\x04k114\x00\x01x\x03k18\x00\x01y\x03k96\x00\x01x\x02k6\x00\x01y\x03k30\x00\x01y\x04k117\x00\x01x\x03k21\x00\x01y\x04k111\x00\x01x\x03k36\x00\x01y\x03k34\x02\x01y\x03k64\x02\x01x\x03k85\x02\x01x\x03k97\x02\x01x\x03k82\x02\x01x\x03k31\x02\x01y\x03k58\x02\x01x\x04k109\x02\x01x\x04k100\x02\x01x\x03k40\x02\x01x\x03k88\x02\x01x\x02k4\x02\x01z\x03k52\x02\x01x\x03k61\x02\x01x\x03k55\x02\x01x\x04k112\x02\x01x\x03k16\x02\x01y\x03k74\x04\x01x\x03k32\x04\x01y\x04k101\x04\x01x\x04k116\x04\x01x\x03k86\x04\x01x\x03k35\x04\x01y\x01v\x01\x02\x05int64\x05int64\x16M\x00\x00\x00\x00\x00\x00\x00*)R\xb4\x06\xac\x01\xb8\r\xae\x01\xcc\r\xb0\x01\xe0\r\xc4\x01\xa8\x0f216\x9c\x04d\xe8\a\x96\x01\xdc\v\x9e\x01\xac\f\xd0\x01\xa0\x10\xd6\x01\xdc\x10l\xb8\b\x84\x01\xa8\n\xbc\x01\xd8\x0eBA\x86\x01\xbc\n\xb2\x01\xf4\r\xc8\x01\xd0\x0f\xe6\x01\xfc\x11\x16\xdc\x01\xfd\x8d\x89\x87\x02\x01\x11\x88\x04\x02\x99\x04\xac\x03\xc5\x03\x00\x00\x00\x00\x00\x00\xae\x95\xe0zIGKS"),
}
var klrOldValues = map[int64]int64{1: -1, 2: 20, 3: 30, 5: -5, 6: 60, 7: 70, 9: -9, 10: 100, 11: 110, 13: -13, 14: 140, 15: 150, 17: -17, 18: 180, 19: 190, 21: -21, 22: 220, 23: 230, 25: -25, 26: 260, 27: 270, 29: -29, 30: 300, 31: 310, 33: -33, 34: 340, 35: 350, 37: -37, 38: 380, 39: 390, 40: 400, 41: 410, 42: 420, 43: 430, 44: 440, 45: 450, 46: 460, 47: 470, 48: 480, 49: 490, 50: 500, 51: 510, 52: 520, 53: 530, 54: 540, 55: 550, 56: 560, 57: 570, 58: 580, 59: 590, 60: 600, 61: 610, 62: 620, 63: 630, 64: 640, 65: 650, 66: 660, 67: 670, 68: 680, 69: 690, 70: 700, 71: 710, 72: 720, 73: 730, 74: 740, 75: 750, 76: 760, 77: 770, 78: 780, 79: 790, 80: 800, 81: 810, 82: 820, 83: 830, 84: 840, 85: 850, 86: 860, 87: 870, 88: 880, 89: 890, 90: 900, 91: 910, 92: 920, 93: 930, 94: 940, 95: 950, 96: 960, 97: 970, 98: 980, 99: 990, 100: 1000, 101: 1010, 102: 1020, 103: 1030, 104: 1040, 105: 1050, 106: 1060, 107: 1070, 108: 1080, 109: 1090, 110: 1100, 111: 1110, 112: 1120, 113: 1130, 114: 1140, 115: 1150, 116: 1160, 117: 1170, 118: 1180, 119: 1190, 1000: 1}
var klrOldLists = map[int64][]int64{0: []int64{0, 13, 26, 39, 52, 65, 78, 91, 104, 117}, 1: []int64{1, 14, 27, 40, 53, 66, 79, 92, 105, 118, 100, 101}, 3: []int64{7, 8}, 4: []int64{4, 17, 30, 43, 56, 69, 82, 95, 108}, 5: []int64{5, 18, 31, 44, 57, 70, 83, 96, 109}, 6: []int64{6, 19, 32, 45, 58, 71, 84, 97, 110}, 7: []int64{7, 20, 33, 46, 59, 72, 85, 98, 111}, 8: []int64{8, 21, 34, 47, 60, 73, 86, 99, 112}, 9: []int64{9, 22, 35, 48, 61, 74, 87, 100, 113}, 10: []int64{10, 23, 36, 49, 62, 75, 88, 101, 114}, 11: []int64{11, 24, 37, 50, 63, 76, 89, 102, 115}, 12: []int64{12, 25, 38, 51, 64, 77, 90, 103, 116}}

func TestDeltasOldFormatCheckpointRestores(t *testing.T) {
	b := NewBackend("op", 4, KeyGroupRange{Start: 0, End: 4})
	if err := b.Restore(klrOldChain...); err != nil {
		t.Fatal(err)
	}
	v := must(NewValueState(b, "v", Int64Codec{}, Int64Codec{}))
	l := must(NewListState(b, "l", Int64Codec{}, Int64Codec{}))
	nsState(t, b)
	got := map[int64]int64{}
	v.All(func(k, x int64) bool { got[k] = x; return true })
	if d := klrMapDiff(got, klrOldValues); d != "" || len(got) != len(klrOldValues) {
		t.Fatalf("values: %s (%d, want %d)", d, len(got), len(klrOldValues))
	}
	gotL := map[int64][]int64{}
	l.All(func(k int64, x []int64) bool { gotL[k] = slices.Clone(x); return true })
	if !maps.EqualFunc(gotL, klrOldLists, slices.Equal) {
		t.Fatalf("lists: %v, want %v", gotL, klrOldLists)
	}
	// And this build checkpoints on top of the restored chain.
	v.Update(1, 5)
	l.Add(1, 5)
	files := map[int64][]byte{1: klrOldChain[0], 2: klrOldChain[1], 3: klrOldChain[2]}
	klrChain(t, b, 4, files)
	v.Update(2, 6)
	l.Add(2, 6)
	chain := klrChain(t, b, 5, files)
	klrOldValues[1], klrOldValues[2] = 5, 6
	klrOldLists[1] = append(klrOldLists[1], 5)
	klrOldLists[2] = append(klrOldLists[2], 6)
	r := NewBackend("op", 4, KeyGroupRange{Start: 0, End: 4})
	if err := r.Restore(chain...); err != nil {
		t.Fatal(err)
	}
	v = must(NewValueState(r, "v", Int64Codec{}, Int64Codec{}))
	l = must(NewListState(r, "l", Int64Codec{}, Int64Codec{}))
	nsState(t, r)
	clear(got)
	v.All(func(k, x int64) bool { got[k] = x; return true })
	if d := klrMapDiff(got, klrOldValues); d != "" {
		t.Fatalf("after two more checkpoints: values: %s", d)
	}
	clear(gotL)
	l.All(func(k int64, x []int64) bool { gotL[k] = slices.Clone(x); return true })
	if !maps.EqualFunc(gotL, klrOldLists, slices.Equal) {
		t.Fatalf("after two more checkpoints: lists: %v, want %v", gotL, klrOldLists)
	}
}

// What checkpoints of a ValueState write when a share of its keys is
// updated, spread over every key group, between checkpoints: as for the
// namespaced state (TestCheckpointBytesFollowUpdates), no checkpoint after
// the first should write much more than the mean. Each key group's log
// restarts after 2×its size writes, after the same number of checkpoints
// in every key group when updates are uniform, and every key group is then
// written in full at one checkpoint: the whole state at once.
func TestDeltasValueStateCheckpointBytesHaveNoSpikes(t *testing.T) {
	const keys, maxP, checkpoints = 1 << 17, 128, 60
	for _, pct := range []int{5, 10} {
		be := NewBackend("op", maxP, KeyGroupRange{Start: 0, End: maxP})
		s := must(NewValueState(be, "v", Int64Codec{}, Int64Codec{}))
		for k := range int64(keys) {
			s.Update(k, 0)
		}
		files := map[int64][]byte{}
		var full, written, most int
		var mostID int64
		next := int64(0)
		var sizes []int
		for id := int64(1); id <= checkpoints; id++ {
			if id > 1 {
				for range keys * pct / 100 {
					k := (next * 7919) % keys // spread, every key once per round
					s.Update(k, id)
					next++
				}
			}
			snap := be.CheckpointSnapshot(id, false)
			enc, err := snap.EncodeCheckpoint()
			snap.Release()
			if err != nil {
				t.Fatal(err)
			}
			be.Complete(id)
			files[id] = enc.Data
			sizes = append(sizes, len(enc.Data))
			if id == 1 {
				full = len(enc.Data)
				continue
			}
			written += len(enc.Data)
			if len(enc.Data) > most {
				most, mostID = len(enc.Data), id
			}
		}
		mean := float64(written) / (checkpoints - 1)
		t.Logf("%d%%: full %d, mean %.0f, largest %d (checkpoint %d); sizes %v", pct, full, mean, most, mostID, sizes)
		if float64(most) > 1.5*mean {
			t.Errorf("%d%%: checkpoint %d wrote %d bytes, %.1f times the mean %.0f (the full state is %d)", pct, mostID, most, float64(most)/mean, mean, full)
		}
	}
}

// A float key that is NaN: each Update(NaN) adds an entry (NaN != NaN), as
// a map does; a full snapshot writes every one and restores them all. A
// delta writes a key logged since the base as deleted when the frozen table
// does not find it, which for NaN is always: the NaN entries written since
// the base are lost at the restore (it deletes NaN, which removes nothing,
// and sets nothing). Before this commit the key group was written in full
// and restored every entry.
func TestDeltasNaNKeyWrittenSinceBaseIsRestored(t *testing.T) {
	const maxP = 4
	b := NewBackend("op", maxP, KeyGroupRange{Start: 0, End: maxP})
	v := must(NewValueState(b, "v", Float64Codec{}, Int64Codec{}))
	nan := math.NaN()
	for i := range 50 {
		v.Update(float64(i), int64(i))
	}
	v.Update(nan, 1)
	files := map[int64][]byte{}
	klrChain(t, b, 1, files)
	v.Update(nan, 2)
	v.Update(3, 33)
	chain := klrChain(t, b, 2, files)
	if countDeltas(t, chain[len(chain)-1]) == 0 {
		t.Fatal("checkpoint 2 wrote no delta")
	}
	count := func(s *ValueState[float64, int64]) (nans []int64, n int) {
		s.All(func(k float64, x int64) bool {
			n++
			if math.IsNaN(k) {
				nans = append(nans, x)
			}
			return true
		})
		slices.Sort(nans)
		return nans, n
	}
	wantNaNs, wantN := count(v)
	r := NewBackend("op", maxP, KeyGroupRange{Start: 0, End: maxP})
	if err := r.Restore(chain...); err != nil {
		t.Fatal(err)
	}
	rv := must(NewValueState(r, "v", Float64Codec{}, Int64Codec{}))
	gotNaNs, gotN := count(rv)
	if gotN != wantN || !slices.Equal(gotNaNs, wantNaNs) {
		t.Fatalf("restored %d entries with NaN values %v, the state at the checkpoint held %d with %v", gotN, gotNaNs, wantN, wantNaNs)
	}
}

// A key group whose only written state's log restarted is written in full,
// but inside a delta section (the plan chose writeDelta; hasDelta is asked
// only at encode): the chain counts that full payload as a delta over the
// base's sections, keeps the base's file referenced, and the next
// checkpoint finds every such chain due (its "deltas" hold as much as its
// full section) and writes it in full again. So one restart costs two full
// writes of the key group, and the restore of the checkpoint between reads
// the old file for nothing. The restarted key groups should be written as
// full sections (writeFull), ending their chains.
func TestDeltasRestartedKeyGroupEndsItsChain(t *testing.T) {
	const maxP = 4
	b := NewBackend("op", maxP, KeyGroupRange{Start: 0, End: maxP})
	v := must(NewValueState(b, "v", Int64Codec{}, Int64Codec{}))
	for k := range int64(2000) {
		v.Update(k, k)
	}
	files := map[int64][]byte{}
	klrChain(t, b, 1, files)
	full := len(files[1])
	// Every key group's log restarts: more than twice its keys written.
	for round := range int64(3) {
		for k := range int64(2000) {
			v.Update(k, k+round)
		}
	}
	for i := range v.tables {
		if v.tables[i].log.off == 0 {
			t.Fatalf("key group %d: the log did not restart", i)
		}
	}
	s := b.CheckpointSnapshot(2, false)
	enc2, err := s.EncodeCheckpoint()
	if err != nil {
		t.Fatal(err)
	}
	b.Complete(2)
	files[2] = enc2.Data
	// A few keys change: checkpoint 3 should write a few keys' deltas.
	for k := range int64(5) {
		v.Update(k*97, -k)
	}
	s = b.CheckpointSnapshot(3, false)
	enc3, err := s.EncodeCheckpoint()
	if err != nil {
		t.Fatal(err)
	}
	b.Complete(3)
	t.Logf("full %d bytes; checkpoint 2: %d bytes, shared %v; checkpoint 3: %d bytes, shared %v", full, len(enc2.Data), enc2.Shared, len(enc3.Data), enc3.Shared)
	if slices.Contains(enc2.Shared, 1) {
		t.Errorf("checkpoint 2 rewrote every key group in full but still references checkpoint 1's file (%v)", enc2.Shared)
	}
	if len(enc3.Data)*4 > full {
		t.Errorf("checkpoint 3 changed 5 keys and wrote %d bytes, the full state is %d: the key groups were written in full twice", len(enc3.Data), full)
	}
}
