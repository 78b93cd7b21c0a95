package runtime_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/runtime"
)

// epochTag is a record that says which source emitted it and in which epoch:
// the number of barriers that source had emitted before it. On a fresh start
// checkpoint ids are 1, 2, … and every source sees every trigger, so a
// record of epoch e was emitted after barrier e and before barrier e+1.
type epochTag struct {
	Input int
	Epoch int64
}

// alignEvent is one step of the alignment test, in global order.
type alignEvent struct {
	kind  string // "emit" (a source emitted a batch), "process" (the operator got a record), "snapshot"
	input int
	epoch int64 // the record's epoch, or the snapshot's checkpoint id
}

type alignLog struct {
	mu     sync.Mutex
	events []alignEvent
	// fastSeen is the newest epoch of the fast input the operator processed.
	fastSeen atomic.Int64
}

func (l *alignLog) add(e alignEvent) {
	l.mu.Lock()
	l.events = append(l.events, e)
	l.mu.Unlock()
}

// epochSource emits small batches tagged with its epoch and ends after
// lastEpoch barriers. The slow one, before each read, waits up to holdFor
// for the operator to process a fast record of a newer epoch than its own:
// it keeps its barrier back while the fast input runs ahead.
type epochSource struct {
	input     int
	log       *alignLog
	out       runtime.Output
	epoch     int64
	lastEpoch int64
	slow      bool
	holdFor   time.Duration
}

func (s *epochSource) Open(ctx *runtime.Context) error { s.out = ctx.Output; return nil }

func (s *epochSource) Read() (runtime.ReadResult, error) {
	if s.slow {
		// Bounded polling: in exactly-once mode the condition never holds
		// (that is what alignment guarantees), so each read waits holdFor.
		deadline := time.Now().Add(s.holdFor)
		for s.log.fastSeen.Load() <= s.epoch && time.Now().Before(deadline) {
			time.Sleep(100 * time.Microsecond)
		}
	}
	b := make(runtime.Batch[epochTag], 4)
	for i := range b {
		b[i].Value = epochTag{Input: s.input, Epoch: s.epoch}
	}
	if err := s.out.Emit(b); err != nil {
		return runtime.ReadResult{}, err
	}
	s.log.add(alignEvent{kind: "emit", input: s.input, epoch: s.epoch})
	res := runtime.ReadResult{Watermark: runtime.MinWatermark, Exhausted: s.epoch >= s.lastEpoch}
	if !s.slow {
		res.Wait = 200 * time.Microsecond
	}
	return res, nil
}

func (s *epochSource) Position() ([]byte, error) {
	s.epoch++
	return []byte(fmt.Sprint(s.epoch)), nil
}
func (s *epochSource) Close() error { return nil }

// alignOp is a two-input operator that logs every record and snapshot.
type alignOp struct{ log *alignLog }

func (o *alignOp) Open(*runtime.Context) error { return nil }
func (o *alignOp) ProcessBatch(input int, r runtime.Records) error {
	for _, rec := range r.(runtime.Batch[epochTag]) {
		if rec.Value.Input != input {
			return fmt.Errorf("a record of input %d was delivered as input %d", rec.Value.Input, input)
		}
		o.log.add(alignEvent{kind: "process", input: input, epoch: rec.Value.Epoch})
		if input == 0 && rec.Value.Epoch > o.log.fastSeen.Load() {
			o.log.fastSeen.Store(rec.Value.Epoch)
		}
	}
	return nil
}
func (o *alignOp) ProcessWatermark(int64) error { return nil }
func (o *alignOp) Snapshot(id int64) (runtime.Snapshot, error) {
	o.log.add(alignEvent{kind: "snapshot", epoch: id})
	return runtime.Snapshot{}, nil
}
func (o *alignOp) NotifyComplete(int64) error { return nil }
func (o *alignOp) Close() error               { return nil }

// runAlignment runs fast (input 0) and slow (input 1) sources into one
// two-input operator in mode and returns the log.
func runAlignment(t *testing.T, mode checkpoint.Mode) []alignEvent {
	t.Helper()
	log := &alignLog{}
	const lastEpoch = 4
	fast := &runtime.Node{ID: "fast", Parallelism: 1, NewSource: func() runtime.Source {
		return &epochSource{input: 0, log: log, lastEpoch: lastEpoch}
	}}
	slow := &runtime.Node{ID: "slow", Parallelism: 1, NewSource: func() runtime.Source {
		return &epochSource{input: 1, log: log, lastEpoch: lastEpoch, slow: true, holdFor: 30 * time.Millisecond}
	}}
	op := &runtime.Node{ID: "join", Parallelism: 1, NewOperator: func() runtime.Operator { return &alignOp{log: log} },
		Inputs: []runtime.Edge{
			{From: fast, Input: 0, Partitioner: runtime.Rebalance()},
			{From: slow, Input: 1, Partitioner: runtime.Rebalance()},
		}}
	ck := fastCheckpoints(5 * time.Millisecond)
	ck.Mode = mode
	job, err := runtime.NewJob(&runtime.Plan{Name: "align", Nodes: []*runtime.Node{fast, slow, op}},
		runtime.Options{Checkpoint: ck, Storage: newLocal(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := runBounded(t, job); err != nil {
		t.Fatal(err)
	}
	if s := job.Stats(); s.Completed < lastEpoch+1 {
		t.Fatalf("%d checkpoints completed, want at least %d", s.Completed, lastEpoch+1)
	}
	return log.events
}

// checkCut checks what holds in both modes: barriers do not overtake
// records, so every record emitted before barrier N (epoch < N) is processed
// before the operator's snapshot N. It returns the snapshots' ids.
func checkCut(t *testing.T, events []alignEvent) []int64 {
	t.Helper()
	var snaps []int64
	var last int64
	for i, e := range events {
		switch e.kind {
		case "snapshot":
			if e.epoch <= last {
				t.Fatalf("event %d: snapshot %d after snapshot %d", i, e.epoch, last)
			}
			last = e.epoch
			snaps = append(snaps, e.epoch)
		case "process":
			if e.epoch < last {
				t.Fatalf("event %d: input %d record of epoch %d processed after snapshot %d: a barrier overtook it", i, e.input, e.epoch, last)
			}
		}
	}
	return snaps
}

// DESIGN.md §3 (Alignment) and invariant 3, exactly-once mode: when barrier
// N arrived on the fast input and not yet on the slow one, the fast input is
// held: no record it emitted after barrier N is processed before the
// operator's snapshot N, though such records were already waiting.
func TestAlignmentHoldsFastInputUntilSnapshot(t *testing.T) {
	t.Parallel()
	events := runAlignment(t, checkpoint.ExactlyOnce)
	snaps := checkCut(t, events)
	var processed int64 = -1 // newest epoch processed so far
	held := 0                // snapshots with post-barrier fast records already emitted
	var fastEmitted int64 = -1
	for i, e := range events {
		switch e.kind {
		case "emit":
			if e.input == 0 {
				fastEmitted = max(fastEmitted, e.epoch)
			}
		case "process":
			processed = max(processed, e.epoch)
		case "snapshot":
			if processed >= e.epoch {
				t.Fatalf("event %d: a record of epoch %d (after barrier %d) was processed before snapshot %d: alignment did not hold the input", i, processed, e.epoch, e.epoch)
			}
			if fastEmitted >= e.epoch {
				held++
			}
		}
	}
	if held == 0 {
		t.Fatalf("snapshots %v: the fast source never got ahead of a snapshot, the test proved nothing", snaps)
	}
}

// DESIGN.md §3 (Settings: at-least-once = no alignment): the fast input is
// not held, so records it emitted after barrier N are processed before the
// operator's snapshot N (the slow source waits until they are, so this is
// observed without timing luck); records before the barrier still come
// first.
func TestAtLeastOnceDoesNotHoldInputs(t *testing.T) {
	t.Parallel()
	events := runAlignment(t, checkpoint.AtLeastOnce)
	checkCut(t, events)
	var processed int64 = -1
	ahead := 0
	for _, e := range events {
		switch e.kind {
		case "process":
			processed = max(processed, e.epoch)
		case "snapshot":
			if processed >= e.epoch {
				ahead++
			}
		}
	}
	if ahead == 0 {
		t.Fatal("no post-barrier record was processed before its snapshot: inputs were held in at-least-once mode")
	}
}
