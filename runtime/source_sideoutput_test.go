package runtime_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/connector"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/storage"
	"github.com/ingest-engine/ingest/stream"
)

// sevens is a replayable test source of the ids 0 … n-1, a few per Read: ids
// that are multiples of 7 go to its side output "sevens" as strings, the
// others to its main output. Its position is the next id. On attempt 0,
// subtask 0 fails once it has read past failAt.
type sevens struct {
	n, failAt int64
}

func (s sevens) NewSubtask() runtime.SourceSubtask[int64] { return &sevensReader{cfg: s} }
func (sevens) Descriptor() connector.Descriptor {
	return connector.Descriptor{Capabilities: runtime.Capabilities{Replayable: true}}
}
func (sevens) Describe() string { return "ids, multiples of 7 to side output sevens" }
func (s sevens) sideOutput() stream.NodeOption {
	return func(n *runtime.Node) { n.SideOutputs = []string{"sevens"} }
}

type sevensReader struct {
	cfg  sevens
	ctx  *runtime.Context
	side runtime.Output
	out  runtime.Emitter[int64]
	next int64
	step int64
}

func (r *sevensReader) Open(ctx *runtime.Context, out runtime.Emitter[int64]) error {
	r.ctx, r.out = ctx, out
	r.side = ctx.SideOutput("sevens")
	if r.side == nil {
		return errors.New("side output sevens is not connected")
	}
	// Subtask i of p reads the ids i, i+p, i+2p, …
	r.next, r.step = int64(ctx.Task.Subtask), int64(ctx.Parallelism)
	if ctx.Restored != nil && len(ctx.Restored.Inline) > 0 {
		if err := json.Unmarshal(ctx.Restored.Inline, &r.next); err != nil {
			return err
		}
	}
	return nil
}

func (r *sevensReader) Read() (runtime.ReadResult, error) {
	if r.ctx.Attempt == 0 && r.ctx.Task.Subtask == 0 && r.next > r.cfg.failAt {
		return runtime.ReadResult{}, errors.New("injected source failure")
	}
	var main runtime.Batch[int64]
	var side runtime.Batch[string]
	for range 5 {
		if r.next >= r.cfg.n {
			break
		}
		if r.next%7 == 0 {
			side = append(side, runtime.Record[string]{Value: strconv.FormatInt(r.next, 10), Time: r.next})
		} else {
			main = append(main, runtime.Record[int64]{Value: r.next, Time: r.next})
		}
		r.next += r.step
	}
	if err := r.side.Emit(side); err != nil {
		return runtime.ReadResult{}, err
	}
	if err := r.out.Emit(main); err != nil {
		return runtime.ReadResult{}, err
	}
	return runtime.ReadResult{Watermark: r.next, Exhausted: r.next >= r.cfg.n, Wait: 100 * time.Microsecond}, nil
}

func (r *sevensReader) Position() ([]byte, error) { return json.Marshal(r.next) }
func (r *sevensReader) Close() error              { return nil }

// TestSourceSideOutput: a source subtask writes to a side output through
// Context.SideOutput like an operator does. The side output's records travel
// with the main output through the same checkpoints, so with a source
// failure and restarts in the middle each transactional sink publishes
// exactly its records, once.
func TestSourceSideOutput(t *testing.T) {
	const n = 3000
	src := sevens{n: n, failAt: n / 2}
	p := stream.New("source-side")
	ids := stream.From[int64](p, "ids", src, stream.Parallelism(2), src.sideOutput())
	mains, sides := newTxStore[int64](), newTxStore[string]()
	stream.To(ids, "main", stream.Sink[int64](txSink[int64]{mains}), stream.Parallelism(2))
	stream.To(stream.SideOutput[string](ids, "sevens"), "side", stream.Sink[string](txSink[string]{sides}), stream.Parallelism(1))
	plan, err := p.Plan()
	if err != nil {
		t.Fatal(err)
	}
	t.Log(plan.Describe())
	st, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	job := newJob(t, p, st, fastCheckpoints(2*time.Millisecond), quickRestarts(3))
	if err := runBounded(t, job); err != nil {
		t.Fatal(err)
	}
	if r := job.Stats().Restarts; r < 1 {
		t.Fatalf("%d restarts: the injected failure did not happen", r)
	}
	var wantMain []int64
	var wantSide []string
	for i := int64(0); i < n; i++ {
		if i%7 == 0 {
			wantSide = append(wantSide, strconv.FormatInt(i, 10))
		} else {
			wantMain = append(wantMain, i)
		}
	}
	gotMain := mains.values()
	slices.Sort(gotMain)
	if !slices.Equal(gotMain, wantMain) {
		t.Errorf("main output: %d records, want %d (lost or repeated records)", len(gotMain), len(wantMain))
	}
	gotSide := sides.values()
	slices.SortFunc(gotSide, func(a, b string) int {
		x, _ := strconv.ParseInt(a, 10, 64)
		y, _ := strconv.ParseInt(b, 10, 64)
		return int(x - y)
	})
	if !slices.Equal(gotSide, wantSide) {
		t.Errorf("side output: %d records, want %d: %v", len(gotSide), len(wantSide), diffHead(gotSide, wantSide))
	}
}

// diffHead describes the first difference of two slices.
func diffHead[T comparable](got, want []T) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf("first difference at %d: %v, want %v", i, got[i], want[i])
		}
	}
	return fmt.Sprintf("lengths %d and %d", len(got), len(want))
}
