package runtime_test

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/connector/datagen"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/storage"
	"github.com/ingest-engine/ingest/storage/storagetest"
	"github.com/ingest-engine/ingest/stream"
)

// The storage fault matrix (issue #5, docs/reliability.md "Storage faults"). Each row runs the
// count pipeline (datagen → key by → per-key count in keyed state → transactional sink) on a
// Local over a storagetest.FaultFS over a storagetest.CrashFS, lets two checkpoints complete, then turns
// one kind of filesystem fault on for every checkpoint after that, and checks DESIGN.md §3
// invariant 1 and the restart rules:
//
//   - the checkpoints the fault hits fail (or time out), for the reason injected, and only they:
//     Stats().Failed counts exactly those;
//   - records keep flowing while they fail;
//   - the recovery point (storage.Latest, Stats().Latest) stays the last complete checkpoint;
//   - the (tolerable_failures+1)-th consecutive failure restarts the job, which restores exactly
//     that checkpoint (Stats().RestoredFrom), and later checkpoints complete once the fault is gone
//     (it lasts as long as the first attempt);
//   - checkpoint ids strictly increase across restarts;
//   - after a graceful stop the committed output is exactly the input up to the final checkpoint's
//     source positions: nothing lost, nothing twice, per-key counts unbroken.
//
// Faults of reads (list, read) can only hit a recovery: those rows fail the first recoveries after
// the restart and check that the job neither gives up on the recovery point nor falls back to an
// older checkpoint. The crash rows crash the filesystem mid-checkpoint (keeping only what was
// synced), and start a new Job on what survived.

const (
	sfKeys = 10
	// sfTolerable is checkpoint.Options.TolerableFailures of every row: the third failure in a row
	// fails the job.
	sfTolerable = 2
	// sfRecoveryFailures is how many recoveries the list and read faults fail.
	sfRecoveryFailures = 2
	// sfTimeout is the checkpoint timeout of the slow-write row; its writes sleep sfSlow each (or
	// until the job fails: a loaded machine must not time out checkpoints the fault does not hit).
	sfTimeout = time.Second
	sfSlow    = 3 * sfTimeout
	// sfRate is the datagen rate of every row, records per second.
	sfRate = 10_000
)

// Errors the rows inject, one per kind of call, so a failure's reason tells which fault caused it.
var (
	errSFWrite   = errors.New("injected write error")
	errSFSync    = errors.New("injected fsync error")
	errSFRename  = errors.New("injected rename error")
	errSFSyncDir = errors.New("injected directory fsync error")
	errSFList    = errors.New("injected directory listing error")
	errSFRead    = errors.New("injected read error")
	errSFRemove  = errors.New("injected remove error")
)

// sfGate decides which calls a row's fault hits: once armed, calls on files of a checkpoint while
// the job is in its first attempt. It records the checkpoints hit and what the job looked like when
// each was first hit.
type sfGate struct {
	job   *runtime.Job   // set before Run
	view  *storage.Local // the same directory without faults, to read the recovery point
	armed atomic.Bool

	mu sync.Mutex
	// ids are the checkpoints the fault hit, in order.
	ids []int64
	// first is the job's Stats when the fault first hit; at is its Stats at each first hit of an
	// id, and latest storage.Latest's id then.
	first  runtime.Stats
	at     []runtime.Stats
	latest []int64
	// recoveryHits counts calls failed by recoveryFault.
	recoveryHits int
}

// hit reports whether the fault applies to a call on path.
func (g *sfGate) hit(path string) bool {
	if !g.armed.Load() {
		return false
	}
	s := g.job.Stats()
	if s.Restarts > 0 {
		return false
	}
	id, ok := storagetest.PathCheckpoint(path)
	if !ok {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !slices.Contains(g.ids, id) {
		if len(g.ids) == 0 {
			g.first = s
		}
		latest, _, _, err := storage.Latest(context.Background(), g.view)
		if err != nil {
			latest = -1
		}
		g.ids = append(g.ids, id)
		g.at = append(g.at, s)
		g.latest = append(g.latest, latest)
	}
	return true
}

// recoveryFault reports whether a read fault applies now: during the first sfRecoveryFailures
// recoveries after the restart.
func (g *sfGate) recoveryFault() bool {
	if !g.armed.Load() {
		return false
	}
	r := g.job.Stats().Restarts
	if r < 1 || r > sfRecoveryFailures {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.recoveryHits++
	return true
}

func (g *sfGate) snapshot() (ids []int64, first runtime.Stats, at []runtime.Stats, latest []int64, recoveryHits int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.ids), g.first, slices.Clone(g.at), slices.Clone(g.latest), g.recoveryHits
}

// failOn fails calls of op that the gate lets through with err.
func failOn(op storagetest.FSOp, err error) func(*storagetest.FaultFS, *sfGate) {
	return func(f *storagetest.FaultFS, g *sfGate) {
		f.FailWhen(func(o storagetest.FSOp, path string) error {
			if o == op && g.hit(path) {
				return err
			}
			return nil
		})
	}
}

// failMetadataSyncDir fails the directory fsync of metadata writes (the one that follows the
// rename of the metadata into a checkpoint's directory): Discard's fsyncs are not hit. The gate
// sees the rename first, so it reads the recovery point before the metadata is visible.
func failMetadataSyncDir(f *storagetest.FaultFS, g *sfGate) {
	var mu sync.Mutex
	renamed := map[int64]bool{}
	f.FailWhen(func(op storagetest.FSOp, path string) error {
		id, ok := storagetest.PathCheckpoint(path)
		if !ok || !g.armed.Load() {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		switch {
		case op == storagetest.FSRename && g.hit(path):
			renamed[id] = true
		case op == storagetest.FSSyncDir && renamed[id] && g.hit(path):
			return errSFSyncDir
		}
		return nil
	})
}

// failRecovery fails state writes like failOn(FSWrite) to force a restart, and op (a read) during
// the recoveries that follow.
func failRecovery(op storagetest.FSOp, err error) func(*storagetest.FaultFS, *sfGate) {
	return func(f *storagetest.FaultFS, g *sfGate) {
		f.FailWhen(func(o storagetest.FSOp, path string) error {
			switch {
			case o == storagetest.FSWrite && g.hit(path):
				return errSFWrite
			case o == op && g.recoveryFault():
				return err
			}
			return nil
		})
	}
}

// isStateFile reports whether path is a subtask's state file (runtime's stateFileName).
func isStateFile(path string) bool { return strings.HasPrefix(filepath.Base(path), "state-") }

// isMetadataTmp reports whether path is a metadata file before its rename.
func isMetadataTmp(path string) bool {
	b := filepath.Base(path)
	return strings.HasPrefix(b, ".tmp-") && strings.Contains(b, storage.MetadataName)
}

// isErr matches a failure reason wrapping target.
func isErr(target error) func(error) bool {
	return func(err error) bool { return errors.Is(err, target) }
}

// sfLog keeps the job's log records of checkpoint failures and restarts.
type sfLog struct {
	mu sync.Mutex
	// failed maps each failed checkpoint to its reason; restarts are the errors of the attempts
	// that failed, in order.
	failed   map[int64]error
	restarts []error
}

func newSFLog() *sfLog { return &sfLog{failed: map[int64]error{}} }

func (l *sfLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *sfLog) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *sfLog) WithGroup(string) slog.Handler            { return l }
func (l *sfLog) Handle(_ context.Context, r slog.Record) error {
	var id int64
	var err error
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "checkpoint":
			id = a.Value.Int64()
		case "err":
			err, _ = a.Value.Any().(error)
		}
		return true
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case r.Message == "checkpoint failed":
		l.failed[id] = err
	case strings.HasPrefix(r.Message, "job failed; restarting"):
		l.restarts = append(l.restarts, err)
	}
	return nil
}

func (l *sfLog) snapshot() (map[int64]error, []error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	failed := make(map[int64]error, len(l.failed))
	for k, v := range l.failed {
		failed[k] = v
	}
	return failed, slices.Clone(l.restarts)
}

// sfIDs records, per attempt, the checkpoint ids a job writes state or metadata for, by observing
// its storage through a storagetest.Faulty that injects nothing.
type sfIDs struct {
	mu  sync.Mutex
	job *runtime.Job // set before Run
	// ids[attempt] are the ids written in that attempt, in call order.
	ids map[int64][]int64
	// stop, once closed, ends the recording (a crash: later calls cannot act).
	stop <-chan struct{}
}

// observe returns st wrapped so that r records the job's checkpoint ids.
func (r *sfIDs) observe(st storage.Storage) storage.Storage {
	f := storagetest.NewFaulty(st)
	f.FailWhen(func(op storagetest.Op, id int64, _ string) error {
		if op != storagetest.OpWriteFile && op != storagetest.OpWriteMetadata {
			return nil
		}
		if r.stop != nil {
			select {
			case <-r.stop:
				return nil
			default:
			}
		}
		attempt := r.job.Stats().Restarts
		r.mu.Lock()
		defer r.mu.Unlock()
		r.ids[attempt] = append(r.ids[attempt], id)
		return nil
	})
	return f
}

// all returns every id recorded.
func (r *sfIDs) all() []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []int64
	for _, ids := range r.ids {
		out = append(out, ids...)
	}
	return out
}

// checkIncreasing asserts that every checkpoint id an attempt used is greater than every id an
// earlier attempt used ("Checkpoint IDs keep increasing across restarts").
func (r *sfIDs) checkIncreasing(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	var attempts []int64
	for a := range r.ids {
		attempts = append(attempts, a)
	}
	slices.Sort(attempts)
	for i := 1; i < len(attempts); i++ {
		prev, cur := r.ids[attempts[i-1]], r.ids[attempts[i]]
		if lo, hi := slices.Min(cur), slices.Max(prev); lo <= hi {
			t.Errorf("attempt %d used checkpoint id %d after attempt %d used %d: ids must keep increasing across restarts (attempt %d: %v, attempt %d: %v)",
				attempts[i], lo, attempts[i-1], hi, attempts[i-1], compactIDs(prev), attempts[i], compactIDs(cur))
		}
	}
}

// compactIDs returns ids without repeats, in first-seen order.
func compactIDs(ids []int64) []int64 {
	var out []int64
	for _, id := range ids {
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

// sfCheckpointOptions are the checkpoint options of every row.
func sfCheckpointOptions(timeout time.Duration) checkpoint.Options {
	ck := fastCheckpoints(20 * time.Millisecond)
	ck.TolerableFailures = sfTolerable
	ck.Retain = 2 // an older complete checkpoint exists that a recovery must not fall back to
	if timeout > 0 {
		ck.Timeout = timeout
	}
	return ck
}

// sfWaitFor polls cond until it holds; Run ending first fails the test.
func sfWaitFor(t *testing.T, done <-chan error, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(runTimeout)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case err := <-done:
			t.Fatalf("Run returned %v while waiting for %s", err, what)
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		case <-tick.C:
		}
	}
}

// sfNewFS returns a FaultFS over a new CrashFS, a Local on it at /ck, and a view of the same
// directory that no fault reaches.
func sfNewFS(t *testing.T) (*storagetest.FaultFS, *storagetest.CrashFS, *storage.Local, *storage.Local) {
	t.Helper()
	base := storagetest.NewCrashFS()
	f := storagetest.NewFaultFS(base)
	local, err := f.NewLocal("/ck")
	if err != nil {
		t.Fatal(err)
	}
	view, err := base.NewLocal("/ck")
	if err != nil {
		t.Fatal(err)
	}
	return f, base, local, view
}

func TestStorageFaultMatrix(t *testing.T) {
	for _, row := range []struct {
		name string
		// arm injects the fault through the gate.
		arm func(*storagetest.FaultFS, *sfGate)
		// reason matches the reason of a checkpoint the fault failed.
		reason func(error) bool
		// timeout is the checkpoint timeout; 0 keeps the default.
		timeout time.Duration
		// recoveryFault: the row also fails sfRecoveryFailures recoveries with this error.
		recoveryFault error
		// healAtFailure: heal the filesystem once the fault failed the job, so that the
		// shutdown does not wait out writes that sleep on.
		healAtFailure bool
	}{
		{name: "write error", arm: failOn(storagetest.FSWrite, errSFWrite), reason: isErr(errSFWrite)},
		{name: "fsync error", arm: failOn(storagetest.FSSync, errSFSync), reason: isErr(errSFSync)},
		{name: "metadata rename error", arm: failOn(storagetest.FSRename, errSFRename), reason: isErr(errSFRename)},
		{name: "directory fsync error", arm: failMetadataSyncDir, reason: isErr(errSFSyncDir)},
		{
			name: "no space left on device",
			arm: func(f *storagetest.FaultFS, g *sfGate) {
				// One byte fits: the first write the gate lets through is cut short, as on a full disk.
				f.NoSpaceAfter(1, g.hit)
			},
			reason: isErr(syscall.ENOSPC),
		},
		{
			name: "slow writes past the timeout",
			// State files: the checkpoint times out waiting for acknowledgements.
			arm: func(f *storagetest.FaultFS, g *sfGate) {
				f.SlowWrites(sfSlow, func(path string) bool { return isStateFile(path) && g.hit(path) })
			},
			reason:        func(err error) bool { return err != nil && strings.Contains(err.Error(), "timed out") },
			timeout:       sfTimeout,
			healAtFailure: true,
		},
		{
			name: "metadata write past the timeout",
			// Every subtask acknowledged; the write of the metadata's temporary file hangs past the
			// checkpoint's deadline. The write is abandoned (the storage never renames it) and the
			// checkpoint fails. Each late write wakes half a timeout after its deadline, while the
			// first attempt still runs, and must not make its checkpoint complete: the restart
			// would then restore it instead of the recovery point. The first attempt cannot delete
			// the failed checkpoints' directories, so that a late rename would find its directory
			// (Discard would otherwise hide a missing fence); the recovery after it can.
			arm: func(f *storagetest.FaultFS, g *sfGate) {
				f.SlowWrites(sfTimeout*3/2, func(path string) bool { return isMetadataTmp(path) && g.hit(path) })
				f.FailWhen(func(op storagetest.FSOp, path string) error {
					id, ok := storagetest.PathCheckpoint(path)
					if op != storagetest.FSRemoveAll || !ok || g.job.Stats().Restarts > 0 {
						return nil
					}
					g.mu.Lock()
					defer g.mu.Unlock()
					if slices.Contains(g.ids, id) {
						return errSFRemove
					}
					return nil
				})
			},
			reason: func(err error) bool {
				return err != nil && strings.Contains(err.Error(), "timed out") && strings.Contains(err.Error(), "metadata write")
			},
			timeout:       sfTimeout,
			healAtFailure: true,
		},
		{name: "list error at recovery", arm: failRecovery(storagetest.FSReadDir, errSFList), reason: isErr(errSFWrite), recoveryFault: errSFList},
		{name: "read error at recovery", arm: failRecovery(storagetest.FSReadFile, errSFRead), reason: isErr(errSFWrite), recoveryFault: errSFRead},
	} {
		t.Run(row.name, func(t *testing.T) {
			t.Parallel()
			f, _, local, view := sfNewFS(t)
			store := newTxStore[keyCount]()
			log := newSFLog()
			ids := &sfIDs{ids: map[int64][]int64{}}
			p := countPipeline(t, datagen.Config{Keys: sfKeys, Rate: sfRate}, 2, 2, store, nil)
			job, err := p.NewJob(stream.RunOptions{
				Storage: ids.observe(local), Checkpoint: sfCheckpointOptions(row.timeout),
				Restart: quickRestarts(5), Log: slog.New(log),
			})
			if err != nil {
				t.Fatal(err)
			}
			ids.job = job
			g := &sfGate{job: job, view: view}
			row.arm(f, g)

			ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- job.Run(ctx) }()
			sfWaitFor(t, done, "two complete checkpoints", func() bool { return job.Stats().Completed >= 2 })
			g.armed.Store(true)
			wantRestarts := int64(1)
			if row.recoveryFault != nil {
				wantRestarts += sfRecoveryFailures
			}
			healed := false
			sfWaitFor(t, done, "the restart and two checkpoints after it", func() bool {
				s := job.Stats()
				_, first, _, _, _ := g.snapshot()
				if row.healAtFailure && !healed && first.Completed > 0 && s.Failed >= first.Failed+sfTolerable+1 {
					f.Heal()
					healed = true
				}
				return s.Restarts >= wantRestarts && first.Completed > 0 && s.Completed >= first.Completed+2
			})
			job.Stop()
			if err := <-done; err != nil {
				t.Fatalf("Run after Stop = %v, want nil", err)
			}

			s := job.Stats()
			hit, first, at, latest, recoveryHits := g.snapshot()
			failed, restarts := log.snapshot()
			recoveryPoint := first.Latest
			t.Logf("recovery point %d; fault hit checkpoints %v; stats %+v", recoveryPoint, hit, s)

			// The checkpoints the fault hit failed, for the injected reason, and nothing else failed.
			if len(hit) != sfTolerable+1 {
				t.Errorf("the fault hit checkpoints %v, want %d: the (tolerable_failures+1)-th consecutive failure must restart the job", hit, sfTolerable+1)
			}
			if s.Failed != int64(len(hit)) || len(failed) != len(hit) {
				t.Errorf("Stats().Failed = %d, failures logged for %v; want exactly the %d checkpoints the fault hit (%v)", s.Failed, failed, len(hit), hit)
			}
			for _, id := range hit {
				if reason, ok := failed[id]; !ok || !row.reason(reason) {
					t.Errorf("checkpoint %d: failure logged %v (%v), want one caused by the %s", id, ok, reason, row.name)
				}
			}
			// The pipeline kept running while its checkpoints failed.
			if len(at) > 1 && at[len(at)-1].Records <= at[0].Records {
				t.Errorf("records sent: %d when the first failing checkpoint was hit, %d at the last: the pipeline stalled", at[0].Records, at[len(at)-1].Records)
			}
			// The recovery point stayed the last complete checkpoint while they failed: read when
			// the fault first hit each of them, so after the previous one failed.
			for i, id := range hit {
				if at[i].Latest != recoveryPoint || latest[i] != recoveryPoint {
					t.Errorf("when checkpoint %d was hit: Stats().Latest %d, storage.Latest %d; want the last complete checkpoint %d", id, at[i].Latest, latest[i], recoveryPoint)
				}
				if at[i].Restarts != 0 {
					t.Errorf("checkpoint %d was hit after a restart: the fault must last one attempt", id)
				}
			}
			// One restart for the failures, one more for each failed recovery; the job restored the
			// last complete checkpoint, never an older one.
			if s.Restarts != wantRestarts {
				t.Errorf("Restarts = %d, want %d", s.Restarts, wantRestarts)
			}
			if s.RestoredFrom != recoveryPoint || recoveryPoint == 0 {
				t.Errorf("restored checkpoint %d, want %d, the last complete before the fault", s.RestoredFrom, recoveryPoint)
			}
			if row.recoveryFault != nil {
				if recoveryHits != sfRecoveryFailures {
					t.Errorf("the %s hit %d calls, want one in each of %d recoveries", row.name, recoveryHits, sfRecoveryFailures)
				}
				if len(restarts) != int(wantRestarts) {
					t.Fatalf("restarts logged: %v, want %d", restarts, wantRestarts)
				}
				for i, err := range restarts[1:] {
					if !errors.Is(err, row.recoveryFault) {
						t.Errorf("restart %d: failed attempt's error %v, want one wrapping %v", i+2, err, row.recoveryFault)
					}
				}
			}
			ids.checkIncreasing(t)

			// Exactly once: the final checkpoint's output and everything before it, once.
			m := latestMetadata(t, view)
			if !m.Final || m.ID != s.Latest || (len(hit) > 0 && m.ID <= slices.Max(hit)) {
				t.Errorf("recovery point %d (final %v), Stats().Latest %d: want a final checkpoint after the failed %v", m.ID, m.Final, s.Latest, hit)
			}
			verifyCounts(t, store.values(), sfKeys, 2, sourcePositions(t, m, 2))
			checkStorageClean(t, view, nil)
		})
	}
}

// The crash rows: the filesystem crashes mid-checkpoint (only what was synced survives) and the
// process dies; a new Job on the surviving files restores the newest checkpoint that was durable,
// uses only ids above every checkpoint that survived, and ends with exact output.
func TestStorageFaultCrash(t *testing.T) {
	for _, row := range []struct {
		name string
		// crashAt says whether to crash before the call (op, path), given the gate.
		crashAt func(g *sfGate) func(storagetest.FSOp, string) bool
		// durable: the checkpoint the crash hit was complete on disk before the crash.
		durable bool
	}{
		{
			name: "crash at a state file's fsync",
			crashAt: func(g *sfGate) func(storagetest.FSOp, string) bool {
				return func(op storagetest.FSOp, path string) bool {
					return op == storagetest.FSSync && isStateFile(path) && g.hit(path)
				}
			},
		},
		{
			name: "crash before the metadata rename",
			crashAt: func(g *sfGate) func(storagetest.FSOp, string) bool {
				return func(op storagetest.FSOp, path string) bool { return op == storagetest.FSRename && g.hit(path) }
			},
		},
		{
			name: "crash right after the metadata is durable",
			crashAt: func(g *sfGate) func(storagetest.FSOp, string) bool {
				var renamed atomic.Int64
				var synced atomic.Bool
				return func(op storagetest.FSOp, path string) bool {
					if synced.Load() {
						return true // the first call after the metadata's directory fsync returned
					}
					id, ok := storagetest.PathCheckpoint(path)
					switch {
					case !ok || !g.armed.Load():
					case op == storagetest.FSRename:
						renamed.Store(id)
					case op == storagetest.FSSyncDir && id == renamed.Load() && g.hit(path):
						synced.Store(true)
					}
					return false
				}
			},
			durable: true,
		},
	} {
		t.Run(row.name, func(t *testing.T) {
			t.Parallel()
			f, _, local, view := sfNewFS(t)
			store := newTxStore[keyCount]()
			ck := sfCheckpointOptions(0)
			ids1 := &sfIDs{ids: map[int64][]int64{}, stop: f.Crashed()}
			job1 := newJob(t, countPipeline(t, datagen.Config{Keys: sfKeys, Rate: sfRate}, 2, 2, store, nil), ids1.observe(local), ck, quickRestarts(5))
			ids1.job = job1
			g := &sfGate{job: job1, view: view}
			f.CrashWhen(row.crashAt(g))

			ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- job1.Run(ctx) }()
			sfWaitFor(t, done, "two complete checkpoints", func() bool { return job1.Stats().Completed >= 2 })
			g.armed.Store(true)
			select {
			case <-f.Crashed():
			case err := <-done:
				t.Fatalf("Run returned %v before the crash", err)
			case <-time.After(runTimeout):
				t.Fatal("no crash")
			}
			cancel() // the process dies with its filesystem
			<-done

			hit, first, _, _, _ := g.snapshot()
			if len(hit) != 1 {
				t.Fatalf("the crash hit checkpoints %v, want one", hit)
			}
			crashed := hit[0]
			want := first.Latest // the last complete checkpoint
			if row.durable {
				want = crashed
			}
			survivor, err := f.Survivor().NewLocal("/ck")
			if err != nil {
				t.Fatal(err)
			}
			entries, err := survivor.List(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			got, _, _, err := storage.Latest(context.Background(), survivor)
			if err != nil || got != want {
				t.Fatalf("recovery point after the crash: %d, %v; want %d (checkpoint %d was hit, durable %v; entries %+v)", got, err, want, crashed, row.durable, entries)
			}
			var survived int64
			for _, e := range entries {
				survived = max(survived, e.ID)
				if e.ID == crashed && e.Complete != row.durable {
					t.Errorf("checkpoint %d: complete %v after the crash, want %v", crashed, e.Complete, row.durable)
				}
			}

			// A new process on the surviving files.
			ids2 := &sfIDs{ids: map[int64][]int64{}}
			job2 := newJob(t, countPipeline(t, datagen.Config{Keys: sfKeys, Rate: sfRate}, 2, 2, store, nil), ids2.observe(survivor), ck, quickRestarts(0))
			ids2.job = job2
			if err := runUntilStopped(t, job2, func() bool { return job2.Stats().Completed >= 2 }); err != nil {
				t.Fatalf("Run on the surviving files = %v, want nil", err)
			}
			s := job2.Stats()
			if s.RestoredFrom != want || s.Restarts != 0 {
				t.Errorf("new job: restored %d with %d restarts, want %d without restart", s.RestoredFrom, s.Restarts, want)
			}
			used := ids2.all()
			if len(used) == 0 {
				t.Fatal("the new job wrote no checkpoint")
			}
			if lo := slices.Min(used); lo <= max(survived, crashed) {
				t.Errorf("the new job used checkpoint id %d; want ids above %d, the newest checkpoint the crashed process left on disk (it crashed in %d)", lo, survived, crashed)
			}
			ids2.checkIncreasing(t)

			m := latestMetadata(t, survivor)
			if !m.Final || m.ID != s.Latest {
				t.Errorf("recovery point %d (final %v), Stats().Latest %d: want the final checkpoint", m.ID, m.Final, s.Latest)
			}
			verifyCounts(t, store.values(), sfKeys, 2, sourcePositions(t, m, 2))
			checkStorageClean(t, survivor, nil)
		})
	}
}
