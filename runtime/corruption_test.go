package runtime_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/connector"
	"github.com/ingest-engine/ingest/connector/file"
	"github.com/ingest-engine/ingest/internal/failpoint"
	"github.com/ingest-engine/ingest/internal/testkit"
	"github.com/ingest-engine/ingest/operator/window"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/storage"
	"github.com/ingest-engine/ingest/stream"
)

// This file checks recovery from damaged checkpoints (docs/reliability.md,
// "Failure handling"; DESIGN.md §7): every file of the newest checkpoint is
// verified before any state is used, and the fallback to the previous
// complete checkpoint happens only when it cannot publish output twice.
//
// The checkpoints are real: a paced source → key by → tumbling count window
// (keyed state, parallelism 2) → file sink, two checkpoints retained. The
// newest checkpoint F is the final one of a bounded run; F-1 is the last
// periodic one. Either F's output was published (the run ended normally) or
// it was not (the run crashed between F's metadata and its commit).

// cEvent is a record of pacedEvents.
type cEvent struct {
	ID, Key int64
}

// cKeys is the number of keys of pacedEvents.
const cKeys = 3

// pacedEvents emits cEvent i = 0 … count-1 (key i % cKeys, event time i ms)
// from one subtask, at most per records between two checkpoints, so a run
// spans about count/per checkpoints whatever the machine's speed. With idle
// it never ends: after count records it waits, so a graceful stop leaves
// windows open in state.
//
// With hot > 0 record i has key (i/per + i%2) % hot instead: between two
// checkpoints the records go to two keys of hot, so each checkpoint writes
// few key groups and leaves the others as they were (incremental_test.go).
type pacedEvents struct {
	count, per int64
	idle       bool
	hot        int64
}

// key returns record i's key.
func (s pacedEvents) key(i int64) int64 {
	if s.hot > 0 {
		return (i/s.per + i%2) % s.hot
	}
	return i % cKeys
}

func (s pacedEvents) NewSubtask() runtime.SourceSubtask[cEvent] { return &pacedReader{src: s} }
func (pacedEvents) Descriptor() connector.Descriptor {
	return connector.Descriptor{Capabilities: runtime.Capabilities{Replayable: true}}
}
func (pacedEvents) Describe() string { return "paced test events" }

type pacedReader struct {
	src         pacedEvents
	out         runtime.Emitter[cEvent]
	next, since int64
}

func (r *pacedReader) Open(ctx *runtime.Context, out runtime.Emitter[cEvent]) error {
	r.out = out
	if ctx.Restored != nil {
		if len(ctx.Restored.Inline) != 8 {
			return fmt.Errorf("position %q is not 8 bytes", ctx.Restored.Inline)
		}
		r.next = int64(binary.LittleEndian.Uint64(ctx.Restored.Inline))
	}
	return nil
}

func (r *pacedReader) watermark() int64 {
	if r.next == 0 {
		return runtime.MinWatermark
	}
	return (r.next-1)*int64(time.Millisecond) - 1
}

func (r *pacedReader) Read() (runtime.ReadResult, error) {
	if r.next >= r.src.count {
		if r.src.idle {
			return runtime.ReadResult{Watermark: r.watermark(), Wait: time.Millisecond}, nil
		}
		return runtime.ReadResult{Watermark: r.watermark(), Exhausted: true}, nil
	}
	if r.since >= r.src.per {
		return runtime.ReadResult{Watermark: r.watermark(), Wait: time.Millisecond}, nil
	}
	n := min(r.src.per-r.since, r.src.count-r.next)
	b := make(runtime.Batch[cEvent], n)
	for i := range b {
		id := r.next + int64(i)
		b[i] = runtime.Record[cEvent]{Value: cEvent{ID: id, Key: r.src.key(id)}, Time: id * int64(time.Millisecond)}
	}
	r.next += n
	r.since += n
	return runtime.ReadResult{Watermark: r.watermark()}, r.out.Emit(b)
}

func (r *pacedReader) Position() ([]byte, error) {
	r.since = 0
	return binary.LittleEndian.AppendUint64(nil, uint64(r.next)), nil
}

func (r *pacedReader) Close() error { return nil }

// wCount is the window's output: a key's count in the window starting at
// Start (ns).
type wCount struct {
	Key, Start, Count int64
}

// cWindowSize is the tumbling window of the corruption pipeline.
const cWindowSize = 10 * time.Millisecond

// corruptionPipeline is pacedEvents → key by key → tumbling count window "w"
// (parallelism 2) → file sink "out" under outDir.
func corruptionPipeline(src pacedEvents, outDir string) *stream.Pipeline {
	p := stream.New("corruption")
	events := stream.From[cEvent](p, "events", src, stream.Parallelism(1))
	keyed := stream.KeyBy(events, func(e cEvent) int64 { return e.Key })
	counts := window.Tumbling(keyed, "w", cWindowSize, window.CountOf[cEvent](),
		func(k int64, w window.Window, n int64) wCount { return wCount{Key: k, Start: w.Start, Count: n} },
		stream.Parallelism(2))
	stream.To(counts, "out", stream.Sink[wCount](file.JSONLines[wCount](outDir)), stream.Parallelism(1))
	return p
}

// expectedCounts is the exact output of corruptionPipeline over count
// records: every (key, window) with records, once.
func expectedCounts(count int64) map[wCount]int {
	n := map[[2]int64]int64{}
	for i := range count {
		start := i * int64(time.Millisecond) / int64(cWindowSize) * int64(cWindowSize)
		n[[2]int64{i % cKeys, start}]++
	}
	out := map[wCount]int{}
	for k, c := range n {
		out[wCount{Key: k[0], Start: k[1], Count: c}]++
	}
	return out
}

// committedOutput reads every published record under outDir, by the
// checkpoint that published it.
func committedOutput(t *testing.T, outDir string) map[int64][]wCount {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(outDir, "ckpt-*"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64][]wCount{}
	for _, d := range dirs {
		id, err := strconv.ParseInt(strings.SplitN(filepath.Base(d), "-", 3)[1], 10, 64)
		if err != nil {
			t.Fatalf("committed directory %s: %v", d, err)
		}
		files, err := os.ReadDir(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if !testkit.IsCommitted(f.Name()) {
				continue // the commit's manifest
			}
			data, err := os.ReadFile(filepath.Join(d, f.Name()))
			if err != nil {
				t.Fatal(err)
			}
			sc := bufio.NewScanner(bytes.NewReader(data))
			for sc.Scan() {
				var w wCount
				if err := json.Unmarshal(sc.Bytes(), &w); err != nil {
					t.Fatalf("%s: %q: %v", f.Name(), sc.Bytes(), err)
				}
				out[id] = append(out[id], w)
			}
		}
	}
	return out
}

// multiset counts the records of every checkpoint's output.
func multiset(out map[int64][]wCount) map[wCount]int {
	m := map[wCount]int{}
	for _, ws := range out {
		for _, w := range ws {
			m[w]++
		}
	}
	return m
}

// diffMultisets describes how got differs from want, "" when equal.
func diffMultisets(got, want map[wCount]int) string {
	var lines []string
	for w, n := range want {
		if got[w] != n {
			lines = append(lines, fmt.Sprintf("%+v: %d published, want %d", w, got[w], n))
		}
	}
	for w, n := range got {
		if _, ok := want[w]; !ok {
			lines = append(lines, fmt.Sprintf("%+v: %d published, want none", w, n))
		}
	}
	sort.Strings(lines)
	if len(lines) > 10 {
		lines = append(lines[:10], fmt.Sprintf("… %d more", len(lines)-10))
	}
	return strings.Join(lines, "\n")
}

const (
	cCount = 500 // records of a corruption run
	cPer   = 50  // records between two checkpoints
)

// corruptionOptions checkpoints often and retains two checkpoints, so a
// fallback has somewhere to go.
func corruptionOptions() checkpoint.Options {
	o := fastCheckpoints(5 * time.Millisecond)
	o.Retain = 2
	return o
}

// template is a produced checkpoint directory and sink directory, with the
// ids of their two retained checkpoints.
type template struct {
	ck, out string
	// final is the newest checkpoint F (the final one), prev F-1.
	final, prev int64
}

// produce runs the bounded corruption pipeline once. With publishFinal it
// ends normally (F's output is published); without, the commit of the final
// checkpoint fails (failpoint job/after-metadata-before-commit) and the job,
// allowed no restart, stops with F complete and its output unpublished: the
// state a crash between completion and commit leaves.
func produce(t *testing.T, publishFinal bool) template {
	t.Helper()
	dir := t.TempDir()
	tm := template{ck: filepath.Join(dir, "ck"), out: filepath.Join(dir, "out")}
	st, err := storage.NewLocal(tm.ck)
	if err != nil {
		t.Fatal(err)
	}
	job := newJob(t, corruptionPipeline(pacedEvents{count: cCount, per: cPer}, tm.out), st, corruptionOptions(), quickRestarts(0))
	if !publishFinal {
		disable := failpoint.Enable("job/after-metadata-before-commit", func() error {
			// The job's recovery point, not storage's newest checkpoint: a
			// commit of the checkpoint before the final one may run after the
			// final metadata landed and before the job took it as complete.
			latest := job.Stats().Latest
			if latest == 0 {
				return nil
			}
			data, err := st.ReadMetadata(context.Background(), latest)
			if err != nil {
				return err
			}
			m, err := checkpoint.DecodeMetadata(data)
			if err != nil {
				return err
			}
			if m.Final {
				return fmt.Errorf("crash before the final checkpoint's commit: %w", failpoint.ErrInjected)
			}
			return nil
		})
		defer disable()
	}
	err = runBounded(t, job)
	switch {
	case publishFinal && err != nil:
		t.Fatalf("producing the checkpoints: %v", err)
	case !publishFinal && !errors.Is(err, failpoint.ErrInjected):
		t.Fatalf("producing the checkpoints: Run = %v, want the injected commit failure", err)
	}
	entries, err := st.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var complete, trimmed []int64
	for _, e := range entries {
		if e.Complete {
			complete = append(complete, e.ID)
		} else {
			trimmed = append(trimmed, e.ID)
		}
	}
	// Two retained, and the earlier ones the first builds on (held),
	// trimmed to the files it reads: no metadata, nothing else.
	if len(complete) != 2 {
		t.Fatalf("complete checkpoints %v, want the 2 retained", complete)
	}
	tm.prev, tm.final = complete[0], complete[1]
	prev := metadataOf(t, st, tm.prev)
	if refs := prev.References(); !slices.Equal(trimmed, refs) {
		t.Fatalf("checkpoints without metadata %v: checkpoint %d references %v, want exactly those", trimmed, tm.prev, refs)
	}
	want := map[int64][]string{}
	for _, f := range prev.SharedFiles() {
		want[f.Checkpoint] = append(want[f.Checkpoint], f.Name)
	}
	for _, id := range trimmed {
		des, err := os.ReadDir(filepath.Join(tm.ck, storage.CheckpointDirName(id)))
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, de := range des {
			names = append(names, de.Name())
		}
		if !slices.Equal(names, want[id]) {
			t.Fatalf("held checkpoint %d holds %q, want exactly the files checkpoint %d reads, %q", id, names, tm.prev, want[id])
		}
	}
	if m := latestMetadata(t, st); !m.Final || m.ID != tm.final {
		t.Fatalf("newest checkpoint %d final=%v, want the final checkpoint", m.ID, m.Final)
	}
	published := committedOutput(t, tm.out)
	if _, ok := published[tm.final]; ok != publishFinal {
		t.Fatalf("output of the final checkpoint %d published: %v, want %v", tm.final, ok, publishFinal)
	}
	if tm.final < 4 {
		t.Fatalf("only %d checkpoints: the run is too short to test a fallback", tm.final)
	}
	return tm
}

// copyOf copies a template's directories to a new place, so each case
// damages its own copy.
func (tm template) copyOf(t *testing.T) template {
	t.Helper()
	dir := t.TempDir()
	c := tm
	c.ck, c.out = filepath.Join(dir, "ck"), filepath.Join(dir, "out")
	for _, p := range [][2]string{{tm.ck, c.ck}, {tm.out, c.out}} {
		if err := os.CopyFS(p[1], os.DirFS(p[0])); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// finalFiles lists the files of the final checkpoint: its metadata and the
// window's two state files.
func (tm template) finalFiles(t *testing.T) []string {
	t.Helper()
	des, err := os.ReadDir(filepath.Join(tm.ck, storage.CheckpointDirName(tm.final)))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	want := []string{storage.MetadataName, "state-w-0", "state-w-1"}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Fatalf("files of checkpoint %d: %q, want %q", tm.final, names, want)
	}
	return names
}

// damage is one way to damage a file, with what the error must say about it.
type damage struct {
	name  string
	apply func(path string) error
	// reason matches the error's reason.
	reason *regexp.Regexp
}

var (
	checksumOrTruncated = regexp.MustCompile(`checksum mismatch|truncated`)
	truncated           = regexp.MustCompile(`truncated`)
)

// flipAt flips every bit of the byte at offset off (negative: from the end).
func flipAt(off int) func(string) error {
	return func(path string) error {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		i := off
		if i < 0 {
			i += len(b)
		}
		b[i] ^= 0xff
		return os.WriteFile(path, b, 0o644)
	}
}

// truncateTo cuts the file to n(size) bytes.
func truncateTo(n func(size int64) int64) func(string) error {
	return func(path string) error {
		fi, err := os.Stat(path)
		if err != nil {
			return err
		}
		return os.Truncate(path, n(fi.Size()))
	}
}

var damages = []damage{
	{"first byte flipped", flipAt(0), checksumOrTruncated},
	{"middle byte flipped", func(p string) error {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		return flipAt(int(fi.Size() / 2))(p)
	}, checksumOrTruncated},
	{"checksum byte flipped", flipAt(-1), checksumOrTruncated},
	{"trailer length flipped", flipAt(-8), checksumOrTruncated},
	{"last byte cut", truncateTo(func(n int64) int64 { return n - 1 }), truncated},
	{"cut in half", truncateTo(func(n int64) int64 { return n / 2 }), truncated},
	{"emptied", truncateTo(func(int64) int64 { return 0 }), truncated},
}

// runCopy runs the corruption pipeline on a template copy (the full input,
// unpaced after the restore is irrelevant: pacing holds only between
// checkpoints) and returns the job, its log and Run's error.
func runCopy(t *testing.T, c template, allowDuplicates bool) (*runtime.Job, string, error) {
	t.Helper()
	st, err := storage.NewLocal(c.ck)
	if err != nil {
		t.Fatal(err)
	}
	var log testkit.SyncBuffer
	job, err := corruptionPipeline(pacedEvents{count: cCount, per: cPer}, c.out).NewJob(stream.RunOptions{
		Storage: st, Checkpoint: corruptionOptions(), Restart: quickRestarts(3),
		Log: slog.New(slog.NewTextHandler(&log, nil)), AllowDuplicates: allowDuplicates,
	})
	if err != nil {
		t.Fatal(err)
	}
	err = runBounded(t, job)
	return job, log.String(), err
}

// Every file of the newest checkpoint, damaged in every way, is detected by
// its checksum before any state is used: when the sink already published the
// damaged checkpoint's output, the job refuses to start, with an error that
// names the file and what is wrong with it, the sink and the checkpoint it
// published, and the two ways on; nothing was restored, sent or published.
func TestDamagedCheckpointRefusedWhenItsOutputIsPublished(t *testing.T) {
	tm := produce(t, true)
	for _, name := range tm.finalFiles(t) {
		kinds := damages
		if name != storage.MetadataName {
			kinds = slices.Concat(damages, []damage{{"missing", os.Remove, regexp.MustCompile(`is missing`)}})
		}
		for _, d := range kinds {
			t.Run(name+"/"+d.name, func(t *testing.T) {
				c := tm.copyOf(t)
				path := filepath.Join(c.ck, storage.CheckpointDirName(c.final), name)
				if err := d.apply(path); err != nil {
					t.Fatal(err)
				}
				before := committedOutput(t, c.out)
				job, _, err := runCopy(t, c, false)
				if err == nil {
					t.Fatal("Run restored a damaged checkpoint whose output was published")
				}
				var ce *runtime.CorruptCheckpointError
				if !errors.As(err, &ce) || !errors.Is(err, runtime.ErrIncompatible) {
					t.Fatalf("Run = %v, want a *runtime.CorruptCheckpointError wrapping ErrIncompatible", err)
				}
				if d.name == "missing" {
					if !errors.Is(err, storage.ErrNotFound) {
						t.Errorf("Run = %v, want it to wrap storage.ErrNotFound", err)
					}
				} else if !storage.IsCorrupt(err) {
					t.Errorf("Run = %v, want it to wrap storage.ErrCorrupt", err)
				}
				if len(ce.Checkpoints) != 1 || ce.Checkpoints[0] != c.final || ce.Fallback != c.prev {
					t.Errorf("damaged %v, fallback %d; want [%d] and %d", ce.Checkpoints, ce.Fallback, c.final, c.prev)
				}
				msg := err.Error()
				for _, want := range []string{
					path,
					fmt.Sprintf("Checkpoint %d in %s cannot be restored", c.final, c.ck),
					fmt.Sprintf("falling back to checkpoint %d would publish output twice", c.prev),
					fmt.Sprintf(`sink "out" already published the output of checkpoint %d`, c.final),
					"--allow-duplicates",
					"from a backup",
				} {
					if !strings.Contains(msg, want) {
						t.Errorf("the error does not say %q:\n%s", want, msg)
					}
				}
				if !d.reason.MatchString(msg) {
					t.Errorf("the error does not say why (%v):\n%s", d.reason, msg)
				}
				s := job.Stats()
				if s.Restarts != 0 || s.RestoredFrom != 0 || s.Records != 0 || s.Completed != 0 {
					t.Errorf("stats %+v: want no restart, nothing restored, sent or completed", s)
				}
				if diff := diffMultisets(multiset(committedOutput(t, c.out)), multiset(before)); diff != "" {
					t.Errorf("the refused run changed the published output:\n%s", diff)
				}
			})
		}
	}
}

// The subtasks' files are verified in parallel, yet the error is always
// the first damaged subtask's, in the checkpoint's order: with both of the
// window's state files damaged, every run names state-w-0 (and never
// state-w-1), whichever goroutine finds its damage first.
func TestDamagedCheckpointNamesTheFirstDamagedSubtask(t *testing.T) {
	tm := produce(t, true)
	for i := range 5 {
		c := tm.copyOf(t)
		for _, name := range []string{"state-w-0", "state-w-1"} {
			if err := flipAt(0)(filepath.Join(c.ck, storage.CheckpointDirName(c.final), name)); err != nil {
				t.Fatal(err)
			}
		}
		_, _, err := runCopy(t, c, false)
		if err == nil {
			t.Fatal("Run restored a checkpoint whose state files are damaged")
		}
		first := filepath.Join(c.ck, storage.CheckpointDirName(c.final), "state-w-0")
		if msg := err.Error(); !strings.Contains(msg, first) || strings.Contains(msg, "state-w-1") {
			t.Fatalf("run %d: the error does not name %s alone:\n%s", i, first, msg)
		}
	}
}

// When the damaged checkpoint's output was not published yet (the crash came
// between its completion and its commit), falling back to the previous
// checkpoint is exactly-once: the job logs the skip, restores F-1, replays,
// and the published output is exactly the expected windows, each once.
// Checked for a damage of every file of the checkpoint.
func TestDamagedCheckpointFallsBackWhenItsOutputIsUnpublished(t *testing.T) {
	tm := produce(t, false)
	for _, name := range tm.finalFiles(t) {
		t.Run(name, func(t *testing.T) {
			c := tm.copyOf(t)
			path := filepath.Join(c.ck, storage.CheckpointDirName(c.final), name)
			if err := flipAt(0)(path); err != nil {
				t.Fatal(err)
			}
			job, log, err := runCopy(t, c, false)
			if err != nil {
				t.Fatalf("Run = %v, want a fallback to checkpoint %d", err, c.prev)
			}
			if s := job.Stats(); s.RestoredFrom != c.prev || s.Restarts != 0 {
				t.Errorf("restored checkpoint %d after %d restarts, want %d at once", s.RestoredFrom, s.Restarts, c.prev)
			}
			for _, want := range []string{"skipping a damaged checkpoint", fmt.Sprintf("checkpoint=%d", c.final), path, "no sink published output after checkpoint " + strconv.FormatInt(c.prev, 10)} {
				if !strings.Contains(log, want) {
					t.Errorf("the log does not say %q:\n%s", want, log)
				}
			}
			if diff := diffMultisets(multiset(committedOutput(t, c.out)), expectedCounts(cCount)); diff != "" {
				t.Errorf("published output after the fallback:\n%s", diff)
			}
		})
	}
}

// With AllowDuplicates (--allow-duplicates) the job falls back although the
// damaged checkpoint's output was published, and says so. The flag means
// exactly this: the output of the skipped checkpoint is published a second
// time (at-least-once), and nothing else is.
func TestAllowDuplicatesFallsBackAndRepublishes(t *testing.T) {
	tm := produce(t, true)
	c := tm.copyOf(t)
	if err := flipAt(0)(filepath.Join(c.ck, storage.CheckpointDirName(c.final), "state-w-0")); err != nil {
		t.Fatal(err)
	}
	before := committedOutput(t, c.out)
	again := before[c.final]
	if len(again) == 0 {
		t.Fatalf("checkpoint %d published nothing: the test would not see duplicates", c.final)
	}
	job, log, err := runCopy(t, c, true)
	if err != nil {
		t.Fatalf("Run with AllowDuplicates = %v, want a fallback", err)
	}
	if s := job.Stats(); s.RestoredFrom != c.prev {
		t.Errorf("restored checkpoint %d, want %d", s.RestoredFrom, c.prev)
	}
	for _, want := range []string{"--allow-duplicates", fmt.Sprintf(`sink \"out\" already published the output of checkpoint %d`, c.final)} {
		if !strings.Contains(log, want) {
			t.Errorf("the log does not say %q:\n%s", want, log)
		}
	}
	want := expectedCounts(cCount)
	for _, w := range again {
		want[w]++
	}
	if diff := diffMultisets(multiset(committedOutput(t, c.out)), want); diff != "" {
		t.Errorf("published output: want every window once and those of checkpoint %d (%d) twice:\n%s", c.final, len(again), diff)
	}
}

// A sink whose committer cannot tell which checkpoint it published last (no
// runtime.CommitTracker) counts as having published: with no older
// checkpoint retained (retain 1) the job refuses, saying both; with
// AllowDuplicates it starts from no checkpoint and publishes everything
// again — every record exactly twice over the two runs.
func TestDamagedCheckpointRefusedWhenASinkCannotTell(t *testing.T) {
	st := newLocal(t)
	store := newTxStore[cEvent]()
	pipeline := func() *stream.Pipeline {
		p := stream.New("untracked")
		in := stream.From[cEvent](p, "events", pacedEvents{count: cCount, per: cPer}, stream.Parallelism(1))
		stream.To(in, "out", stream.Sink[cEvent](txSink[cEvent]{store}), stream.Parallelism(1))
		return p
	}
	if err := runBounded(t, newJob(t, pipeline(), st, fastCheckpoints(5*time.Millisecond), quickRestarts(0))); err != nil {
		t.Fatal(err)
	}
	final := latestMetadata(t, st).ID
	path := filepath.Join(st.Location(), storage.CheckpointDirName(final), storage.MetadataName)
	if err := flipAt(0)(path); err != nil {
		t.Fatal(err)
	}

	job := newJob(t, pipeline(), st, fastCheckpoints(5*time.Millisecond), quickRestarts(3))
	err := runBounded(t, job)
	var ce *runtime.CorruptCheckpointError
	if !errors.As(err, &ce) || ce.Fallback != 0 {
		t.Fatalf("Run = %v, want a refusal with no checkpoint to fall back to", err)
	}
	for _, want := range []string{path, "checksum mismatch", "falling back to no checkpoint (none older is retained", `sink "out" cannot tell which checkpoint it published last`, "from the sources' start"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q:\n%v", want, err)
		}
	}
	if n := store.count(); n != cCount {
		t.Fatalf("%d records published after the refusal, want the first run's %d", n, cCount)
	}

	job, err = pipeline().NewJob(stream.RunOptions{Storage: st, Checkpoint: fastCheckpoints(5 * time.Millisecond), Restart: quickRestarts(3), AllowDuplicates: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := runBounded(t, job); err != nil {
		t.Fatalf("Run with AllowDuplicates = %v", err)
	}
	seen := map[int64]int{}
	for _, e := range store.values() {
		seen[e.ID]++
	}
	for id := range int64(cCount) {
		if seen[id] != 2 {
			t.Fatalf("record %d published %d times, want twice (once per run)", id, seen[id])
		}
	}
	if len(seen) != cCount {
		t.Fatalf("%d distinct records published, want %d", len(seen), cCount)
	}
}
