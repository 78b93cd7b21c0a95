package connector_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/examples/connector"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/stream"
)

// failAtFirstCompletion fails the job's first attempt when it learns that
// a checkpoint completed: the job restores that checkpoint, publishes its
// output again (which the committer must recognise as published) and
// abandons what later checkpoints staged. The first complete checkpoint is
// a periodic one or, if the input ends first, the final one: either way
// the failure comes after a commit.
type failAtFirstCompletion struct {
	stream.Stateless
	attempt int
}

func (o *failAtFirstCompletion) Open(ctx *runtime.Context) error {
	o.attempt = ctx.Attempt
	return o.Stateless.Open(ctx)
}

func (o *failAtFirstCompletion) ProcessBatch(_ int, r runtime.Records) error {
	b, err := runtime.BatchOf[int64](r)
	if err != nil {
		return err
	}
	return o.Out.Emit(slices.Clone(b))
}

func (o *failAtFirstCompletion) NotifyComplete(id int64) error {
	if o.attempt == 0 {
		return fmt.Errorf("injected failure after checkpoint %d", id)
	}
	return nil
}

// readPublished returns the numbers in the sink's published files.
func readPublished(t *testing.T, dir string) []int64 {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	for _, e := range entries {
		if e.IsDir() {
			continue // _staging
		}
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			n, err := strconv.ParseInt(sc.Text(), 10, 64)
			if err != nil {
				t.Fatalf("%s: %v", e.Name(), err)
			}
			got = append(got, n)
		}
		f.Close()
	}
	slices.Sort(got)
	return got
}

// The example connectors under a failure after a commit: the job restarts
// from its last complete checkpoint, and the published output holds every
// number exactly once.
func TestExactlyOnceAcrossAFailure(t *testing.T) {
	const count = 20000
	src, err := connector.NewNumbers(count)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	sink, err := connector.NewDir(out)
	if err != nil {
		t.Fatal(err)
	}
	// Another job's staged file in the same directory: this job's recovery
	// must neither delete nor publish it.
	foreign := filepath.Join(out, "_staging", "otherjob-0-3.txt")
	if err := os.WriteFile(foreign, []byte("-1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := stream.New("numbers", stream.DefaultParallelism(2))
	nums := stream.From(p, "numbers", src)
	passed := stream.Add[int64, int64](nums, &runtime.Node{ID: "fail", Describe: "fails once",
		NewOperator: func() runtime.Operator { return &failAtFirstCompletion{} }})
	stream.To(passed, "out", sink)
	opts := checkpoint.DefaultOptions()
	opts.Interval = time.Millisecond
	job, err := p.NewJob(stream.RunOptions{CheckpointDir: t.TempDir(), Checkpoint: opts,
		Restart: runtime.RestartOptions{Delay: time.Millisecond, MaxAttempts: 3}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := job.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if rs := job.Observe().Recoveries; len(rs) == 0 {
		t.Fatal("no recovery: the failure was not injected")
	}
	got := readPublished(t, out)
	if len(got) != count {
		t.Fatalf("%d numbers published, want %d", len(got), count)
	}
	for i, n := range got {
		if n != int64(i) {
			t.Fatalf("published numbers differ from 0…%d first at index %d: %d", count-1, i, n)
		}
	}
	if staged, _ := os.ReadDir(filepath.Join(out, "_staging")); len(staged) != 1 || staged[0].Name() != "otherjob-0-3.txt" {
		t.Errorf("staged after the final checkpoint: %v, want only the other job's file", staged)
	}
}

// A bad configuration is an error at construction.
func TestNumbersNeedsACount(t *testing.T) {
	if _, err := connector.NewNumbers(0); err == nil || !strings.Contains(err.Error(), "count 0") {
		t.Fatalf("NewNumbers(0): %v", err)
	}
}

// Every Go block of docs/connectors.md is this package's code, verbatim:
// the page cannot drift from what the tests run.
func TestPageQuotesThisCode(t *testing.T) {
	page, err := os.ReadFile("../../docs/connectors.md")
	if err != nil {
		t.Fatal(err)
	}
	var code strings.Builder
	for _, f := range []string{"numbers.go", "dir.go"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		code.Write(b)
	}
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllSubmatch(page, -1)
	if len(blocks) < 4 {
		t.Fatalf("docs/connectors.md has %d Go blocks, want the walk-through's", len(blocks))
	}
	for _, b := range blocks {
		if !strings.Contains(code.String(), string(b[1])) {
			t.Errorf("docs/connectors.md quotes code that is not in examples/connector:\n%s", b[1])
		}
	}
}
