package kvtable

import (
	"encoding/binary"
	"fmt"
	"maps"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The benchmarks use the engine's shape: int64 keys hashed once (splitmix64,
// as state.HashKey does), routed to one of 128 key groups (fmix64 of the
// hash mod 128, as state.KeyGroupFor does), one Table per key group, 8-byte
// encoded keys and 16-byte values (a count and a sum). The baseline is what
// state.ValueState does today: one map[int64][2]int64 per key group, behind
// the same hash and routing. Keys are visited in a pseudo-random order.
//
// Commands and figures: README.md.

const groups = 128

func group(h uint64) int { return int(fmix64(h) % groups) }

// nth returns the i-th key visited, pseudo-randomly in [0, n).
func nth(i, n int) int64 { return int64(splitmix(uint64(i)) % uint64(n)) }

func fillTables(tb testing.TB, n int) []Table {
	tabs := make([]Table, groups)
	var kb [8]byte
	var vb [16]byte
	for k := range int64(n) {
		h := hash8(k)
		binary.LittleEndian.PutUint64(vb[:], 1)
		binary.LittleEndian.PutUint64(vb[8:], uint64(k))
		if err := tabs[group(h)].Put(h, key8(kb[:], k), vb[:]); err != nil {
			tb.Fatal(err)
		}
	}
	return tabs
}

func fillMaps(n int) []map[int64][2]int64 {
	ms := make([]map[int64][2]int64, groups)
	for i := range ms {
		ms[i] = map[int64][2]int64{}
	}
	for k := range int64(n) {
		ms[group(hash8(k))][k] = [2]int64{1, k}
	}
	return ms
}

// acc is a heap-allocated aggregate, as the window operators kept before
// kvtable (ValueState[windowKey[K], *slot[A]]): the "ptrmap" baseline. Its
// epoch is never read: it gives acc the size of that slot.
type acc struct {
	v [2]int64
	//lint:ignore U1000 it sizes the struct like the baseline it stands for
	epoch uint64
}

func fillPtrMaps(n int) []map[int64]*acc {
	ms := make([]map[int64]*acc, groups)
	for i := range ms {
		ms[i] = map[int64]*acc{}
	}
	for k := range int64(n) {
		ms[group(hash8(k))][k] = &acc{v: [2]int64{1, k}}
	}
	return ms
}

var sizes = []int{10_000, 1_000_000}

// BenchmarkGet: a lookup of a present key.
func BenchmarkGet(b *testing.B) {
	for _, n := range sizes {
		b.Run(fmt.Sprintf("table/n=%d", n), func(b *testing.B) {
			tabs := fillTables(b, n)
			var kb [8]byte
			var sink byte
			b.ResetTimer()
			for i := range b.N {
				k := nth(i, n)
				h := hash8(k)
				v, _ := tabs[group(h)].Get(h, key8(kb[:], k))
				sink += v[0]
			}
			_ = sink
		})
		b.Run(fmt.Sprintf("map/n=%d", n), func(b *testing.B) {
			ms := fillMaps(n)
			var sink int64
			b.ResetTimer()
			for i := range b.N {
				k := nth(i, n)
				sink += ms[group(hash8(k))][k][0]
			}
			_ = sink
		})
		b.Run(fmt.Sprintf("ptrmap/n=%d", n), func(b *testing.B) {
			ms := fillPtrMaps(n)
			var sink int64
			b.ResetTimer()
			for i := range b.N {
				k := nth(i, n)
				sink += ms[group(hash8(k))][k].v[0]
			}
			_ = sink
		})
	}
}

// BenchmarkPutInPlace: a Put of a present key's new value, same length, no
// Freeze since the fill (the in-place path).
func BenchmarkPutInPlace(b *testing.B) {
	for _, n := range sizes {
		b.Run(fmt.Sprintf("table/n=%d", n), func(b *testing.B) {
			tabs := fillTables(b, n)
			var kb [8]byte
			var vb [16]byte
			b.ResetTimer()
			for i := range b.N {
				k := nth(i, n)
				h := hash8(k)
				binary.LittleEndian.PutUint64(vb[:], uint64(i))
				if err := tabs[group(h)].Put(h, key8(kb[:], k), vb[:]); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("map/n=%d", n), func(b *testing.B) {
			ms := fillMaps(n)
			b.ResetTimer()
			for i := range b.N {
				k := nth(i, n)
				ms[group(hash8(k))][k] = [2]int64{int64(i), k}
			}
		})
	}
}

// BenchmarkAdd: the aggregate's read-modify-write (count++, sum += x) of a
// present key: Modify (one lookup) against a map read and write.
func BenchmarkAdd(b *testing.B) {
	for _, n := range sizes {
		b.Run(fmt.Sprintf("table/n=%d", n), func(b *testing.B) {
			tabs := fillTables(b, n)
			var kb [8]byte
			b.ResetTimer()
			for i := range b.N {
				k := nth(i, n)
				h := hash8(k)
				v, _, err := tabs[group(h)].Modify(h, key8(kb[:], k))
				if err != nil {
					b.Fatal(err)
				}
				binary.LittleEndian.PutUint64(v, binary.LittleEndian.Uint64(v)+1)
				binary.LittleEndian.PutUint64(v[8:], binary.LittleEndian.Uint64(v[8:])+uint64(i))
			}
		})
		b.Run(fmt.Sprintf("map/n=%d", n), func(b *testing.B) {
			ms := fillMaps(n)
			b.ResetTimer()
			for i := range b.N {
				k := nth(i, n)
				m := ms[group(hash8(k))]
				v := m[k]
				v[0]++
				v[1] += int64(i)
				m[k] = v
			}
		})
		b.Run(fmt.Sprintf("ptrmap/n=%d", n), func(b *testing.B) {
			ms := fillPtrMaps(n)
			b.ResetTimer()
			for i := range b.N {
				k := nth(i, n)
				a := ms[group(hash8(k))][k]
				a.v[0]++
				a.v[1] += int64(i)
			}
		})
	}
}

// garbage keeps BenchmarkAddAlloc's allocations from being optimised away.
var garbage []byte

// BenchmarkAddAlloc is BenchmarkAdd at 10 M keys with 128 bytes allocated
// per operation, as processing a record allocates: the garbage collector
// then runs, and its mark phase scans what the state holds. The table's
// arena and slots and the inline map hold no pointers; the pointer map
// holds 10 M. Skipped with -short (the fill takes seconds).
func BenchmarkAddAlloc(b *testing.B) {
	const n = 10_000_000
	b.Run("table", func(b *testing.B) {
		if testing.Short() {
			b.Skip("-short")
		}
		tabs := fillTables(b, n)
		var kb [8]byte
		b.ResetTimer()
		for i := range b.N {
			garbage = make([]byte, 128)
			k := nth(i, n)
			h := hash8(k)
			v, _, err := tabs[group(h)].Modify(h, key8(kb[:], k))
			if err != nil {
				b.Fatal(err)
			}
			binary.LittleEndian.PutUint64(v, binary.LittleEndian.Uint64(v)+1)
			binary.LittleEndian.PutUint64(v[8:], binary.LittleEndian.Uint64(v[8:])+uint64(i))
		}
	})
	b.Run("map", func(b *testing.B) {
		if testing.Short() {
			b.Skip("-short")
		}
		ms := fillMaps(n)
		b.ResetTimer()
		for i := range b.N {
			garbage = make([]byte, 128)
			k := nth(i, n)
			m := ms[group(hash8(k))]
			v := m[k]
			v[0]++
			v[1] += int64(i)
			m[k] = v
		}
	})
	b.Run("ptrmap", func(b *testing.B) {
		if testing.Short() {
			b.Skip("-short")
		}
		ms := fillPtrMaps(n)
		b.ResetTimer()
		for i := range b.N {
			garbage = make([]byte, 128)
			k := nth(i, n)
			a := ms[group(hash8(k))][k]
			a.v[0]++
			a.v[1] += int64(i)
		}
	})
}

// BenchmarkCheckpoint: one checkpoint cycle at n keys. Freeze every key
// group (the synchronous part), rewrite every key once while the views are
// live (each first write after Freeze copies: slots for the table, the
// whole map for the baseline, as ownTable does), release, rewrite every key
// again (the table compacts). ns/op is the whole cycle; freeze-ns the
// synchronous part; peak-B/entry and after-B/entry the table's Bytes while
// frozen and after compaction, counting what the views pin.
func BenchmarkCheckpoint(b *testing.B) {
	for _, n := range sizes {
		b.Run(fmt.Sprintf("table/n=%d", n), func(b *testing.B) {
			tabs := fillTables(b, n)
			var kb [8]byte
			var vb [16]byte
			rewrite := func(round int) {
				for k := range int64(n) {
					h := hash8(k)
					binary.LittleEndian.PutUint64(vb[:], uint64(round))
					if err := tabs[group(h)].Put(h, key8(kb[:], k), vb[:]); err != nil {
						b.Fatal(err)
					}
				}
			}
			views := make([]*Frozen, groups)
			var freezeNs, peak, after int64
			b.ResetTimer()
			for i := range b.N {
				start := nanotime()
				for g := range tabs {
					views[g] = tabs[g].Freeze()
				}
				freezeNs += nanotime() - start
				rewrite(2 * i)
				pinned := 0
				for g := range tabs {
					pinned += 8*len(views[g].slots) + tabs[g].Bytes()
				}
				peak += int64(pinned)
				for _, f := range views {
					f.Release()
				}
				rewrite(2*i + 1)
				for g := range tabs {
					after += int64(tabs[g].Bytes())
				}
			}
			b.ReportMetric(float64(freezeNs)/float64(b.N), "freeze-ns")
			b.ReportMetric(float64(peak)/float64(b.N)/float64(n), "peak-B/entry")
			b.ReportMetric(float64(after)/float64(b.N)/float64(n), "after-B/entry")
		})
		b.Run(fmt.Sprintf("map/n=%d", n), func(b *testing.B) {
			ms := fillMaps(n)
			rewrite := func(round int, owned []bool) {
				for k := range int64(n) {
					g := group(hash8(k))
					if !owned[g] {
						ms[g] = maps.Clone(ms[g])
						owned[g] = true
					}
					ms[g][k] = [2]int64{int64(round), k}
				}
			}
			frozen := make([]map[int64][2]int64, groups)
			owned := make([]bool, groups)
			var freezeNs int64
			b.ResetTimer()
			for i := range b.N {
				start := nanotime()
				copy(frozen, ms)
				clear(owned)
				freezeNs += nanotime() - start
				rewrite(2*i, owned)
				clear(frozen)
				rewrite(2*i+1, owned)
			}
			b.ReportMetric(float64(freezeNs)/float64(b.N), "freeze-ns")
		})
	}
}

// BenchmarkMemory fills 128 key groups with n entries, once per iteration
// (run with -benchtime=1x), and reports the memory they take per entry:
// Bytes/entry (Table.Bytes, the table only), heap/entry (the growth of
// runtime.MemStats.HeapInuse, after a GC, both sides) and rss/entry (the
// growth of the process's resident set, Linux only). n = 10 M is skipped
// with -short.
func BenchmarkMemory(b *testing.B) {
	for _, n := range []int{1_000_000, 10_000_000} {
		b.Run(fmt.Sprintf("table/n=%d", n), func(b *testing.B) {
			if testing.Short() && n > 1_000_000 {
				b.Skip("-short")
			}
			for range b.N {
				before := measure()
				tabs := fillTables(b, n)
				after := measure()
				total := 0
				for g := range tabs {
					total += tabs[g].Bytes()
				}
				b.ReportMetric(float64(total)/float64(n), "Bytes/entry")
				after.report(b, before, n)
				runtime.KeepAlive(tabs)
			}
		})
		b.Run(fmt.Sprintf("map/n=%d", n), func(b *testing.B) {
			if testing.Short() && n > 1_000_000 {
				b.Skip("-short")
			}
			for range b.N {
				before := measure()
				ms := fillMaps(n)
				after := measure()
				after.report(b, before, n)
				runtime.KeepAlive(ms)
			}
		})
		b.Run(fmt.Sprintf("ptrmap/n=%d", n), func(b *testing.B) {
			if testing.Short() && n > 1_000_000 {
				b.Skip("-short")
			}
			for range b.N {
				before := measure()
				ms := fillPtrMaps(n)
				after := measure()
				after.report(b, before, n)
				runtime.KeepAlive(ms)
			}
		})
	}
}

func nanotime() int64 { return time.Now().UnixNano() }

type mem struct{ heap, rss uint64 }

func measure() mem {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return mem{heap: ms.HeapInuse, rss: rss()}
}

func (m mem) report(b *testing.B, before mem, n int) {
	b.ReportMetric(float64(m.heap-before.heap)/float64(n), "heap/entry")
	if m.rss != 0 && before.rss != 0 {
		b.ReportMetric((float64(m.rss)-float64(before.rss))/float64(n), "rss/entry")
	}
}

// rss returns the resident set size from /proc/self/statm, or 0.
func rss() uint64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return 0
	}
	return pages * uint64(os.Getpagesize())
}

// BenchmarkCompact times one compaction of a table of n entries (78,125: one
// of 128 key groups at 10 M keys) whose every entry has one dead old
// version: Freeze, rewrite every key, Release, then the write that
// compacts. The write is the latency spike a compaction adds to one record;
// ns/entry is its cost per live entry.
func BenchmarkCompact(b *testing.B) {
	const n = 78_125
	var tab Table
	var kb [8]byte
	var vb [16]byte
	for k := range int64(n) {
		if err := tab.Put(hash8(k), key8(kb[:], k), vb[:]); err != nil {
			b.Fatal(err)
		}
	}
	var total int64
	for i := range b.N {
		f := tab.Freeze()
		binary.LittleEndian.PutUint64(vb[:], uint64(i))
		for k := range int64(n) {
			if err := tab.Put(hash8(k), key8(kb[:], k), vb[:]); err != nil {
				b.Fatal(err)
			}
		}
		f.Release()
		before := tab.compactions
		start := nanotime()
		if err := tab.Put(hash8(0), key8(kb[:], 0), vb[:]); err != nil {
			b.Fatal(err)
		}
		total += nanotime() - start
		if tab.compactions != before+1 {
			b.Fatal("the write after Release did not compact")
		}
	}
	b.ReportMetric(float64(total)/float64(b.N), "compact-ns")
	b.ReportMetric(float64(total)/float64(b.N)/n, "ns/entry")
}
