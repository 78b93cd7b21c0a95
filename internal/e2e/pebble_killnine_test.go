package e2e

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/connector/datagen"
	"github.com/ingest-engine/ingest/internal/testkit"
	"github.com/ingest-engine/ingest/storage"
)

var pebbleKillSeed = flag.Uint64("pebblekillseed", 0, "replay TestPebbleKillNine with this seed (0: random; subtest i uses seed+i)")

// The kill tests of the pebble state backend: each pipeline's keyed state
// lives in Pebble stores under data/state, and each checkpoint uploads the
// SST files no earlier checkpoint stored and references the others. Their
// sources are rate limited to pkRate records a second for pkSeconds: the
// runs the kills cut short (pkKills of at most pkMaxDelay plus a failpoint
// pause each, about 12 s of stream at most) never reach the end.
const (
	pkSeconds  = 16
	pkRate     = 1000
	pkCount    = pkSeconds * pkRate
	pkInterval = 100 * time.Millisecond

	pkKills      = 5
	pkAimedKills = 2
	pkPause      = 300 * time.Millisecond
	pkMinDelay   = 500 * time.Millisecond
	pkMaxDelay   = 2 * time.Second
)

// pkSchedule is the kill schedule of every pebble kill test: random kills,
// and kills while a subtask's manifest and new SST files are written but not
// yet acknowledged.
func pkSchedule() killSchedule {
	return killSchedule{Kills: pkKills, AimedKills: pkAimedKills, Aim: "task/after-snapshot-before-ack", Pause: pkPause,
		MinDelay: pkMinDelay, MaxDelay: pkMaxDelay, Budget: 30 * time.Second, FinalWait: 90 * time.Second}
}

// TestPebbleKillNine runs three pipelines whose keyed state is in the pebble
// backend — datagen → tumbling window, datagen → filter → session window,
// and two datagen sources → interval join, each to a file sink — as separate
// processes, kills each with SIGKILL at random moments and while a subtask
// is paused between writing its checkpoint's files and acknowledging them,
// restarts it until it exits 0, and checks that the committed output is
// exactly the output the input implies (computed in the test: nothing lost,
// nothing twice), that recoveries restored checkpoints whose state builds on
// SST files of earlier checkpoints, and that restores on the same machine
// took their files from the local copy of the checkpoint.
func TestPebbleKillNine(t *testing.T) {
	if testing.Short() {
		t.Skip("kill -9 test; not in -short")
	}
	seed := knSeed(*pebbleKillSeed)
	t.Logf("seed %d (replay with -pebblekillseed=%d)", seed, seed)
	bin := pkBinary(t)
	for i, sc := range []struct {
		name string
		run  func(t *testing.T, bin string, seed uint64) soakResult
	}{
		{"tumbling", pebbleWindowScenario},
		{"session", pebbleSessionScenario},
		{"join", pebbleJoinScenario},
	} {
		t.Run(sc.name, func(t *testing.T) {
			// Each mostly waits for its rate-limited process.
			t.Parallel()
			s := seed + uint64(i)
			requireExact(t, sc.run(t, bin, s), s)
		})
	}
}

// pebbleWindowScenario: datagen → per-key 1 s tumbling window (2 subtasks)
// → file, state in pebble. 4,000 keys: each window holds 1,000 keys while
// it is open, over ten checkpoints.
func pebbleWindowScenario(t *testing.T, bin string, seed uint64) soakResult {
	const keys = 4000
	doc := testkit.WindowPipeline{Name: "pebble-window", Interval: pkInterval, Retain: 2,
		Count: pkCount, Rate: pkRate, Keys: keys, Parallelism: 1, WindowParallelism: 2, StateDir: "data/state"}.YAML()
	var res soakResult
	pkRun(t, bin, seed, doc, func(w *knWatcher, out string) {
		checkFileOutput(t, w, out, testkit.ExpectedWindows(pkCount, keys, datagen.DefaultStartTime, time.Millisecond, time.Second), &res)
	}, &res)
	return res
}

// The session pipeline: datagen over pkSessionKeys keys, 1 ms of event time
// apart, keeps the first second of every two (id % 2000 < 1000); each key
// then has 4 records 250 ms apart per active second, which a gap of 400 ms
// makes one session, and 1,250 ms to the next. Sessions stay open across
// about twelve checkpoints.
const (
	pkSessionKeys = 250
	pkSessionGap  = 400 * time.Millisecond
)

func pkSessionYAML() string {
	return fmt.Sprintf(`pipeline: pebble-session
checkpoint:
  interval: %v
  dir: data/checkpoints
  retain: 2
state:
  backend: pebble
  dir: data/state
sources:
  events:
    type: datagen
    parallelism: 2
    count: %d
    rate: %d
    keys: %d
transforms:
  active:
    type: filter
    input: events
    where: id %% 2000 < 1000
  sessions:
    type: window
    kind: session
    input: active
    key: key
    gap: %v
    parallelism: 2
    aggregates:
      events: count()
      total: sum(value)
      first_id: min(id)
      last_id: max(id)
sinks:
  out:
    type: file
    input: sessions
    path: data/out
`, pkInterval, pkCount, pkRate, pkSessionKeys, pkSessionGap)
}

// pkSessionLine is a session result.
type pkSessionLine struct {
	Key         *int64 `json:"key"`
	WindowStart string `json:"window_start"`
	WindowEnd   string `json:"window_end"`
	Events      *int64 `json:"events"`
	Total       *int64 `json:"total"`
	FirstID     *int64 `json:"first_id"`
	LastID      *int64 `json:"last_id"`
}

// pkSessionCanon renders a session result as key, bounds (Unix ns) and
// aggregates, the form pkSessionsWant computes.
func pkSessionCanon(line []byte) (string, error) {
	var l pkSessionLine
	if err := json.Unmarshal(line, &l); err != nil {
		return "", err
	}
	if l.Key == nil || l.Events == nil || l.Total == nil || l.FirstID == nil || l.LastID == nil {
		return "", fmt.Errorf("a field is missing")
	}
	start, err := time.Parse(time.RFC3339Nano, l.WindowStart)
	if err != nil {
		return "", err
	}
	end, err := time.Parse(time.RFC3339Nano, l.WindowEnd)
	if err != nil {
		return "", err
	}
	return pkSession(*l.Key, start.UnixNano(), end.UnixNano(), *l.Events, *l.Total, *l.FirstID, *l.LastID), nil
}

func pkSession(key, start, end, events, total, first, last int64) string {
	return fmt.Sprintf("key %d [%d, %d) events %d total %d ids %d..%d", key, start, end, events, total, first, last)
}

// pkSessionsWant computes the sessions straight from the datagen contract
// (record i: key i % keys, value i % 1000, event time start + i ms): per
// key, records at most gap apart are one session [first, last + gap).
func pkSessionsWant() []string {
	type open struct{ first, last, events, total, firstID, lastID int64 }
	s0 := datagen.DefaultStartTime.UnixNano()
	gap := int64(pkSessionGap)
	var want []string
	emit := func(k int64, o *open) {
		want = append(want, pkSession(k, o.first, o.last+gap, o.events, o.total, o.firstID, o.lastID))
	}
	sessions := map[int64]*open{}
	for i := int64(0); i < pkCount; i++ {
		if i%2000 >= 1000 {
			continue
		}
		k, ts := i%pkSessionKeys, s0+i*int64(time.Millisecond)
		o := sessions[k]
		if o != nil && ts > o.last+gap {
			emit(k, o)
			o = nil
		}
		if o == nil {
			o = &open{first: ts, firstID: i}
			sessions[k] = o
		}
		o.last, o.lastID = ts, i
		o.events++
		o.total += i % 1000
	}
	for k, o := range sessions {
		emit(k, o)
	}
	return want
}

func pebbleSessionScenario(t *testing.T, bin string, seed uint64) soakResult {
	want := pkSessionsWant()
	var res soakResult
	pkRun(t, bin, seed, pkSessionYAML(), func(w *knWatcher, out string) {
		pkCheckOutput(t, w, out, want, pkSessionCanon, &res)
	}, &res)
	return res
}

// The join pipeline: orders (pkCount records 5 ms apart over pkJoinKeys
// keys) and payments (half as many, 10 ms apart, same keys), both at 5 s of
// event time a second, joined by an interval join: a payment of the
// order's key from 1 s before to 1 s after it, bounds included. Both sides
// stay in the join's state for about a second of event time.
const (
	pkJoinKeys  = 200
	pkJoinLower = -time.Second
	pkJoinUpper = time.Second
)

func pkJoinYAML() string {
	return fmt.Sprintf(`pipeline: pebble-join
checkpoint:
  interval: %v
  dir: data/checkpoints
  retain: 2
state:
  backend: pebble
  dir: data/state
sources:
  orders:
    type: datagen
    count: %d
    rate: %d
    keys: %d
    event_interval: 5ms
  payments:
    type: datagen
    count: %d
    rate: %d
    keys: %d
    event_interval: 10ms
transforms:
  paid:
    type: join
    kind: interval
    left: orders
    right: payments
    on: key
    lower: %v
    upper: %v
    parallelism: 2
    select:
      customer: key
      order: left.id
      payment: right.id
sinks:
  out:
    type: file
    input: paid
    path: data/out
`, pkInterval, pkCount, pkRate, pkJoinKeys, pkCount/2, pkRate/2, pkJoinKeys, pkJoinLower, pkJoinUpper)
}

func pkJoinCanon(line []byte) (string, error) {
	var l struct {
		Customer, Order, Payment *int64
	}
	if err := json.Unmarshal(line, &l); err != nil {
		return "", err
	}
	if l.Customer == nil || l.Order == nil || l.Payment == nil {
		return "", fmt.Errorf("a field is missing")
	}
	return pkPair(*l.Customer, *l.Order, *l.Payment), nil
}

func pkPair(customer, order, payment int64) string {
	return fmt.Sprintf("customer %d order %d payment %d", customer, order, payment)
}

// pkJoinWant computes the join's pairs from the datagen contract: order i
// (key i % keys, at i·5 ms) and payment j (key j % keys, at j·10 ms) of one
// key with payment time - order time in [lower, upper].
func pkJoinWant() []string {
	const (
		orderStep   = int64(5 * time.Millisecond)
		paymentStep = int64(10 * time.Millisecond)
		payments    = pkCount / 2
	)
	var want []string
	for i := int64(0); i < pkCount; i++ {
		lo, hi := i*orderStep+int64(pkJoinLower), i*orderStep+int64(pkJoinUpper)
		for j := max(0, (lo+paymentStep-1)/paymentStep); j <= hi/paymentStep && j < payments; j++ {
			if j*paymentStep < lo || j*paymentStep > hi {
				continue
			}
			if i%pkJoinKeys == j%pkJoinKeys {
				want = append(want, pkPair(i%pkJoinKeys, i, j))
			}
		}
	}
	return want
}

func pebbleJoinScenario(t *testing.T, bin string, seed uint64) soakResult {
	want := pkJoinWant()
	var res soakResult
	pkRun(t, bin, seed, pkJoinYAML(), func(w *knWatcher, out string) {
		pkCheckOutput(t, w, out, want, pkJoinCanon, &res)
	}, &res)
	return res
}

// pkBin is the ingest binary the pebble tests share: a build takes some 15 s
// on two busy cores. TestMain removes its directory.
var pkBin struct {
	once      sync.Once
	dir, path string
	err       error
}

// pkBinary builds the ingest binary once per test process and returns it.
func pkBinary(t *testing.T) string {
	t.Helper()
	pkBin.once.Do(func() {
		began := time.Now()
		if pkBin.dir, pkBin.err = os.MkdirTemp("", "e2e-pebble-"); pkBin.err != nil {
			return
		}
		pkBin.path = filepath.Join(pkBin.dir, "ingest")
		out, err := exec.Command("go", append(append([]string{"build"}, binaryTags...), "-o", pkBin.path, "github.com/ingest-engine/ingest/cmd/ingest")...).CombinedOutput()
		if err != nil {
			pkBin.err = fmt.Errorf("go build of cmd/ingest: %v\n%s", err, out)
		}
		t.Logf("built the ingest binary in %v", time.Since(began).Round(time.Millisecond))
	})
	if pkBin.err != nil {
		t.Fatal(pkBin.err)
	}
	return pkBin.path
}

// pkRun writes doc as the pipeline in a new directory, runs the pebble kill
// schedule on it, lets check compare the committed output under data/out
// (stopping the reader w) and checks what the recoveries restored (see
// pkRestores.require).
func pkRun(t *testing.T, bin string, seed uint64, doc string, check func(w *knWatcher, out string), res *soakResult) {
	t.Helper()
	work, yaml := scenarioDir(t, doc)
	ckpts, out := filepath.Join(work, "data", "checkpoints"), filepath.Join(work, "data", "out")
	w := knWatch(out, seed)
	restores := newPkRestores(ckpts)
	s := pkSchedule()
	s.Bin, s.YAML, s.Ckpts, s.Seed, s.OnLine = bin, yaml, ckpts, seed, restores.line
	res.Kills, res.Aimed = s.run(t)
	check(w, out)
	restores.require(t)
}

// pkCheckOutput stops the reader w and adds to res what it saw and how the
// committed lines under out, each rendered by canon, compare with want as
// multisets: every wanted line exactly once, nothing else.
func pkCheckOutput(t *testing.T, w *knWatcher, out string, want []string, canon func([]byte) (string, error), res *soakResult) {
	t.Helper()
	w.finish()
	violations, entries, lines, passes := w.report()
	t.Logf("reader: %d passes, %d committed entries, %d lines", passes, entries, lines)
	res.Samples = passes
	for _, v := range violations {
		res.partial("reader: %s", v)
	}
	var got []string
	for _, l := range readLines(t, out) {
		c, err := canon(l.Text)
		if err != nil {
			res.Wrong++
			res.Examples = append(res.Examples, fmt.Sprintf("%s:%d malformed (%v): %s", l.File, l.Number, err, l.Text))
			continue
		}
		got = append(got, c)
	}
	d := nxCompare(got, want)
	res.Lost += d.Missing
	res.Duplicated += d.Duplicated
	res.Unexpected += d.Unexpected
	if !d.OK() {
		res.Examples = append(res.Examples, d.String())
	}
	t.Logf("committed %d lines; %d expected", len(got), len(want))
}

// pkRestores follows the recoveries in the ingest processes' logs: which
// checkpoint each restored (read from storage at once, while it is the
// recovery point and so cannot be deleted) and where each pebble subtask's
// restore took its SST files from ("restored pebble state").
type pkRestores struct {
	ckpts string

	mu sync.Mutex
	// restored are the checkpoints restored, in order; buildingOn those of
	// them whose state references SST files of earlier checkpoints.
	restored   []int64
	buildingOn []int64
	unreadable []string
	// subtasks counts the pebble subtask restores; allLocal those that
	// linked every file from the local copy; files, local and stored the
	// files over all of them.
	subtasks, allLocal    int
	files, local, stored  int
	localLines, malformed []string
}

func newPkRestores(ckpts string) *pkRestores { return &pkRestores{ckpts: ckpts} }

// line is the killSchedule's OnLine.
func (r *pkRestores) line(s string) {
	switch {
	case strings.Contains(s, `msg="restored from checkpoint"`):
		id, err := strconv.ParseInt(knField(s, "checkpoint"), 10, 64)
		if err != nil {
			r.note(&r.unreadable, "%q: %v", s, err)
			return
		}
		refs, err := pkReferences(r.ckpts, id)
		r.mu.Lock()
		defer r.mu.Unlock()
		r.restored = append(r.restored, id)
		if err != nil {
			r.unreadable = append(r.unreadable, fmt.Sprintf("checkpoint %d: %v", id, err))
		} else if len(refs) > 0 {
			r.buildingOn = append(r.buildingOn, id)
		}
	case strings.Contains(s, `msg="restored pebble state"`):
		var n [3]int
		for i, k := range []string{"files", "from_local_copy", "from_storage"} {
			v, err := strconv.Atoi(knField(s, k))
			if err != nil {
				r.note(&r.malformed, "%q: %s: %v", s, k, err)
				return
			}
			n[i] = v
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		r.subtasks++
		r.files += n[0]
		r.local += n[1]
		r.stored += n[2]
		if n[1] > 0 && n[2] == 0 {
			r.allLocal++
		}
		if len(r.localLines) < 3 {
			r.localLines = append(r.localLines, s)
		}
	}
}

func (r *pkRestores) note(to *[]string, format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	*to = append(*to, fmt.Sprintf(format, args...))
}

// require fails t unless some recovery restored a checkpoint whose state
// references earlier checkpoints' SST files and some pebble subtask restore
// took all of its files from the local copy, with every restore line
// accounting for every file.
func (r *pkRestores) require(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	t.Logf("restored checkpoints %v, of which %v build on earlier checkpoints' SST files; %d pebble subtask restores (%d entirely from the local copy): %d files, %d from the local copy, %d from storage; e.g.\n  %s",
		r.restored, r.buildingOn, r.subtasks, r.allLocal, r.files, r.local, r.stored, strings.Join(r.localLines, "\n  "))
	if len(r.unreadable) > 0 {
		t.Logf("restored checkpoints whose metadata could not be read: %s", strings.Join(r.unreadable, "; "))
	}
	if len(r.malformed) > 0 {
		t.Errorf("malformed restore lines: %s", strings.Join(r.malformed, "; "))
	}
	if len(r.restored) == 0 || r.subtasks == 0 {
		t.Errorf("no recovery restored a checkpoint (%d checkpoints, %d pebble subtask restores): the kills prove nothing about restored state", len(r.restored), r.subtasks)
	}
	if len(r.buildingOn) == 0 {
		t.Errorf("no recovery restored a checkpoint whose state references SST files of earlier checkpoints: the checkpoints were not incremental")
	}
	if r.allLocal == 0 {
		t.Errorf("no pebble subtask restore took its SST files from the local copy: local recovery never happened")
	}
	if r.local+r.stored != r.files {
		t.Errorf("the restores name %d files but took %d from the local copy and %d from storage", r.files, r.local, r.stored)
	}
}

// pkReferences returns the earlier checkpoints whose files checkpoint id's
// state references (SubtaskState.Shared handles of other checkpoints).
func pkReferences(ckpts string, id int64) ([]int64, error) {
	st, err := storage.NewLocal(ckpts)
	if err != nil {
		return nil, err
	}
	data, err := st.ReadMetadata(context.Background(), id)
	if err != nil {
		return nil, err
	}
	m, err := checkpoint.DecodeMetadata(data)
	if err != nil {
		return nil, err
	}
	return m.References(), nil
}
