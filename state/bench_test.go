package state

import (
	"context"
	"encoding/binary"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/storage"
)

// agg is a small struct value, as a keyed aggregation would keep.
type agg struct {
	Sum   int64
	Count int64
}

// aggCodec is an explicit codec for agg: two varints.
type aggCodec struct{}

func (aggCodec) Name() string { return "agg/v1" }
func (aggCodec) Append(dst []byte, v agg) []byte {
	return binary.AppendVarint(binary.AppendVarint(dst, v.Sum), v.Count)
}
func (aggCodec) Decode(src []byte) (agg, int, error) {
	s, n1, err := Int64Codec{}.Decode(src)
	if err != nil {
		return agg{}, 0, err
	}
	c, n2, err := Int64Codec{}.Decode(src[n1:])
	return agg{s, c}, n1 + n2, err
}

func aggState(tb testing.TB, keys int) (*Backend, *ValueState[int64, agg]) {
	b := fullBackend("bench")
	s, err := NewValueState(b, "agg", Int64Codec{}, aggCodec{})
	if err != nil {
		tb.Fatal(err)
	}
	for k := range int64(keys) {
		s.Update(k, agg{k, 1})
	}
	return b, s
}

// Get and Update on existing keys do not allocate.
func TestValueHotPathDoesNotAllocate(t *testing.T) {
	_, s := aggState(t, 10_000)
	k := int64(0)
	if a := testing.AllocsPerRun(10_000, func() {
		v, _ := s.Get(k % 10_000)
		v.Sum++
		s.Update(k%10_000, v)
		k++
	}); a != 0 {
		t.Fatalf("Get+Update allocates %.2f times per call", a)
	}
}

// Get, Update and read-modify-write on an int64 key with a small struct
// value, over 1 000 keys (tables in cache: the state's own overhead) and
// 100 000 keys (dominated by map cache misses).
func BenchmarkValue(b *testing.B) {
	for _, keys := range []int64{1_000, 100_000} {
		_, s := aggState(b, int(keys))
		b.Run(fmt.Sprintf("Get/keys=%d", keys), func(b *testing.B) {
			b.ReportAllocs()
			var sink int64
			k := int64(0)
			for b.Loop() {
				v, _ := s.Get(k)
				sink += v.Sum
				if k++; k == keys {
					k = 0
				}
			}
			_ = sink
		})
		b.Run(fmt.Sprintf("Update/keys=%d", keys), func(b *testing.B) {
			b.ReportAllocs()
			k := int64(0)
			for b.Loop() {
				s.Update(k, agg{k, 2})
				if k++; k == keys {
					k = 0
				}
			}
		})
		b.Run(fmt.Sprintf("GetUpdate/keys=%d", keys), func(b *testing.B) {
			b.ReportAllocs()
			k := int64(0)
			for b.Loop() {
				v, _ := s.Get(k)
				v.Sum += k
				v.Count++
				s.Update(k, v)
				if k++; k == keys {
					k = 0
				}
			}
		})
	}
}

// Updates over 1M keys with a checkpoint every N updates: includes the
// copy-on-write cost (the first write to each key group after a snapshot
// copies that key group's table, so each checkpoint copies up to the whole
// state once, spread over the following writes).
func BenchmarkValueUpdateWithSnapshots(b *testing.B) {
	for _, every := range []int{100_000, 1_000_000, 10_000_000} {
		b.Run(fmt.Sprintf("every=%d", every), func(b *testing.B) {
			const keys = 1_000_000
			bk, s := aggState(b, keys)
			b.ReportAllocs()
			k := int64(0)
			i := 0
			for b.Loop() {
				s.Update(k, agg{k, 2})
				if k++; k == keys {
					k = 0
				}
				if i++; i%every == 0 {
					bk.Snapshot()
				}
			}
		})
	}
}

func BenchmarkHashKey(b *testing.B) {
	b.Run("int64", func(b *testing.B) {
		var sink uint64
		for i := int64(0); b.Loop(); i++ {
			sink += HashKey(i)
		}
		_ = sink
	})
	b.Run("string16", func(b *testing.B) {
		var sink uint64
		s := "user-0000000042x"
		for b.Loop() {
			sink += HashKey(s)
		}
		_ = sink
	})
}

// Snapshot() on 1M entries in 4 states: O(key groups × states), so it costs
// the same as on an empty backend.
func BenchmarkSnapshot(b *testing.B) {
	for _, n := range []int{0, 1_000_000} {
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
			bk := fullBackend("bench")
			v, _ := NewValueState(bk, "v", Int64Codec{}, aggCodec{})
			m, _ := NewMapState(bk, "m", Int64Codec{}, Int64Codec{}, Int64Codec{})
			l, _ := NewListState(bk, "l", Int64Codec{}, Int64Codec{})
			tm, _ := NewTimers(bk, "t", Int64Codec{})
			for k := range int64(n / 4) {
				v.Update(k, agg{k, 1})
				m.Put(k, 1, k)
				l.Add(k, k)
				tm.Register(k, 0, k)
			}
			b.ReportAllocs()
			for b.Loop() {
				bk.Snapshot()
			}
		})
	}
}

// Encode throughput: the asynchronous part, 1M value entries.
func BenchmarkEncode1M(b *testing.B) {
	bk, _ := aggState(b, 1_000_000)
	snap := bk.Snapshot()
	data, _ := snap.Encode()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := snap.Encode(); err != nil {
			b.Fatal(err)
		}
	}
}

// Restore + registration (decode) of 1M value entries.
func BenchmarkRestore1M(b *testing.B) {
	bk, _ := aggState(b, 1_000_000)
	data, _ := bk.Snapshot().Encode()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		r := fullBackend("bench")
		if err := r.Restore(data); err != nil {
			b.Fatal(err)
		}
		if _, err := NewValueState(r, "agg", Int64Codec{}, aggCodec{}); err != nil {
			b.Fatal(err)
		}
	}
}

// fixed16Codec encodes an agg in a fixed 16 bytes (two little-endian
// int64s): BenchmarkRestore's 16-byte values.
type fixed16Codec struct{}

func (fixed16Codec) Name() string { return "agg/fixed16" }
func (fixed16Codec) Append(dst []byte, v agg) []byte {
	return binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(dst, uint64(v.Sum)), uint64(v.Count))
}
func (fixed16Codec) Decode(src []byte) (agg, int, error) {
	if len(src) < 16 {
		return agg{}, 0, truncated("agg/fixed16", 16, len(src))
	}
	return agg{int64(binary.LittleEndian.Uint64(src)), int64(binary.LittleEndian.Uint64(src[8:]))}, 16, nil
}

// Restore + registration of a ValueState of 1M int64 keys with 16-byte
// values over 128 key groups: decoding on one goroutine (workers=1) and on
// GOMAXPROCS (the default). Restore's checksums are verified sequentially
// in both.
func BenchmarkRestore(b *testing.B) {
	bk := fullBackend("bench")
	s := must(NewValueState(bk, "agg", Int64Codec{}, fixed16Codec{}))
	for k := range int64(1_000_000) {
		s.Update(k, agg{k, k ^ 0x5555})
	}
	data, err := bk.Snapshot().Encode()
	if err != nil {
		b.Fatal(err)
	}
	for _, workers := range []int{1, runtime.GOMAXPROCS(0)} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			setRestoreWorkers(b, workers)
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				r := fullBackend("bench")
				if err := r.Restore(data); err != nil {
					b.Fatal(err)
				}
				if _, err := NewValueState(r, "agg", Int64Codec{}, fixed16Codec{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkTimersRegisterAdvance(b *testing.B) {
	tm, _ := NewTimers(fullBackend("bench"), "t", Int64Codec{})
	for k := range int64(100_000) {
		tm.Register(k, 0, k)
	}
	b.ReportAllocs()
	ts := int64(100_000)
	fire := func(int64, int64, int64) error { return nil }
	for b.Loop() {
		tm.Register(ts, 0, ts)
		_ = tm.Advance(ts-100_000, fire)
		ts++
	}
}

func BenchmarkMapPut(b *testing.B) {
	bk := fullBackend("bench")
	m, _ := NewMapState(bk, "m", Int64Codec{}, Int64Codec{}, Int64Codec{})
	b.ReportAllocs()
	i := int64(0)
	for b.Loop() {
		m.Put(i%10_000, i%16, i)
		i++
	}
}

// BenchmarkIncrementalCheckpoint measures what one checkpoint writes with 1 M
// keys of count+sum in a window's namespaced state (128 key groups) when a
// share of the keys was updated since the last complete checkpoint: 10% or
// 1% spread over every key group ("uniform", "uniform-1pct"), or 10%
// within a tenth of the key groups ("hot"). bytes/ckpt is the file written,
// full-bytes what a full snapshot holds, updated-bytes what the updated
// entries alone take in a full snapshot (the floor of what a checkpoint
// must write), and restore-bytes the files a restore of a checkpoint reads
// (its own and the earlier ones it references), on average.
func BenchmarkIncrementalCheckpoint(b *testing.B) {
	const keys, maxP = 1 << 20, 128
	for _, mode := range []struct {
		name string
		per  int // keys updated per checkpoint
		hot  bool
	}{{"uniform", keys / 10, false}, {"uniform-1pct", keys / 100, false}, {"hot", keys / 10, true}} {
		b.Run(mode.name, func(b *testing.B) {
			be := NewBackend("op", maxP, KeyGroupRange{Start: 0, End: maxP})
			s, err := NewNamespacedValueState(be, "w", "int64+ns", Int64Codec{}, aggCodec{})
			if err != nil {
				b.Fatal(err)
			}
			add := func(k int64) {
				s.Apply(0, k, nil, func(v agg, _ bool) agg { return agg{v.Sum + k, v.Count + 1} })
			}
			var hot []int64 // keys in the first tenth of the key groups
			for k := range int64(keys) {
				add(k)
				if KeyGroupFor(HashKey(k), maxP) < maxP/10 {
					hot = append(hot, k)
				}
			}
			id := int64(1)
			sizes := map[int64]int64{}
			checkpoint := func() *Encoded {
				snap := be.CheckpointSnapshot(id, false)
				enc, err := snap.EncodeCheckpoint()
				snap.Release()
				if err != nil {
					b.Fatal(err)
				}
				be.Complete(id)
				sizes[id] = int64(len(enc.Data))
				id++
				return enc
			}
			full := checkpoint()
			var written, reused, most, restore int64
			b.ResetTimer()
			for i := range b.N {
				for j := range mode.per {
					if mode.hot {
						add(hot[(i*mode.per+j)%len(hot)])
					} else {
						add(int64((i*mode.per + j) % keys))
					}
				}
				enc := checkpoint()
				written += int64(len(enc.Data))
				reused += enc.Reused
				most = max(most, int64(len(enc.Data)))
				restore += int64(len(enc.Data))
				for _, sh := range enc.Shared {
					restore += sizes[sh]
				}
			}
			b.ReportMetric(float64(written)/float64(b.N), "bytes/ckpt")
			b.ReportMetric(float64(most), "max-bytes/ckpt")
			b.ReportMetric(float64(len(full.Data)), "full-bytes")
			b.ReportMetric(float64(len(full.Data))*float64(mode.per)/keys, "updated-bytes")
			b.ReportMetric(float64(reused)/float64(b.N), "reused-bytes/ckpt")
			b.ReportMetric(float64(restore)/float64(b.N), "restore-bytes")
		})
	}
}

// BenchmarkLSMIncrementalCheckpoint is BenchmarkIncrementalCheckpoint on the
// pebble backend: 1 M int64 keys with a (sum, count) accumulator, 10% of
// them updated between checkpoints (uniform: spread over every key group;
// hot: within a tenth of the key groups), each checkpoint synchronous part,
// upload to a local checkpoint directory, and completion. It reports the
// bytes each checkpoint stored, the largest, the state's full size (what
// the checkpoint references), and the synchronous part's time.
func BenchmarkLSMIncrementalCheckpoint(b *testing.B) {
	const keys, maxP = 1 << 20, 128
	for _, mode := range []string{"uniform", "hot"} {
		b.Run(mode, func(b *testing.B) {
			env, err := NewLSMEnv(LSMOptions{Dir: b.TempDir(), CacheBytes: 256 << 20}, "bench")
			if err != nil {
				b.Fatal(err)
			}
			defer env.Close()
			files, err := storage.NewLocal(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			be := NewLSMBackend(context.Background(), env, "op", maxP, KeyGroupRange{Start: 0, End: maxP})
			defer be.Close()
			s, err := NewNamespacedValueState(be, "w", "int64+ns", Int64Codec{}, aggCodec{})
			if err != nil {
				b.Fatal(err)
			}
			add := func(k int64) {
				s.Apply(0, k, nil, func(v agg, _ bool) agg { return agg{v.Sum + k, v.Count + 1} })
			}
			var hot []int64
			for k := range int64(keys) {
				add(k)
				if KeyGroupFor(HashKey(k), maxP) < maxP/10 {
					hot = append(hot, k)
				}
			}
			id := int64(1)
			var syncTime time.Duration
			checkpoint := func() *Uploaded {
				start := time.Now()
				snap := be.CheckpointSnapshot(id, false)
				syncTime += time.Since(start)
				up, err := snap.Upload(context.Background(), files, "s")
				if err != nil {
					b.Fatal(err)
				}
				be.Complete(id)
				id++
				return up
			}
			checkpoint()
			syncTime = 0
			var written, most, full int64
			b.ResetTimer()
			for i := range b.N {
				for j := range keys / 10 {
					if mode == "hot" {
						add(hot[(i*keys/10+j)%len(hot)])
					} else {
						add(int64((i*keys/10 + j) % keys))
					}
				}
				up := checkpoint()
				written += up.Written + int64(len(up.Manifest))
				most = max(most, up.Written+int64(len(up.Manifest)))
				full = up.Written + up.Reused
			}
			if err := be.Err(); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(written)/float64(b.N), "bytes/ckpt")
			b.ReportMetric(float64(most), "max-bytes/ckpt")
			b.ReportMetric(float64(full), "full-bytes")
			b.ReportMetric(float64(syncTime.Milliseconds())/float64(b.N), "sync-ms/ckpt")
		})
	}
}

// BenchmarkLSMRestore restores an LSM backend of 1 M keys (a value of 100
// bytes each) from its checkpoint: from the local copy a previous run on the
// same machine kept, and from checkpoint storage (a local directory).
func BenchmarkLSMRestore(b *testing.B) {
	const keys, maxP = 1 << 20, 128
	dir := b.TempDir()
	files, err := storage.NewLocal(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	env, err := NewLSMEnv(LSMOptions{Dir: dir, CacheBytes: 64 << 20}, "bench")
	if err != nil {
		b.Fatal(err)
	}
	defer env.Close()
	be := NewLSMBackend(context.Background(), env, "op", maxP, KeyGroupRange{Start: 0, End: maxP})
	v, err := NewValueState(be, "v", Int64Codec{}, BytesCodec{})
	if err != nil {
		b.Fatal(err)
	}
	val := make([]byte, 100)
	for k := range int64(keys) {
		binary.LittleEndian.PutUint64(val, uint64(k))
		v.Update(k, val)
	}
	up, err := be.CheckpointSnapshot(1, false).Upload(context.Background(), files, "s")
	if err != nil {
		b.Fatal(err)
	}
	be.Complete(1)
	if err := be.Close(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(up.Written), "state-bytes")
	for _, from := range []string{"local", "storage"} {
		b.Run(from, func(b *testing.B) {
			for range b.N {
				e := env
				if from == "storage" {
					// Another machine: nothing local.
					if e, err = NewLSMEnv(LSMOptions{Dir: b.TempDir(), CacheBytes: 64 << 20}, "bench"); err != nil {
						b.Fatal(err)
					}
				}
				rb := NewLSMBackend(context.Background(), e, "op", maxP, KeyGroupRange{Start: 0, End: maxP})
				if err := rb.RestoreLSM(context.Background(), files, up.Manifest); err != nil {
					b.Fatal(err)
				}
				rv, err := NewValueState(rb, "v", Int64Codec{}, BytesCodec{})
				if err != nil {
					b.Fatal(err)
				}
				if _, ok := rv.Get(keys - 1); !ok {
					b.Fatal("restored state lacks a key")
				}
				// Restored and readable; what the store then does in the
				// background (compactions Close waits for) is not counted.
				b.StopTimer()
				if err := rb.Close(); err != nil {
					b.Fatal(err)
				}
				if e != env {
					e.Close()
				}
				b.StartTimer()
			}
		})
	}
}

// Restore + registration of a window's NamespacedValueState: 1M int64 keys
// in one namespace (a window) with a (sum, count) accumulator over 128 key
// groups, on GOMAXPROCS decoding goroutines. This is what a window operator
// waits for after a restart before its first record.
func BenchmarkRestoreNamespaced(b *testing.B) {
	const keys, maxP = 1_000_000, 128
	bk := NewBackend("op", maxP, KeyGroupRange{Start: 0, End: maxP})
	s := must(NewNamespacedValueState(bk, "w", "int64+ns", Int64Codec{}, aggCodec{}))
	for k := range int64(keys) {
		s.Apply(3_600_000, k, nil, func(v agg, _ bool) agg { return agg{v.Sum + k, v.Count + 1} })
	}
	data, err := bk.Snapshot().Encode()
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		r := NewBackend("op", maxP, KeyGroupRange{Start: 0, End: maxP})
		if err := r.Restore(data); err != nil {
			b.Fatal(err)
		}
		if _, err := NewNamespacedValueState(r, "w", "int64+ns", Int64Codec{}, aggCodec{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/keys, "ns/key")
}
