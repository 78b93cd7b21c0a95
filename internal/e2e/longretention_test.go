package e2e

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/clock"
	"github.com/ingest-engine/ingest/internal/failpoint"
	"github.com/ingest-engine/ingest/internal/testkit"
	"github.com/ingest-engine/ingest/storage"
	"github.com/ingest-engine/ingest/storage/storagetest"
	"github.com/ingest-engine/ingest/stream"
)

var (
	longRetention     = flag.Bool("longretention", false, "TestLongRetention: run 500+ checkpoints per state backend with failures injected (skipped without it)")
	longRetentionSeed = flag.Uint64("longretentionseed", 0, "TestLongRetention: seed of the injected failures (0: random)")
)

// TestLongRetention is the long retention test (docs/reliability.md, "The
// long retention test"): on each state backend — memory (incremental delta
// checkpoints building on earlier checkpoints' files) and pebble (SST files
// uploaded once and referenced by later checkpoints while they live) — the
// contract pipeline (datagen → keyed 1 s window → file sink) runs through
// more than 500 completed checkpoints with retain 3 while crashes (after
// acks, during state writes, around the metadata and the commit, while
// processing) and storage faults (state and metadata writes, trims and
// discards) are injected throughout. After every completed checkpoint (in
// the storage, before the job goes on) and every 10 ms from a watcher
// goroutine it checks that every file a complete checkpoint present in
// storage references — its state files and the shared files of earlier
// checkpoints it builds on — exists and verifies (size and CRC), and it
// measures the checkpoint directory: its bytes must stay below a bound
// derived from the largest checkpoint's full state size
// (longRetentionBound), and so must the bytes of the files no complete
// checkpoint references (garbageBound). At the end the committed output is
// exact, and the retention pass of a next start leaves exactly the retained
// checkpoints and the files they reference.
//
// It runs only with -longretention:
//
//	go test ./internal/e2e -run TestLongRetention -longretention -v -timeout 30m
func TestLongRetention(t *testing.T) {
	if !*longRetention {
		t.Skip("the long retention test runs with -longretention (go test ./internal/e2e -run TestLongRetention -longretention -v)")
	}
	seed := *longRetentionSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("seed %d (replay the injection schedule with -longretentionseed=%d)", seed, seed)
	// Failpoints are process-wide: the backends run one after the other.
	for _, backend := range []string{"memory", "pebble"} {
		t.Run(backend, func(t *testing.T) { runLongRetention(t, backend, seed) })
	}
}

const (
	lrRetain = 3 // and checkpoint.max_concurrent 1, the default
	lrCount  = 120000
	// Each 1 s event-time window holds 1000 records (datagen's step is
	// 1 ms), one per key: a window subtask's state is hundreds of entries,
	// so the state files, not the metadata, make up most of the bytes.
	lrKeys         = 1000
	lrMinCompleted = 500
)

// lrFaults is the failpoint schedule: per failpoint, the probability that
// one call fails. The rates are chosen so that over ~850 checkpoints each
// fires several times or more while most checkpoints still complete.
var lrFaults = []struct {
	point string
	p     float64
}{
	{"task/after-ack", 1.0 / 250},                   // restart after a subtask acknowledged
	{"task/during-async-write", 1.0 / 60},           // state encoded (memory) or uploaded (pebble), not acknowledged: a decline
	{"task/after-snapshot-before-ack", 1.0 / 400},   // state written, restart before the ack
	{"job/before-metadata-write", 1.0 / 120},        // every ack in, the metadata write fails: a failed checkpoint
	{"job/after-metadata-before-commit", 1.0 / 100}, // complete, restart before the commit
	{"job/after-commit-before-cleanup", 1.0 / 100},  // committed, restart before retention deletes
	{"storage/discard-mid-delete", 1.0 / 40},        // a discard deleted the metadata, not the files
	{"task/process-batch", 1.0 / 400},               // restart while processing records
}

// lrStorageFaults are the storage faults (storagetest.Faulty, which fails the
// call before it reaches the directory): per operation, the probability that
// one call fails. A failed state write declines its checkpoint, a failed
// metadata write fails it, a failed trim or discard leaves its checkpoint
// whole (metadata and all) until the job retries it or the next recovery's
// retention pass redoes it.
var lrStorageFaults = map[storagetest.Op]float64{
	storagetest.OpWriteFile:     1.0 / 100,
	storagetest.OpWriteMetadata: 1.0 / 50,
	storagetest.OpTrim:          1.0 / 25,
	storagetest.OpDiscard:       1.0 / 25,
}

// lockedRand is a seeded source shared by the injection callbacks.
type lockedRand struct {
	mu sync.Mutex
	r  *rand.Rand
}

func (l *lockedRand) chance(p float64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.Float64() < p
}

func runLongRetention(t *testing.T, backend string, seed uint64) {
	began := time.Now()
	rng := &lockedRand{r: rand.New(rand.NewPCG(seed, 0))}
	wp := testkit.WindowPipeline{
		Name: "longretention", Interval: 5 * time.Millisecond, Retain: lrRetain, TolerableFailures: 1 << 20,
		RestartDelay: time.Millisecond, MaxAttempts: 1 << 20,
		Count: lrCount, Rate: 16000, Keys: lrKeys, Parallelism: 2, WindowParallelism: 2,
	}
	yaml := wp.YAML()
	if backend == "pebble" {
		yaml += "state:\n  backend: pebble\n  dir: data/state\n  cache: 16MiB\n"
	}
	// The job runs on a fake clock stepped 10 ms (160 records of the rate,
	// one tick of the job's driver) per protocol event: the stream lasts
	// about 750 checkpoints however slow the machine.
	const step = 10 * time.Millisecond
	fake := clock.NewFake(time.Unix(1_800_000_000, 0))
	dir := t.TempDir()

	fired, calls := map[string]*atomic.Int64{}, map[string]*atomic.Int64{}
	var disables []func()
	for _, f := range lrFaults {
		n, c := &atomic.Int64{}, &atomic.Int64{}
		fired[f.point], calls[f.point] = n, c
		p, name := f.p, f.point
		disable := failpoint.Enable(name, func() error {
			c.Add(1)
			if rng.chance(p) {
				n.Add(1)
				return fmt.Errorf("failpoint %s: %w", name, failpoint.ErrInjected)
			}
			return nil
		})
		defer disable() // and after the run, before the checks below
		disables = append(disables, disable)
	}

	var aud *retentionAuditor
	storageFired, storageCalls := map[storagetest.Op]*atomic.Int64{}, map[storagetest.Op]*atomic.Int64{}
	for op := range lrStorageFaults {
		storageFired[op], storageCalls[op] = &atomic.Int64{}, &atomic.Int64{}
	}
	logs := &warnCounter{}
	job := yamlJob(t, dir, yaml, func(o *stream.RunOptions) {
		local, err := storage.NewLocal(o.CheckpointDir)
		if err != nil {
			t.Fatal(err)
		}
		aud = newRetentionAuditor(local, o.CheckpointDir)
		faulty := storagetest.NewFaulty(local)
		faulty.FailWhen(func(op storagetest.Op, id int64, name string) error {
			p, ok := lrStorageFaults[op]
			if !ok {
				return nil
			}
			storageCalls[op].Add(1)
			if !rng.chance(p) {
				return nil
			}
			storageFired[op].Add(1)
			return fmt.Errorf("injected %v failure for checkpoint %d %s: %w", op, id, name, errors.New("disk unavailable"))
		})
		o.Storage = &auditedStorage{Storage: faulty, aud: aud}
		o.Clock = fake
		o.Log = slog.New(logs)
	})

	// The watcher audits the directory concurrently with the job's deletions
	// (the retention passes of recoveries, trims and discards) too.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			aud.audit("watcher")
		}
	}()
	func() {
		defer func() { close(stop); wg.Wait() }()
		runStepped(t, job, fake, step, 10*time.Minute)
	}()
	for _, disable := range disables {
		disable()
	}
	aud.audit("after the run")

	st, ob := job.Stats(), job.Observe()
	var b strings.Builder
	for _, f := range lrFaults {
		fmt.Fprintf(&b, " %s=%d/%d", f.point, fired[f.point].Load(), calls[f.point].Load())
	}
	for _, op := range []storagetest.Op{storagetest.OpWriteFile, storagetest.OpWriteMetadata, storagetest.OpTrim, storagetest.OpDiscard} {
		fmt.Fprintf(&b, " %v=%d/%d", op, storageFired[op].Load(), storageCalls[op].Load())
	}
	a := aud.report()
	t.Logf("%s: %v; checkpoints %d triggered, %d completed, %d failed; restarts %d; retention deleted %d, trimmed %d; "+
		"warnings: %d failed deletions, %d failed trims, %d damaged checkpoints skipped",
		backend, time.Since(began).Round(time.Second), ob.Checkpoints.Triggered, st.Completed, st.Failed, st.Restarts,
		ob.RetentionDeleted, ob.RetentionTrimmed,
		logs.count("deleting checkpoint data failed"), logs.count("trimming checkpoint data failed"), logs.count("skipping a damaged checkpoint"))
	t.Logf("injected (fired/calls):%s", b.String())
	t.Logf("audits: %d (%d after completed checkpoints), %d referenced files verified; largest full state %d bytes, largest metadata %d bytes; "+
		"checkpoint directory: max %d bytes (%s), bound %d bytes (with no failed deletion outstanding; up to %d with %d), at most %.0f%% of the bound; "+
		"unreferenced bytes: max %d (%s), bound %d (up to %d), at most %.0f%% of it; at most %d complete and %d incomplete checkpoints; "+
		"max bytes by quarter of the run %v",
		a.audits, a.hooks, a.verified, a.maxFull, a.maxMeta,
		a.maxBytes, a.maxBytesAt, longRetentionBound(a.maxFull, a.maxMeta, 0), longRetentionBound(a.maxFull, a.maxMeta, a.maxFailed), a.maxFailed, 100*a.maxRatio,
		a.maxGarbage, a.maxGarbageAt, garbageBound(a.maxFull, a.maxMeta, 0), garbageBound(a.maxFull, a.maxMeta, a.maxFailed), 100*a.maxGarbageRatio,
		a.maxComplete, a.maxIncomplete, a.quarters())

	if st.Completed < lrMinCompleted {
		t.Errorf("only %d checkpoints completed; the test needs %d", st.Completed, lrMinCompleted)
	}
	for _, f := range lrFaults {
		if fired[f.point].Load() == 0 {
			t.Errorf("failpoint %s never fired", f.point)
		}
	}
	for op, n := range storageFired {
		if n.Load() < 3 {
			t.Errorf("storage fault on %v fired %d times, want several", op, n.Load())
		}
	}
	if st.Restarts < 10 || st.Failed < 10 {
		t.Errorf("restarts %d, failed checkpoints %d: want many of each", st.Restarts, st.Failed)
	}
	if a.hooks < lrMinCompleted {
		t.Errorf("only %d audits after completed checkpoints", a.hooks)
	}
	if n := logs.count("skipping a damaged checkpoint"); n > 0 {
		t.Errorf("recoveries skipped %d damaged checkpoints: %s", n, logs.example("skipping a damaged checkpoint"))
	}
	if len(a.violations) > 0 {
		t.Errorf("%d referenced files deleted or damaged (seed %d), first ones:\n  %s",
			len(a.violations), seed, strings.Join(a.violations[:min(len(a.violations), 10)], "\n  "))
	}
	if a.overBound != "" {
		t.Errorf("the checkpoint directory outgrew its bound (seed %d; after %d completed checkpoints it first held more than the bound with no failed deletion outstanding): %s",
			seed, a.firstOver(), a.overBound)
	}
	if a.overGarbage != "" {
		t.Errorf("files no complete checkpoint references piled up (seed %d): %s", seed, a.overGarbage)
	}

	// What the next start's retention pass leaves is exactly the retained
	// checkpoints and the files they reference: nothing leaked for good.
	checkRetainedExactly(t, aud.local, lrRetain)

	checkWindows(t, dir, lrCount, lrKeys)
}

// auditedStorage audits the storage after every metadata write that
// succeeded, before the job learns of it: the checkpoint is complete and no
// deletion runs meanwhile (the job carries out metadata writes, trims and
// discards one at a time on one goroutine). It also records which
// checkpoints' last trim or discard failed, whatever failed it.
type auditedStorage struct {
	storage.Storage
	aud *retentionAuditor
}

func (s *auditedStorage) WriteMetadata(ctx context.Context, id int64, data []byte) error {
	err := s.Storage.WriteMetadata(ctx, id, data)
	if err == nil {
		s.aud.audit(fmt.Sprintf("checkpoint %d completed", id))
	}
	return err
}

func (s *auditedStorage) Trim(ctx context.Context, id int64, keep []string) error {
	err := s.Storage.Trim(ctx, id, keep)
	s.aud.cleanup(id, err)
	return err
}

func (s *auditedStorage) Discard(ctx context.Context, id int64) error {
	err := s.Storage.Discard(ctx, id)
	s.aud.cleanup(id, err)
	return err
}

// retentionAuditor checks checkpoint storage while a job runs: every file a
// complete checkpoint references is there and verifies, and the directory's
// bytes, and those of files no complete checkpoint references, stay below
// their bounds.
type retentionAuditor struct {
	local *storage.Local // reads bypass the fault injection
	dir   string

	mu sync.Mutex // one audit at a time; guards everything below
	// outstanding are the checkpoints whose last trim or discard failed:
	// what they hold stays until one succeeds.
	outstanding   map[int64]bool
	audits, hooks int
	verified      int
	maxFull       int64 // the largest full state size (Metadata.Size) seen
	maxMeta       int64 // the largest metadata file seen
	// peaks are, by the number of checkpoints whose last trim or discard
	// had failed at the time, the most bytes and unreferenced bytes
	// measured: the bounds are checked against them at the end, with the
	// run's largest full state (the state grows at the start, when the
	// checkpoint in flight is larger than every complete one).
	peaks         map[int]*peak
	maxComplete   int
	maxIncomplete int
	// byHook is the directory's bytes at each audit after a completed
	// checkpoint, in order.
	byHook     []int64
	violations []string
	// seen is every (checkpoint, file) violation reported, to report each
	// once.
	seen map[string]bool
}

func newRetentionAuditor(local *storage.Local, dir string) *retentionAuditor {
	return &retentionAuditor{local: local, dir: dir, outstanding: map[int64]bool{}, peaks: map[int]*peak{}, seen: map[string]bool{}}
}

func (a *retentionAuditor) cleanup(id int64, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil {
		a.outstanding[id] = true
	} else {
		delete(a.outstanding, id)
	}
}

// longRetentionBound is the most bytes the checkpoint directory may hold,
// from the largest full state size seen (full: a checkpoint's state as a
// full snapshot would write it, Metadata.Size), the largest metadata file
// and the number of checkpoints whose last trim or discard failed. What the
// directory holds at any instant, with retain R and at most one checkpoint
// in flight:
//
//   - the R retained checkpoints, plus the one that just completed and the
//     one being deleted: each wrote at most a full state's bytes (a delta, or
//     a manifest and the new SST files, is never more than the state it
//     describes) and a metadata file: (R+2)·(full+meta);
//   - the checkpoint in flight, partly written: full;
//   - the held checkpoints, trimmed to the files retained ones reference.
//     Memory backend: the earlier files a subtask's snapshot references
//     hold at most 3 times the bytes it uses of them
//     (state.maxReadAmplification), and it uses, for each key group, a
//     full section and deltas that stay below 0.8 of it before the last
//     one (state.maxMaterialiseShare), the last at most the key group's
//     state: 2.8·full used, so 8.4·full held, 9·full below. Pebble: the files a
//     retained checkpoint references are its live SSTs, at most a full
//     state, and the R retained ones' differ by what compactions rewrote
//     between them, which the 9·full covers;
//   - each checkpoint whose last trim or discard failed (the job retries it
//     before it deletes an older checkpoint, the next recovery redoes it),
//     kept whole, and the deletion of an older checkpoint that waits for it:
//     2·(full+meta) each;
//   - the ledger and temporary files: 16 KiB.
//
// So (R+3+9+2·failed)·full + (R+2+2·failed)·meta + 16 KiB.
func longRetentionBound(full, meta int64, failed int) int64 {
	const chain = 9
	return int64(lrRetain+3+chain+2*failed)*full + int64(lrRetain+2+2*failed)*meta + 16<<10
}

// garbageBound is the most bytes the checkpoint directory may hold in files
// that no complete checkpoint present references (neither its metadata nor
// a state file it or a later one reads): the checkpoint in flight, a failed
// one being discarded and one whose files a crash left for the next
// recovery, each at most a full state and a metadata file; each checkpoint
// whose last trim or discard failed and the older one whose deletion waits
// for it, 2·(full+meta) each; the ledger and temporary files, 16 KiB. A
// leak — files nothing references left in storage — piles up here, by a
// delta or an SST flush per checkpoint, and breaks the bound within a few
// dozen checkpoints.
func garbageBound(full, meta int64, failed int) int64 {
	return int64(3+2*failed)*(full+meta) + 16<<10
}

// audit lists the storage, reads every complete checkpoint's metadata and
// verifies every file it references, then measures the directory. It may
// run concurrently with the job's deletions: a file found missing counts as
// deleted while referenced only if the referencing checkpoint's metadata is
// still there afterwards (a trim or discard deletes the metadata before any
// file of a checkpoint it references, and a deleted metadata file never
// comes back).
func (a *retentionAuditor) audit(when string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ctx := context.Background()
	a.audits++
	hook := strings.HasPrefix(when, "checkpoint ")
	if hook {
		a.hooks++
	}
	entries, err := a.local.List(ctx)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			a.violate(when, "list", fmt.Sprintf("listing: %v", err))
		}
		return
	}
	// referenced holds the paths, relative to the directory, of every file
	// a complete checkpoint present references, and of its metadata.
	referenced := map[string]bool{}
	complete, incomplete := 0, 0
	for _, e := range entries {
		if !e.Complete {
			incomplete++
			continue
		}
		data, err := a.local.ReadMetadata(ctx, e.ID)
		if errors.Is(err, storage.ErrNotFound) {
			continue // deleted since the listing
		}
		if err != nil {
			a.violate(when, fmt.Sprintf("%d/meta", e.ID), fmt.Sprintf("checkpoint %d: metadata does not verify: %v", e.ID, err))
			continue
		}
		complete++
		referenced[filepath.Join(storage.CheckpointDirName(e.ID), storage.MetadataName)] = true
		if fi, err := os.Stat(filepath.Join(e.Path, storage.MetadataName)); err == nil {
			a.maxMeta = max(a.maxMeta, fi.Size())
		}
		m, err := checkpoint.DecodeMetadata(data)
		if err != nil {
			a.violate(when, fmt.Sprintf("%d/meta", e.ID), fmt.Sprintf("checkpoint %d: %v", e.ID, err))
			continue
		}
		a.maxFull = max(a.maxFull, m.Size())
		for _, s := range m.Tasks {
			var hs []storage.Handle
			if s.State != nil {
				hs = append(hs, *s.State)
			}
			hs = append(hs, s.Shared...)
			for _, h := range hs {
				referenced[filepath.Join(storage.CheckpointDirName(h.Checkpoint), h.Name)] = true
				_, err := a.local.ReadFile(ctx, h)
				if err == nil {
					a.verified++
					continue
				}
				if _, merr := a.local.ReadMetadata(ctx, e.ID); errors.Is(merr, storage.ErrNotFound) {
					continue // the checkpoint was deleted or trimmed meanwhile
				}
				if a.reportedFailed(e.ID) {
					continue // no checkpoint: the ledger says it failed, the next recovery deletes it
				}
				a.violate(when, fmt.Sprintf("%d:%s", e.ID, h.Ref()), fmt.Sprintf(
					"complete checkpoint %d (task %v) references %s, which does not verify: %v", e.ID, s.Task, h.Ref(), err))
			}
		}
	}
	a.maxComplete = max(a.maxComplete, complete)
	a.maxIncomplete = max(a.maxIncomplete, incomplete)
	bytes, garbage := dirBytes(a.dir, referenced)
	if hook {
		a.byHook = append(a.byHook, bytes)
	}
	failed := len(a.outstanding)
	p := a.peaks[failed]
	if p == nil {
		p = &peak{}
		a.peaks[failed] = p
	}
	state := fmt.Sprintf("%s: %d complete and %d incomplete checkpoints, %d failed deletions outstanding", when, complete, incomplete, failed)
	if bytes > p.bytes {
		p.bytes, p.bytesAt = bytes, state+"\n"+dirListing(a.dir, referenced)
	}
	if garbage > p.garbage {
		p.garbage, p.garbageAt = garbage, state+"\n"+dirListing(a.dir, referenced)
	}
}

// peak is the most bytes, and unreferenced bytes, measured, with where.
type peak struct {
	bytes, garbage     int64
	bytesAt, garbageAt string
}

// reportedFailed reports whether the ledger records checkpoint id as failed.
func (a *retentionAuditor) reportedFailed(id int64) bool {
	data, err := a.local.ReadLedger(context.Background())
	if err != nil {
		return false
	}
	l, err := checkpoint.DecodeLedger(data)
	return err == nil && l.IsFailed(id)
}

func (a *retentionAuditor) violate(when, key, msg string) {
	if a.seen[key] {
		return
	}
	a.seen[key] = true
	a.violations = append(a.violations, when+": "+msg)
}

// auditReport is what the auditor found, measured against the bounds.
type auditReport struct {
	audits, hooks, verified    int
	maxFull, maxMeta           int64
	maxComplete, maxIncomplete int
	byHook                     []int64
	violations                 []string
	// maxBytes and maxGarbage are the most bytes and unreferenced bytes
	// measured, with where; maxRatio and maxGarbageRatio the largest ratios
	// to their bound at the time; maxFailed the most checkpoints whose last
	// trim or discard had failed.
	maxBytes, maxGarbage      int64
	maxBytesAt, maxGarbageAt  string
	maxRatio, maxGarbageRatio float64
	maxFailed                 int
	// overBound and overGarbage describe the first measurement above its
	// bound, if any.
	overBound, overGarbage string
}

func (a *retentionAuditor) report() auditReport {
	a.mu.Lock()
	defer a.mu.Unlock()
	r := auditReport{audits: a.audits, hooks: a.hooks, verified: a.verified, maxFull: a.maxFull, maxMeta: a.maxMeta,
		maxComplete: a.maxComplete, maxIncomplete: a.maxIncomplete, byHook: slices.Clone(a.byHook), violations: slices.Clone(a.violations)}
	for _, failed := range slices.Sorted(maps.Keys(a.peaks)) {
		p := a.peaks[failed]
		r.maxFailed = max(r.maxFailed, failed)
		bound, gbound := longRetentionBound(a.maxFull, a.maxMeta, failed), garbageBound(a.maxFull, a.maxMeta, failed)
		if p.bytes > r.maxBytes {
			r.maxBytes, r.maxBytesAt = p.bytes, strings.SplitN(p.bytesAt, "\n", 2)[0]
		}
		if p.garbage > r.maxGarbage {
			r.maxGarbage, r.maxGarbageAt = p.garbage, strings.SplitN(p.garbageAt, "\n", 2)[0]
		}
		r.maxRatio = max(r.maxRatio, float64(p.bytes)/float64(bound))
		r.maxGarbageRatio = max(r.maxGarbageRatio, float64(p.garbage)/float64(gbound))
		if p.bytes > bound && r.overBound == "" {
			r.overBound = fmt.Sprintf("%d bytes > bound %d (largest full state %d, metadata %d) at %s", p.bytes, bound, a.maxFull, a.maxMeta, p.bytesAt)
		}
		if p.garbage > gbound && r.overGarbage == "" {
			r.overGarbage = fmt.Sprintf("%d bytes in files no complete checkpoint references > bound %d (largest full state %d, metadata %d) at %s",
				p.garbage, gbound, a.maxFull, a.maxMeta, p.garbageAt)
		}
	}
	return r
}

// firstOver returns after how many completed checkpoints the directory
// first held more than the bound with no failed deletion outstanding, -1 if
// never.
func (r auditReport) firstOver() int {
	bound := longRetentionBound(r.maxFull, r.maxMeta, 0)
	return slices.IndexFunc(r.byHook, func(b int64) bool { return b > bound })
}

// quarters returns the largest directory size after a completed checkpoint
// in each quarter of the run: a leak shows as growth from one to the next.
func (r auditReport) quarters() []int64 {
	var q []int64
	n := len(r.byHook)
	for i := range 4 {
		part := r.byHook[i*n/4 : (i+1)*n/4]
		if len(part) > 0 {
			q = append(q, slices.Max(part))
		}
	}
	return q
}

// dirBytes returns the size of every regular file under dir, and of those
// whose path relative to dir is not in referenced, ignoring what disappears
// while it walks.
func dirBytes(dir string, referenced map[string]bool) (all, unreferenced int64) {
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		all += fi.Size()
		if rel, err := filepath.Rel(dir, path); err == nil && !referenced[rel] {
			unreferenced += fi.Size()
		}
		return nil
	})
	return all, unreferenced
}

// dirListing lists the files under dir with their sizes, marking those not
// in referenced, for a failure's message.
func dirListing(dir string, referenced map[string]bool) string {
	var b strings.Builder
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		if fi, err := d.Info(); err == nil {
			rel, _ := filepath.Rel(dir, path)
			mark := " "
			if !referenced[rel] {
				mark = "*"
			}
			fmt.Fprintf(&b, "  %s %8d %s\n", mark, fi.Size(), rel)
		}
		return nil
	})
	return b.String() + "  (* referenced by no complete checkpoint)"
}

// checkRetainedExactly runs the retention pass a next start runs and checks
// what stays: the newest retain complete checkpoints, whole, and of older
// ones exactly the files those reference, nothing else.
func checkRetainedExactly(t *testing.T, st *storage.Local, retain int) {
	t.Helper()
	ctx := context.Background()
	refs := func(data []byte) ([]storage.FileRef, error) {
		m, err := checkpoint.DecodeMetadata(data)
		if err != nil {
			return nil, err
		}
		return m.SharedFiles(), nil
	}
	entries, err := st.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var latest int64
	for _, e := range entries {
		if e.Complete {
			latest = e.ID
		}
	}
	if _, err := storage.Retain(ctx, st, retain, latest, refs); err != nil {
		t.Fatalf("retention pass after the run: %v", err)
	}
	if entries, err = st.List(ctx); err != nil {
		t.Fatal(err)
	}
	var complete []int64
	for _, e := range entries {
		if e.Complete {
			complete = append(complete, e.ID)
		}
	}
	if len(complete) != retain {
		t.Errorf("%d complete checkpoints after the retention pass (%v), want %d", len(complete), complete, retain)
	}
	referenced := map[int64][]string{}
	for _, id := range complete {
		data, err := st.ReadMetadata(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		rs, err := refs(data)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			referenced[r.Checkpoint] = append(referenced[r.Checkpoint], r.Name)
		}
	}
	wrong := 0
	for _, e := range entries {
		if e.Complete {
			continue
		}
		des, err := os.ReadDir(e.Path)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, de := range des {
			names = append(names, de.Name())
		}
		want := slices.Compact(slices.Sorted(slices.Values(referenced[e.ID])))
		if !slices.Equal(names, want) {
			if wrong++; wrong <= 5 {
				t.Errorf("checkpoint %d holds %q after the retention pass, want exactly the files retained checkpoints reference, %q", e.ID, names, want)
			}
		}
	}
	if wrong > 5 {
		t.Errorf("… %d checkpoints in all hold other files than the retained ones reference", wrong)
	}
}

// warnCounter is a slog handler that counts warnings and errors by message.
type warnCounter struct {
	mu       sync.Mutex
	n        map[string]int
	examples map[string]string
}

func (w *warnCounter) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (w *warnCounter) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n == nil {
		w.n, w.examples = map[string]int{}, map[string]string{}
	}
	w.n[r.Message]++
	if _, ok := w.examples[r.Message]; !ok {
		w.examples[r.Message] = b.String()
	}
	return nil
}

func (w *warnCounter) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnCounter) WithGroup(string) slog.Handler      { return w }

// count returns how many warnings had a message starting with prefix.
func (w *warnCounter) count(prefix string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for m, k := range w.n {
		if strings.HasPrefix(m, prefix) {
			n += k
		}
	}
	return n
}

// example returns one warning whose message starts with prefix, with its
// attributes.
func (w *warnCounter) example(prefix string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	for m, e := range w.examples {
		if strings.HasPrefix(m, prefix) {
			return e
		}
	}
	return ""
}
