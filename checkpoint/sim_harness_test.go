package checkpoint

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The shared harness of the seeded simulations (the coordinator's in
// sim_test.go, the aligner's and the committer's): it runs one seed alone or
// seeds 1..N on GOMAXPROCS workers, groups failures by the check that failed
// and prints the command line that replays each one.
//
// Seeds run without a step log, which keeps them cheap; a failing seed is run
// a second time with its log on. A simulation is a pure function of its seed,
// so the second run must fail the same way; if it does not, the harness says
// so (the seed would not be reproducible).

// simRun is what one seed of a simulation produced.
type simRun[S any] struct {
	seed int64
	err  string // "" when every invariant held
	// trail is the step log: its last entries for a failure, all of it
	// when the full log was asked for.
	trail string
	stats S
}

// seededSim describes a simulation for runSeeded. S is a struct of int
// counters.
type seededSim[S any] struct {
	// test is the test function's name, replay its single-seed flag and
	// flags the other flags a seed's outcome depends on, for the replay
	// command line.
	test, replay, flags string
	// run plays one seed. logTail is how many step log entries to keep: 0
	// none, -1 all.
	run func(seed int64, logTail int) simRun[S]
	// cover checks, over at least coverMin seeds, that the totals show every
	// behaviour the simulation claims to exercise.
	cover    func(t *testing.T, total S)
	coverMin int
}

// simFailed is the panic value of a violated invariant; runSeed turns it
// into simRun.err.
type simFailed struct{ msg string }

// runSeed runs body, turning a simFailed or any other panic into an error
// message.
func runSeed(body func()) (err string) {
	defer func() {
		if p := recover(); p != nil {
			if f, ok := p.(simFailed); ok {
				err = f.msg
			} else {
				err = fmt.Sprintf("panic: %v\n%s", p, debug.Stack())
			}
		}
	}()
	body()
	return ""
}

// runSeeded runs seed one alone (with -v, printing its whole log), or seeds
// 1..n in parallel.
func runSeeded[S any](t *testing.T, sim seededSim[S], one int64, n int) {
	t.Helper()
	replay := func(seed int64) string {
		return fmt.Sprintf("go test ./checkpoint -run '^%s$' -%s=%d%s -v", sim.test, sim.replay, seed, sim.flags)
	}
	if one != 0 {
		tail := 80
		if testing.Verbose() {
			tail = -1
		}
		r := sim.run(one, tail)
		if testing.Verbose() || r.err != "" {
			t.Log("\n" + r.trail)
		}
		if r.err != "" {
			t.Fatalf("seed %d: %s\nReplay: %s", one, r.err, replay(one))
		}
		t.Logf("seed %d ok: %s", one, fmtStats(r.stats))
		return
	}
	start := time.Now()
	var (
		next    atomic.Int64
		mu      sync.Mutex
		failed  []simRun[S]
		total   S
		wg      sync.WaitGroup
		workers = runtime.GOMAXPROCS(0)
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var local S
			var bad []simRun[S]
			for {
				seed := next.Add(1)
				if seed > int64(n) {
					break
				}
				r := sim.run(seed, 0)
				addCounters(&local, r.stats)
				if r.err != "" {
					bad = append(bad, r)
				}
			}
			mu.Lock()
			addCounters(&total, local)
			failed = append(failed, bad...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	t.Logf("%d seeds in %v: %.0f seeds/s on %d workers", n, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds(), workers)
	t.Logf("totals: %s", fmtStats(total))
	if len(failed) > 0 {
		slices.SortFunc(failed, func(a, b simRun[S]) int { return int(a.seed - b.seed) })
		var seeds []string
		for i, r := range failed {
			if i == 20 {
				seeds = append(seeds, "…")
				break
			}
			seeds = append(seeds, fmt.Sprint(r.seed))
		}
		type kind struct {
			n     int
			first int64
		}
		kinds := map[string]*kind{}
		var order []string
		for _, r := range failed {
			k := simCheckName(r.err)
			if kinds[k] == nil {
				kinds[k] = &kind{first: r.seed}
				order = append(order, k)
			}
			kinds[k].n++
		}
		var b strings.Builder
		for _, k := range order {
			fmt.Fprintf(&b, "\n  %6d× %q, first seed %d: %s", kinds[k].n, k, kinds[k].first, replay(kinds[k].first))
		}
		first := failed[0]
		again := sim.run(first.seed, 80)
		if again.err != first.err {
			t.Errorf("seed %d is not reproducible: it failed with %q, and again with %q", first.seed, first.err, again.err)
		}
		t.Fatalf("%d of %d seeds failed (seeds %s). By check:%s\nFirst: seed %d: %s\nReplay: %s\n%s",
			len(failed), n, strings.Join(seeds, " "), b.String(), first.seed, first.err, replay(first.seed), again.trail)
	}
	if n >= sim.coverMin {
		sim.cover(t, total)
	}
}

// simCheckName reduces a failure message to the check that failed: ids,
// offsets and committable names become N.
func simCheckName(msg string) string {
	msg, _, _ = strings.Cut(msg, "\n")
	var words []string
	for _, w := range strings.Fields(msg) {
		if strings.ContainsAny(w, "0123456789") {
			w = "N"
		}
		words = append(words, w)
	}
	return strings.Join(words, " ")
}

// simDefaultSeeds is the default seed count of a simulation flag: n, or a
// tenth of it under the race detector, which slows the simulations about
// tenfold; their workers share only the harness's totals, so a few seeds
// exercise all there is to race.
func simDefaultSeeds(n int) int {
	if raceEnabled {
		return n / 10
	}
	return n
}

// requireCovered fails t for every named counter that stayed zero: a
// simulation that silently stopped exercising a behaviour checks nothing.
func requireCovered(t *testing.T, counters map[string]int) {
	t.Helper()
	names := make([]string, 0, len(counters))
	for name := range counters {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if counters[name] == 0 {
			t.Errorf("no seed exercised %s: the simulation lost coverage", name)
		}
	}
}

// addCounters adds every field of one, a struct of ints, to total.
func addCounters[S any](total *S, one S) {
	a, b := reflect.ValueOf(total).Elem(), reflect.ValueOf(one)
	for i := range a.NumField() {
		a.Field(i).SetInt(a.Field(i).Int() + b.Field(i).Int())
	}
}

// fmtStats formats a stats struct as name=value pairs.
func fmtStats(s any) string {
	return strings.Trim(strings.ReplaceAll(fmt.Sprintf("%+v", s), ":", "="), "{}")
}

// simLog is a step log that costs nothing when off. With a positive limit it
// keeps about the last limit entries.
type simLog struct {
	limit int // 0: off; -1: keep everything
	lines []string
	drop  int // entries dropped from the front
}

func (l *simLog) on() bool { return l.limit != 0 }

func (l *simLog) add(line string) {
	if l.limit > 0 && len(l.lines) >= 2*l.limit {
		l.drop += len(l.lines) - l.limit
		l.lines = append(l.lines[:0], l.lines[len(l.lines)-l.limit:]...)
	}
	l.lines = append(l.lines, line)
}

// String returns the kept entries, the last limit of them when limited.
func (l *simLog) String() string {
	lines, drop := l.lines, l.drop
	if l.limit > 0 && len(lines) > l.limit {
		drop += len(lines) - l.limit
		lines = lines[len(lines)-l.limit:]
	}
	var b strings.Builder
	if drop > 0 {
		fmt.Fprintf(&b, "  … (%d earlier entries)\n", drop)
	}
	for _, s := range lines {
		b.WriteString("  ")
		b.WriteString(s)
		b.WriteByte('\n')
	}
	return b.String()
}

// pickWeighted draws an index of w with probability proportional to its
// weight, with one draw from rng; -1 (and no draw) when every weight is 0.
func pickWeighted(rng *rand.Rand, w []int) int {
	total := 0
	for _, x := range w {
		total += x
	}
	if total == 0 {
		return -1
	}
	k, r := 0, rng.IntN(total)
	for ; r >= w[k]; k++ {
		r -= w[k]
	}
	return k
}
