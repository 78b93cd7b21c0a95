//go:build iceberg

package iceberg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/internal/failpoint"
	"github.com/ingest-engine/ingest/runtime"
)

// The snapshot summary properties and the table property the committer
// writes.
const (
	propPipeline   = "ingest.pipeline"
	propSink       = "ingest.sink"
	propJob        = "ingest.job-id"
	propCheckpoint = "ingest.checkpoint-id"
	propPrepared   = "ingest.prepared-at"
	// propProgress + "<pipeline>.<sink>" is a table property holding the
	// job and the checkpoint its last commit published (progress, JSON).
	// It survives the expiry of the snapshots that record the same.
	propProgress = "ingest.sink."
)

// progress is the value of the table's progress property.
type progress struct {
	Job        string `json:"job"`
	Checkpoint int64  `json:"checkpoint"`
}

// commitAttempts is how many times a change other than a commit (adding
// the input's columns) that lost a race with another writer is tried.
const commitAttempts = 10

// A commit that lost a race with another writer is tried again from the
// table's fresh metadata, after a random pause of up to 10 ms, 20 ms, … 320
// ms (commitPause), for as long as the races it loses are races: each time,
// the table it loads next must hold another writer's commit made since the
// previous attempt's load. Several writers committing to one table make
// progress together (every race has a winner), so a fixed number of tries
// fails a commit that merely lost to a busy neighbour (two pipelines
// committing every few tens of milliseconds on a loaded machine lose ten
// in a row). The bounds:
//
//   - commitRaceTimeout: the time a commit goes on losing races before it
//     fails (and the job restarts);
//   - commitStuckAttempts: lost races in a row after which the table still
//     holds no commit newer than the attempt's (a requirement that fails on
//     the table as it is can never be met; a catalog serving stale metadata
//     gets a few tries).
const (
	commitRaceTimeout   = 2 * time.Minute
	commitStuckAttempts = 5
)

// commitPause is the random pause before try attempt+1 of a commit.
func commitPause(attempt int) time.Duration {
	return time.Duration(rand.Int64N(int64(10*time.Millisecond) << min(attempt, 5)))
}

// committer publishes the files of complete checkpoints. It keeps no state
// that a recovery needs: the table says what it published.
type committer struct {
	s    *Sink
	mu   sync.Mutex
	last time.Time // when this process last published
}

// Commit publishes the files c's committables name that the table does not
// hold yet, in one catalog transaction (see the package documentation). A
// commit within the commit interval of the last one is held back, unless
// runtime.PublishNow. A checkpoint the table records for the job is
// recognised by its snapshot summaries (or the progress property) and not
// published again.
func (c *committer) Commit(ctx context.Context, jobID string, cm checkpoint.Commit) error {
	s := c.s
	if len(cm.Committables) == 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.cfg.CommitInterval > 0 && !runtime.PublishNow(ctx) && !c.last.IsZero() && time.Since(c.last) < s.cfg.CommitInterval {
		return nil // the subtasks offer the files again at their next barrier
	}
	var files []pendingFile
	seen := map[string]bool{}
	for _, data := range cm.Committables {
		fs, err := decodeCommittable(data)
		if err != nil {
			return s.errorf("committing checkpoint %d: %w (%w)", cm.Checkpoint, err, runtime.ErrIncompatible)
		}
		for _, f := range fs {
			if !seen[f.Path] {
				seen[f.Path] = true
				files = append(files, f)
			}
		}
	}
	start := time.Now()
	var (
		err    error
		loaded string // the metadata the last attempt started from
		stuck  int    // lost races in a row on a table no other writer changed
	)
	for attempt := 1; ; attempt++ {
		var loc string
		loc, err = c.publish(ctx, jobID, cm.Checkpoint, files)
		if err == nil || !lostRace(err) {
			break
		}
		if attempt > 1 && loc == loaded {
			stuck++
		} else {
			stuck = 0
		}
		loaded = loc
		if stuck >= commitStuckAttempts {
			err = fmt.Errorf("%w (lost %d races in a row to no other writer's commit: the table's metadata stayed %s)", err, stuck+1, loc)
			break
		}
		pause := commitPause(attempt)
		if time.Since(start)+pause > commitRaceTimeout {
			err = fmt.Errorf("%w (lost %d races with other writers in %v)", err, attempt, time.Since(start).Round(time.Millisecond))
			break
		}
		runtime.LoggerFrom(ctx).Warn("iceberg commit lost a race with another writer; trying again from the table's new metadata",
			"sink", s.name, "checkpoint", cm.Checkpoint, "attempt", attempt, "err", err)
		// A random pause, doubling, so that writers racing in step fall
		// out of it.
		select {
		case <-ctx.Done():
			return s.errorf("committing checkpoint %d: %w", cm.Checkpoint, ctx.Err())
		case <-time.After(pause):
		}
	}
	if err != nil {
		return s.errorf("committing checkpoint %d (job %s, %d files): %w", cm.Checkpoint, jobID, len(files), err)
	}
	c.last = time.Now()
	s.published.set(jobID, cm.Checkpoint)
	return nil
}

// publish makes one attempt at the catalog transaction. It returns the
// metadata location of the table it started from ("" when it could not load
// it).
func (c *committer) publish(ctx context.Context, jobID string, id int64, files []pendingFile) (string, error) {
	s := c.s
	tbl, err := s.loadTable(ctx, false)
	if err != nil {
		return "", err
	}
	return tbl.MetadataLocation(), c.publishTo(ctx, tbl, jobID, id, files)
}

// publishTo makes one attempt at the catalog transaction from tbl.
func (c *committer) publishTo(ctx context.Context, tbl *table.Table, jobID string, id int64, files []pendingFile) error {
	s := c.s
	done := s.publishedBy(tbl, jobID)
	if done >= id {
		return nil // published before a crash, or by a recovery
	}
	// Every file prepared at or before done is in the table already.
	var fresh []pendingFile
	for _, f := range files {
		if f.PreparedAt > done {
			fresh = append(fresh, f)
		}
	}
	if len(fresh) == 0 {
		return nil
	}
	if p, ok := s.progressOf(tbl); ok && p.Job != jobID {
		return fmt.Errorf("the table's %s names job %s: another job of this pipeline took the table over, and this one stops rather than publish its records as well: %w",
			s.progressKey(), p.Job, runtime.ErrUnrecoverable)
	}
	fresh, err := c.present(ctx, tbl, id, fresh)
	if err != nil || len(fresh) == 0 {
		return err
	}
	meta := tbl.Metadata()
	// A changelog's checkpoints are applied in order, one snapshot each, so
	// that a checkpoint's equality deletes remove the rows of the earlier
	// ones (a delete applies to files of older sequence numbers only).
	// Appends go in one snapshot.
	groups := map[int64][]pendingFile{}
	var order []int64
	for _, f := range fresh {
		g := f.PreparedAt
		if s.cfg.Key == nil {
			g = 0
		}
		if _, ok := groups[g]; !ok {
			order = append(order, g)
		}
		groups[g] = append(groups[g], f)
	}
	slices.Sort(order)
	tx := tbl.NewTransaction()
	for _, g := range order {
		props := iceberg.Properties{propPipeline: s.cfg.Pipeline, propSink: s.name, propJob: jobID, propCheckpoint: strconv.FormatInt(id, 10)}
		if g > 0 {
			props[propPrepared] = strconv.FormatInt(g, 10)
		}
		rd := tx.NewRowDelta(props)
		for _, f := range groups[g] {
			df, err := f.dataFile(meta)
			if err != nil {
				return fmt.Errorf("%w (%w)", err, runtime.ErrIncompatible)
			}
			if f.Deletes {
				rd.AddDeletes(df)
			} else {
				rd.AddRows(df)
			}
		}
		if err := rd.Commit(ctx); err != nil {
			return fmt.Errorf("staging the files prepared at checkpoint %d: %w", g, err)
		}
	}
	pv, _ := json.Marshal(progress{Job: jobID, Checkpoint: id}) // strings and an integer always marshal
	if err := tx.SetProperties(iceberg.Properties{s.progressKey(): string(pv)}); err != nil {
		return err
	}
	if err := failpoint.Inject("sink/iceberg/commit"); err != nil {
		return err
	}
	_, err = tx.Commit(ctx)
	return err
}

// lostRace says a commit failed because another writer committed first, and
// left the table as it was: iceberg-go's ErrCommitFailed, or a requirement
// its catalog client checked against the table's new metadata (the SQL
// catalog returns those without a sentinel error to match, some as
// "requirement failed: …" and some as "Requirement failed: …"). A
// requirement that fails on the table as it is fails every try: the
// committer stops when the table does not change (commitStuckAttempts).
func lostRace(err error) bool {
	return errors.Is(err, table.ErrCommitFailed) || strings.Contains(strings.ToLower(err.Error()), "requirement failed: ")
}

// ErrStagedOutputLost marks a commit whose staged file is gone: it was
// deleted outside the protocol. The commit fails rather than publish a file
// readers could not read, or a checkpoint without part of its rows.
var ErrStagedOutputLost = errors.New("staged output lost")

// present checks that every file to publish exists. A missing one fails the
// commit, unless ctx accepts lost output (runtime.WithLostOutputAccepted):
// it is then left out and logged.
func (c *committer) present(ctx context.Context, tbl *table.Table, id int64, files []pendingFile) ([]pendingFile, error) {
	iofs, err := tbl.FS(ctx)
	if err != nil {
		return nil, err
	}
	kept := files[:0:0]
	for _, f := range files {
		fh, err := iofs.Open(f.Path)
		if err == nil {
			_ = fh.Close()
			kept = append(kept, f)
			continue
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("checking staged file %s: %w", f.Path, err)
		}
		if !runtime.LostOutputAccepted(ctx) {
			return nil, fmt.Errorf("checkpoint %d: staged file %s (prepared at checkpoint %d) is missing: %w. It was deleted outside the engine, and publishing the checkpoint without it would lose its rows silently. "+
				"Restore the file, or run with --accept-lost-output to publish the rest and lose that file's rows (logged) (%w)", id, f.Path, f.PreparedAt, ErrStagedOutputLost, runtime.ErrUnrecoverable)
		}
		runtime.LoggerFrom(ctx).Warn("publishing a checkpoint without a staged file that was lost (--accept-lost-output): its rows are lost",
			"sink", c.s.name, "checkpoint", id, "file", f.Path, "err", err)
	}
	return kept, nil
}

func (s *Sink) progressKey() string { return propProgress + s.cfg.Pipeline + "." + s.name }

// publishedBy is the newest checkpoint the table records for job jobID of
// this sink: in its progress property, or in the summary of a snapshot the
// sink made. 0 when none.
func (s *Sink) publishedBy(tbl *table.Table, jobID string) int64 {
	var done int64
	if p, ok := s.progressOf(tbl); ok && p.Job == jobID {
		done = p.Checkpoint
	}
	for _, snap := range tbl.Metadata().Snapshots() {
		if id, job, ok := s.summaryOf(snap); ok && job == jobID && id > done {
			done = id
		}
	}
	return done
}

func (s *Sink) progressOf(tbl *table.Table) (progress, bool) {
	v, ok := tbl.Properties()[s.progressKey()]
	if !ok {
		return progress{}, false
	}
	var p progress
	if json.Unmarshal([]byte(v), &p) != nil {
		return progress{}, false
	}
	return p, true
}

// summaryOf reads the checkpoint and job of a snapshot this sink made.
func (s *Sink) summaryOf(snap table.Snapshot) (int64, string, bool) {
	if snap.Summary == nil {
		return 0, "", false
	}
	p := snap.Summary.Properties
	if p[propPipeline] != s.cfg.Pipeline || p[propSink] != s.name {
		return 0, "", false
	}
	id, err := strconv.ParseInt(p[propCheckpoint], 10, 64)
	if err != nil {
		return 0, "", false
	}
	return id, p[propJob], true
}

// LastCommitted returns the newest checkpoint the table records for the
// job (runtime.CommitTracker).
func (c *committer) LastCommitted(ctx context.Context, jobID, sink string) (int64, error) {
	tbl, err := c.s.loadTable(ctx, false)
	if errors.Is(err, catalog.ErrNoSuchTable) {
		return 0, nil
	}
	if err != nil {
		return 0, c.s.errorf("reading the newest published checkpoint of job %s: %w", jobID, err)
	}
	return c.s.publishedBy(tbl, jobID), nil
}

// Claim makes the table this sink's for job jobID (runtime.DestinationClaimer):
// it returns the job the table's progress property (or, without one, the
// newest snapshot of this sink) names when that is another job; the runtime
// lets this job take the table over (Reclaim) only if that job published
// nothing, since this one starts from other checkpoints and would publish the
// same records again. A table no job of the sink has claimed is claimed at
// once, by setting the property to this job: a second job that starts later
// finds it, and a job whose table was taken over stops at its next commit
// (publish refuses when the property names another job).
func (c *committer) Claim(ctx context.Context, pipeline, sink, jobID string) (string, error) {
	tbl, err := c.s.loadTable(ctx, false)
	if errors.Is(err, catalog.ErrNoSuchTable) {
		return "", nil // the first subtask creates it; the first commit claims it
	}
	if err != nil {
		return "", c.s.errorf("claiming the table: %w", err)
	}
	if p, ok := c.s.progressOf(tbl); ok {
		if p.Job != jobID {
			return p.Job, nil
		}
		return "", nil
	}
	var newest *table.Snapshot
	for _, snap := range tbl.Metadata().Snapshots() {
		if _, _, ok := c.s.summaryOf(snap); ok && (newest == nil || snap.SequenceNumber > newest.SequenceNumber) {
			newest = &snap
		}
	}
	if newest != nil && newest.Summary.Properties[propJob] != jobID {
		return newest.Summary.Properties[propJob], nil
	}
	return "", c.mark(ctx, tbl, jobID)
}

// Reclaim records jobID as the table's job in place of the one Claim
// returned.
func (c *committer) Reclaim(ctx context.Context, pipeline, sink, jobID string) error {
	tbl, err := c.s.loadTable(ctx, false)
	if errors.Is(err, catalog.ErrNoSuchTable) {
		return nil
	}
	if err == nil {
		err = c.mark(ctx, tbl, jobID)
	}
	if err != nil {
		return c.s.errorf("taking the table over: %w", err)
	}
	return nil
}

// mark sets the progress property to jobID with nothing published.
func (c *committer) mark(ctx context.Context, tbl *table.Table, jobID string) error {
	pv, _ := json.Marshal(progress{Job: jobID}) // strings and an integer always marshal
	tx := tbl.NewTransaction()
	if err := tx.SetProperties(iceberg.Properties{c.s.progressKey(): string(pv)}); err != nil {
		return err
	}
	_, err := tx.Commit(ctx)
	return err
}

// Abandon deletes the files under the job's data directory that no snapshot
// of the table references: files of checkpoints that never completed, and
// files a failed commit left. It runs at a recovery after the recovery point
// was published and before any subtask writes.
func (c *committer) Abandon(ctx context.Context, jobID string) (int, error) {
	s := c.s
	tbl, err := s.loadTable(ctx, false)
	if errors.Is(err, catalog.ErrNoSuchTable) {
		return 0, nil
	}
	if err != nil {
		return 0, s.errorf("deleting unpublished files: %w", err)
	}
	dir := s.dataDir(tbl, jobID)
	iofs, err := tbl.FS(ctx)
	if err != nil {
		return 0, s.errorf("deleting unpublished files: %w", err)
	}
	if _, err := iofs.Open(dir); errors.Is(err, fs.ErrNotExist) || errors.Is(err, os.ErrNotExist) {
		return 0, nil // the job wrote nothing yet
	}
	res, err := tbl.DeleteOrphanFiles(ctx, table.WithLocation(dir), table.WithFilesOlderThan(0))
	if err != nil {
		return len(res.DeletedFiles), s.errorf("deleting unpublished files under %s: %w", dir, err)
	}
	return len(res.DeletedFiles), nil
}
