package stream_test

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/connector"
	"github.com/ingest-engine/ingest/connector/datagen"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/stream"
)

// A source of one type read as a stream of another does not compile: From
// takes T from the source. The control program, identical but for the type
// argument, compiles, so the failure is the type's and not the setup's.
func TestSourceTypeIsChecked(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two programs")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command on PATH to build the test programs: %v", err)
	}
	build := func(dir string) (string, error) {
		cmd := exec.Command(gobin, "build", "-o", filepath.Join(t.TempDir(), "prog"), "./"+dir)
		cmd.Dir = "testdata/typecheck"
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := build("match"); err != nil {
		t.Fatalf("the control program does not build: %v\n%s", err, out)
	}
	out, err := build("mismatch")
	if err == nil {
		t.Fatal("stream.From[string] over a datagen.Event source compiled")
	}
	for _, want := range []string{"main.go:16", "does not implement connector.Source[string]", "SourceSubtask[datagen.Event]"} {
		if !strings.Contains(out, want) {
			t.Errorf("compiler output does not name %q:\n%s", want, out)
		}
	}
}

// passAll is an operator that passes its input on unchanged, whatever its
// type.
type passAll struct{ stream.Stateless }

func (o *passAll) ProcessBatch(_ int, r runtime.Records) error { return o.Out.Emit(r) }

// An operator declared to emit strings that emits datagen.Event fails the
// job at once with a TypeMismatchError naming both types: the sink's
// subtask, not a panic, reports it, and no restart is tried (a restart would
// replay the same graph).
func TestTypeMismatchStopsTheJob(t *testing.T) {
	src, err := datagen.Events(datagen.Config{Count: 100, Keys: 1})
	if err != nil {
		t.Fatal(err)
	}
	p := stream.New("mismatch")
	events := stream.From(p, "events", src)
	strs := stream.Add[datagen.Event, string](events, &runtime.Node{ID: "pass", Describe: "pass",
		NewOperator: func() runtime.Operator { return &passAll{} }})
	stream.To(strs, "out", stream.Discard[string]())
	job, err := p.NewJob(stream.RunOptions{CheckpointDir: t.TempDir(),
		// A restart would wait an hour: the test would time out, not pass.
		Restart: runtime.RestartOptions{Delay: time.Hour, MaxAttempts: 3}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err = job.Run(ctx)
	var tm *runtime.TypeMismatchError
	if !errors.As(err, &tm) {
		t.Fatalf("Run: %v, want a TypeMismatchError", err)
	}
	if tm.Want != "runtime.Batch[string]" || tm.Got != "runtime.Batch[github.com/ingest-engine/ingest/connector/datagen.Event]" {
		t.Errorf("mismatch %q vs %q, want runtime.Batch[string] vs runtime.Batch[…datagen.Event]", tm.Want, tm.Got)
	}
	if !errors.Is(err, runtime.ErrUnrecoverable) {
		t.Errorf("Run: %v does not wrap ErrUnrecoverable", err)
	}
	if !strings.Contains(err.Error(), "subtask out[0] reads") {
		t.Errorf("Run: %v does not name the sink node", err)
	}
	if f := job.Observe().Recoveries; len(f) != 0 {
		t.Errorf("recoveries %+v, want none", f)
	}
}

// oneLane is a source that declares a maximum parallelism of 1 (or a bad
// descriptor); it is planned, never run.
type oneLane struct{ d connector.Descriptor }

func (s oneLane) Descriptor() connector.Descriptor       { return s.d }
func (oneLane) Describe() string                         { return "one lane" }
func (oneLane) NewSubtask() runtime.SourceSubtask[int64] { return nil }
func laneDescriptor() connector.Descriptor {
	return connector.Descriptor{Type: "lane", Capabilities: runtime.Capabilities{Replayable: true},
		MaxParallelism: 1, MaxParallelismReason: "one ordered sequence"}
}

// A source's maximum parallelism caps the pipeline's default and refuses a
// larger explicit parallelism, naming the reason; the sink after it keeps
// the pipeline's default.
func TestMaxParallelismOfASource(t *testing.T) {
	p := stream.New("capped", stream.DefaultParallelism(4))
	s := stream.From(p, "in", oneLane{laneDescriptor()})
	stream.To(s, "out", stream.Discard[int64]())
	plan, err := p.Plan()
	if err != nil {
		t.Fatal(err)
	}
	if d := plan.Describe(); !strings.Contains(d, "in (parallelism 1)") || !strings.Contains(d, "out (parallelism 4)") {
		t.Errorf("plan:\n%s\nwant in at 1, out at 4", d)
	}

	p = stream.New("too-wide")
	stream.To(stream.From(p, "in", oneLane{laneDescriptor()}, stream.Parallelism(2)), "out", stream.Discard[int64]())
	if _, err := p.Plan(); err == nil || !strings.Contains(err.Error(), "lane source in: parallelism 2, at most 1: one ordered sequence") {
		t.Errorf("Plan with parallelism 2: %v", err)
	}
}

// A descriptor that contradicts itself is a plan error, not a guarantee
// silently derived from half of it.
func TestContradictoryDescriptorIsRefused(t *testing.T) {
	for _, c := range []struct {
		name string
		d    connector.Descriptor
		want string
	}{
		{"transactional source", connector.Descriptor{Type: "x", Capabilities: runtime.Capabilities{Replayable: true, Transactional: true}}, "a source is neither transactional nor idempotent"},
		{"negative cap", connector.Descriptor{Type: "x", MaxParallelism: -1}, "max parallelism -1 is negative"},
	} {
		p := stream.New("bad")
		stream.To(stream.From(p, "in", oneLane{c.d}), "out", stream.Discard[int64]())
		if _, err := p.Plan(); err == nil || !strings.Contains(err.Error(), "source in: the x connector's descriptor: "+c.want) {
			t.Errorf("%s: Plan: %v, want %q", c.name, err, c.want)
		}
	}
}
