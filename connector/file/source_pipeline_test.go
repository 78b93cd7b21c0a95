package file_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/connector/file"
	"github.com/ingest-engine/ingest/internal/testkit"
	"github.com/ingest-engine/ingest/operator/window"
	"github.com/ingest-engine/ingest/state"
	"github.com/ingest-engine/ingest/stream"
)

// These tests run the file source through the real runtime — hash
// partitioning, a keyed tumbling window, the file sink, checkpoints every
// 10 ms — with failures injected after checkpoints completed, and compare
// the committed output with the exact output the input implies: nothing
// lost, nothing twice (checkpointing.txt: "A restart must not lose accepted
// data, repeat already-visible output, or combine state from different
// points in the stream").

// baseMs is the event time (epoch ms) of record 0.
const baseMs = 1_767_225_600_000

// inputSpec describes generated input: record i goes to file i % files,
// has key k<i % keys>, value i % 100 and event time baseMs + 3i ms, so
// every file is in event-time order and the files overlap in time.
type inputSpec struct {
	n, files, keys int
	format         file.Format
}

func (s inputSpec) ext() string {
	if s.format == file.FormatCSV {
		return ".csv"
	}
	return ".jsonl"
}

// line renders record i.
func (s inputSpec) line(i int) string {
	key, value, ts := fmt.Sprintf("k%d", i%s.keys), int64(i%100), int64(baseMs+3*i)
	if s.format == file.FormatCSV {
		return csvLine(int64(i), key, value, ts)
	}
	return jsonLine(int64(i), key, value, ts)
}

// write writes records [from, to) into the input files under dir,
// creating each file (with its CSV header) on its first record.
func (s inputSpec) write(t testing.TB, dir string, from, to int) {
	t.Helper()
	bufs := make([]strings.Builder, s.files)
	for i := from; i < to; i++ {
		f := i % s.files
		path := filepath.Join(dir, fmt.Sprintf("in-%02d%s", f, s.ext()))
		if bufs[f].Len() == 0 && s.format == file.FormatCSV {
			if _, err := os.Stat(path); err != nil {
				bufs[f].WriteString("id,key,value,ts\n")
			}
		}
		bufs[f].WriteString(s.line(i))
	}
	for f := range bufs {
		if bufs[f].Len() > 0 {
			appendFile(t, filepath.Join(dir, fmt.Sprintf("in-%02d%s", f, s.ext())), bufs[f].String())
		}
	}
}

// winKey and winAgg are one window result.
type winKey struct {
	Key   string
	Start int64
}

type winAgg struct{ Count, Sum int64 }

// winOut is the window output line.
type winOut struct {
	Key   string `json:"key"`
	Start int64  `json:"start"`
	Count int64  `json:"count"`
	Sum   int64  `json:"sum"`
}

// expected returns the 1 s tumbling windows of records [0, n).
func (s inputSpec) expected(n int) map[winKey]winAgg {
	want := map[winKey]winAgg{}
	for i := range n {
		ns := int64(baseMs+3*i) * int64(time.Millisecond)
		k := winKey{Key: fmt.Sprintf("k%d", i%s.keys), Start: ns - ns%int64(time.Second)}
		a := want[k]
		a.Count++
		a.Sum += int64(i % 100)
		want[k] = a
	}
	return want
}

// countSum is the window's aggregate: count and sum of value.
func countSum() window.Aggregate[rec, winAgg] {
	return window.Aggregate[rec, winAgg]{
		Init:  func() winAgg { return winAgg{} },
		Add:   func(a winAgg, r rec) winAgg { return winAgg{Count: a.Count + 1, Sum: a.Sum + r.Value} },
		Merge: func(a, b winAgg) winAgg { return winAgg{Count: a.Count + b.Count, Sum: a.Sum + b.Sum} },
		Codec: state.JSONCodec[winAgg](),
	}
}

// windowPipeline is file source → failing pass-through → key by key → 1 s
// tumbling count and sum → file sink.
func windowPipeline(t *testing.T, cfg file.SourceConfig, par int, plan *failPlan, out string) *stream.Pipeline {
	t.Helper()
	p := stream.New("file-windows")
	src := stream.From[rec](p, "files", newSource(t, cfg, recDecoder(t)), stream.Parallelism(par))
	passed := failing(src, "fail", plan, stream.Parallelism(par))
	w := window.Tumbling(stream.KeyBy(passed, func(r rec) string { return r.Key }), "per_key", time.Second, countSum(),
		func(k string, w window.Window, a winAgg) winOut {
			return winOut{Key: k, Start: w.Start, Count: a.Count, Sum: a.Sum}
		}, stream.Parallelism(2))
	stream.To(w, "out", file.JSONLines[winOut](out), stream.Parallelism(2))
	return p
}

// checkWindows compares the committed window lines under out with want.
func checkWindows(t *testing.T, out string, want map[winKey]winAgg) {
	t.Helper()
	lines, err := testkit.ReadCommitted(out)
	if err != nil {
		t.Fatal(err)
	}
	got := map[winKey]winAgg{}
	var dup, wrong, unexpected []string
	for _, l := range lines {
		var w winOut
		if err := json.Unmarshal(l.Text, &w); err != nil {
			t.Fatalf("%s:%d: %v", l.File, l.Number, err)
		}
		k := winKey{Key: w.Key, Start: w.Start}
		if _, ok := got[k]; ok {
			dup = append(dup, fmt.Sprint(k))
		}
		got[k] = winAgg{Count: w.Count, Sum: w.Sum}
		if exp, ok := want[k]; !ok {
			unexpected = append(unexpected, fmt.Sprint(k))
		} else if exp != got[k] {
			wrong = append(wrong, fmt.Sprintf("%v: %+v, want %+v", k, got[k], exp))
		}
	}
	var missing []string
	for k := range want {
		if _, ok := got[k]; !ok {
			missing = append(missing, fmt.Sprint(k))
		}
	}
	if len(dup)+len(wrong)+len(unexpected)+len(missing) > 0 {
		t.Fatalf("committed %d window lines, want %d: %d duplicated %.3v, %d wrong %.3v, %d unexpected %.3v, %d missing %.3v",
			len(lines), len(want), len(dup), dup, len(wrong), wrong, len(unexpected), unexpected, len(missing), missing)
	}
}

// JSON Lines and CSV files read at parallelism 1 and 3 into a keyed window
// and the file sink, with two failures after checkpoints: the committed
// windows are exactly the input's.
func TestSourceWindowPipelineExactlyOnceWithFailures(t *testing.T) {
	for _, format := range []file.Format{file.FormatJSONLines, file.FormatCSV} {
		for _, par := range []int{1, 3} {
			t.Run(fmt.Sprintf("%s/parallelism=%d", format, par), func(t *testing.T) {
				in := inputSpec{n: 20000, files: 8, keys: 10, format: format}
				dir, out := t.TempDir(), t.TempDir()
				in.write(t, dir, 0, in.n)
				plan := newFailPlan(300*time.Microsecond, 1000, 500)
				cfg := file.SourceConfig{Path: filepath.Join(dir, "in-*"+in.ext()), Format: format, StopAt: file.StopAtLatest, BatchSize: 50}
				stats := runJob(t, newJob(t, windowPipeline(t, cfg, par, plan, out), memStorage(t), 10*time.Millisecond))
				checkWindows(t, out, in.expected(in.n))
				// Two failures are planned; a slow machine may end an attempt
				// before it reaches its failure, but each injected failure
				// must have restarted the job.
				if n := plan.injected(); n == 0 || stats.Restarts != int64(n) {
					t.Errorf("%d failures injected, %d restarts; want 1 or 2 and as many restarts", n, stats.Restarts)
				}
				t.Logf("%d checkpoints, %d restarts", stats.Completed, stats.Restarts)
			})
		}
	}
}

// The sink fails to stage its file at barriers, and a commit fails halfway
// through moving a checkpoint's files: the job restarts, and the output is
// still exact.
func TestSourceWindowPipelineSinkFailpoints(t *testing.T) {
	for _, tc := range []struct {
		point string
		at    []int64
	}{
		{"sink/file/prepare", []int64{3, 8}},
		{"sink/file/mid-commit", []int64{1, 3}},
	} {
		t.Run(tc.point, func(t *testing.T) {
			in := inputSpec{n: 20000, files: 8, keys: 10, format: file.FormatJSONLines}
			dir, out := t.TempDir(), t.TempDir()
			in.write(t, dir, 0, in.n)
			calls := failOn(t, tc.point, tc.at...)
			cfg := file.SourceConfig{Path: filepath.Join(dir, "in-*.jsonl"), StopAt: file.StopAtLatest, BatchSize: 50}
			// Small windows fire often, so the sink stages files at many barriers.
			stats := runJob(t, newJob(t, windowPipeline(t, cfg, 2, newFailPlan(300*time.Microsecond), out), memStorage(t), 10*time.Millisecond))
			checkWindows(t, out, in.expected(in.n))
			if calls.Load() < slices.Min(tc.at) || stats.Restarts == 0 {
				t.Errorf("failpoint reached %d times, %d restarts; want failures at calls %v", calls.Load(), stats.Restarts, tc.at)
			}
			t.Logf("%d checkpoints, %d restarts", stats.Completed, stats.Restarts)
		})
	}
}

// idOut is a record passed straight to the sink.
type idOut struct {
	ID int64 `json:"id"`
}

// passPipeline is file source → failing pass-through → file sink of ids.
func passPipeline(t *testing.T, cfg file.SourceConfig, par int, plan *failPlan, out string) *stream.Pipeline {
	t.Helper()
	p := stream.New("file-pass")
	src := stream.From[rec](p, "files", newSource(t, cfg, recDecoder(t)), stream.Parallelism(par))
	ids := stream.Map(failing(src, "fail", plan, stream.Parallelism(par)), "id", func(r rec) idOut { return idOut{ID: r.ID} })
	stream.To(ids, "out", file.JSONLines[idOut](out), stream.Parallelism(par))
	return p
}

// committedIDs counts the committed ids under out.
func committedIDs(t *testing.T, out string) map[int64]int {
	t.Helper()
	lines, err := testkit.ReadCommitted(out)
	if err != nil {
		t.Fatal(err)
	}
	got := map[int64]int{}
	for _, l := range lines {
		var v idOut
		if err := json.Unmarshal(l.Text, &v); err != nil {
			t.Fatalf("%s:%d: %v", l.File, l.Number, err)
		}
		got[v.ID]++
	}
	return got
}

// checkIDs asserts every id in [0, n) is committed exactly once, and
// nothing else.
func checkIDs(t *testing.T, got map[int64]int, n int) {
	t.Helper()
	var missing, dup, extra []int64
	for i := range int64(n) {
		switch got[i] {
		case 0:
			missing = append(missing, i)
		case 1:
		default:
			dup = append(dup, i)
		}
	}
	for id := range got {
		if id < 0 || id >= int64(n) {
			extra = append(extra, id)
		}
	}
	if len(missing)+len(dup)+len(extra) > 0 {
		t.Fatalf("of %d ids: %d missing %.5v, %d duplicated %.5v, %d unexpected %.5v", n, len(missing), missing, len(dup), dup, len(extra), extra)
	}
}

// Following the files: lines appended while the job runs (sometimes a line
// in two writes) and files created while it runs are read, through a
// failure and a restart, each exactly once; a stop then ends the job with a
// final checkpoint.
func TestSourceFollowPicksUpFilesDuringRun(t *testing.T) {
	for _, format := range []file.Format{file.FormatJSONLines, file.FormatCSV} {
		t.Run(string(format), func(t *testing.T) {
			in := inputSpec{n: 6000, files: 6, keys: 10, format: format}
			dir, out := t.TempDir(), t.TempDir()
			// Files 0..2 exist at start; 3..5 appear with the records after 3000.
			in3 := inputSpec{n: in.n, files: 3, keys: in.keys, format: format}
			in3.write(t, dir, 0, 300)
			plan := newFailPlan(0, 1000)
			cfg := file.SourceConfig{Path: filepath.Join(dir, "in-*"+in.ext()), Format: format, PollInterval: 5 * time.Millisecond, BatchSize: 50}
			job := newJob(t, passPipeline(t, cfg, 2, plan, out), memStorage(t), 10*time.Millisecond)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- job.Run(ctx) }()

			for i := 300; i < in.n; i += 100 {
				spec := in3
				if i >= 3000 {
					spec = in
				}
				// Write record i's line in two parts, a few ms apart.
				var b strings.Builder
				for j := i; j < i+100; j++ {
					b.WriteString(spec.line(j))
				}
				f := filepath.Join(dir, fmt.Sprintf("in-%02d%s", i/100%spec.files, in.ext()))
				if _, err := os.Stat(f); err != nil && format == file.FormatCSV {
					appendFile(t, f, "id,key,value,ts\n")
				}
				text := b.String()
				appendFile(t, f, text[:len(text)/2+3])
				time.Sleep(time.Millisecond)
				appendFile(t, f, text[len(text)/2+3:])
				time.Sleep(time.Millisecond)
			}
			deadline := time.Now().Add(30 * time.Second)
			for len(committedIDs(t, out)) < in.n && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			job.Stop()
			if err := <-done; err != nil {
				t.Fatalf("Run: %v", err)
			}
			checkIDs(t, committedIDs(t, out), in.n)
			if n := plan.injected(); n != 1 || job.Stats().Restarts != 1 {
				t.Errorf("%d failures injected, %d restarts; want 1 and 1", n, job.Stats().Restarts)
			}
		})
	}
}

// stop_at latest ends the pipeline by itself. A crash (the process ends
// without a final checkpoint) after some checkpoints, then appends and a
// new file, then a restart from the same checkpoints: the restarted job
// reads to the same end as the first, so the output is exactly the records
// present at the first start, once each.
func TestSourceStopAtLatestCrashRestartReadsToSameEnd(t *testing.T) {
	in := inputSpec{n: 6000, files: 4, keys: 10, format: file.FormatCSV}
	dir, out := t.TempDir(), t.TempDir()
	in.write(t, dir, 0, in.n)
	cfg := file.SourceConfig{Path: filepath.Join(dir, "in-*.csv"), Format: file.FormatCSV, StopAt: file.StopAtLatest, BatchSize: 20}
	st := memStorage(t)

	// Run 1: slow, cancelled (a crash) once some output is committed.
	job := newJob(t, passPipeline(t, cfg, 2, newFailPlan(time.Millisecond), out), st, 10*time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- job.Run(ctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for len(committedIDs(t, out)) == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("run 1 ended with %v, want it cancelled", err)
	}
	partial := len(committedIDs(t, out))
	if partial == 0 || partial >= in.n {
		t.Fatalf("run 1 committed %d of %d records before the crash; the test needs a part", partial, in.n)
	}

	// More data: appended to the files, and a new file.
	more := inputSpec{n: in.n + 1000, files: 5, keys: in.keys, format: file.FormatCSV}
	more.write(t, dir, in.n, more.n)

	// Run 2 restores and ends by itself.
	stats := runJob(t, newJob(t, passPipeline(t, cfg, 2, nil, out), st, 10*time.Millisecond))
	if stats.RestoredFrom == 0 {
		t.Fatal("run 2 restored no checkpoint")
	}
	checkIDs(t, committedIDs(t, out), in.n)
	t.Logf("run 1 committed %d records before the crash; run 2 restored checkpoint %d", partial, stats.RestoredFrom)
}

// The JSON Lines records of every file reach the sink at source
// parallelism 3 and sink parallelism 2 without failures: a smoke test of
// the plan's description and the source's type.
func TestSourcePlanDescribesFileSource(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.jsonl"), jsonLine(0, "k", 0, 1))
	p := passPipeline(t, file.SourceConfig{Path: filepath.Join(dir, "*.jsonl"), StopAt: file.StopAtLatest}, 3, nil, t.TempDir())
	plan, err := p.Plan()
	if err != nil {
		t.Fatal(err)
	}
	d := plan.Describe()
	if !strings.Contains(d, "file "+filepath.Join(dir, "*.jsonl")+" (jsonl, stop_at latest)") {
		t.Errorf("plan description lacks the source:\n%s", d)
	}
}

// The source's parallelism may change across a restore: each subtask takes
// the files it now owns from every old subtask's position. A run at
// parallelism 2 is cut off after a checkpoint, one at 3 restores it and is
// cut off again, one at 1 reads to the end: every record is committed
// exactly once.
func TestSourceRescale(t *testing.T) {
	in := inputSpec{n: 4000, files: 4, keys: 10, format: file.FormatJSONLines}
	dir, out := t.TempDir(), t.TempDir()
	in.write(t, dir, 0, in.n)
	cfg := file.SourceConfig{Path: filepath.Join(dir, "in-*.jsonl"), StopAt: file.StopAtLatest, BatchSize: 20}
	st := memStorage(t)
	var last int64
	for _, par := range []int{2, 3} {
		job := newJob(t, passPipeline(t, cfg, par, newFailPlan(time.Millisecond), out), st, 10*time.Millisecond)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- job.Run(ctx) }()
		for deadline := time.Now().Add(30 * time.Second); job.Stats().Completed < 2 && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		cancel()
		<-done
		s := job.Stats()
		if s.Completed < 2 || s.RestoredFrom != last {
			t.Fatalf("run at parallelism %d: stats %+v, want 2 checkpoints after restoring %d", par, s, last)
		}
		last = s.Latest
	}
	if got := committedIDs(t, out); len(got) == 0 || len(got) >= in.n {
		t.Fatalf("%d of %d ids committed before the last run: the runs must stop part-way", len(got), in.n)
	}
	job := newJob(t, passPipeline(t, cfg, 1, nil, out), st, 10*time.Millisecond)
	if s := runJob(t, job); s.RestoredFrom != last {
		t.Fatalf("the last run restored %d, want %d", s.RestoredFrom, last)
	}
	checkIDs(t, committedIDs(t, out), in.n)
}
