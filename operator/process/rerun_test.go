package process_test

import (
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/clock"
	"github.com/ingest-engine/ingest/connector/datagen"
	"github.com/ingest-engine/ingest/connector/file"
	"github.com/ingest-engine/ingest/internal/testkit"
	"github.com/ingest-engine/ingest/operator/process"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/state"
	"github.com/ingest-engine/ingest/stream"
)

// lateTimer sets one processing-time timer per key, 300ms after the key's
// first record; the bounded input ends long before, so per the package doc
// ("Processing-time timers still pending when the input ends do not fire")
// the timer never fires.
type lateTimer struct {
	set *state.ValueState[int64, bool]
}

func (f *lateTimer) Open(s process.Setup[int64]) error {
	var err error
	f.set, err = state.NewValueState[int64, bool](s.State, "set", s.KeyCodec, state.BoolCodec{})
	return err
}

func (f *lateTimer) ProcessRecord(c *process.Context[int64, int64], _ datagen.Event) error {
	if _, ok := f.set.Get(c.Key()); !ok {
		f.set.Update(c.Key(), true)
		c.SetTimer(process.ProcessingTime, c.Now()+int64(300*time.Millisecond))
	}
	return nil
}

func (f *lateTimer) OnTimer(c *process.Context[int64, int64], _ process.Domain) error {
	c.Emit(c.Key())
	return nil
}

// TestRerunOfFinishedPipelineFiresNothing: a bounded pipeline ends
// (MaxWatermark: pending processing-time timers are suppressed) and its final
// checkpoint holds those timers. Rerunning it on the same checkpoint directory
// restores them; the operator must see that the restored input had ended (the
// runtime does not deliver MaxWatermark again), so nothing fires and the rerun
// commits nothing.
func TestRerunOfFinishedPipelineFiresNothing(t *testing.T) {
	dir := t.TempDir()
	fake := clock.NewFake(epoch) // both runs' clock: the outage below is on it
	run := func() []testkit.Line {
		src, err := datagen.Events(datagen.Config{Count: 40, Keys: 4})
		if err != nil {
			t.Fatal(err)
		}
		p := stream.New("rerun")
		events := stream.From[datagen.Event](p, "events", src)
		keyed := stream.KeyBy(events, func(e datagen.Event) int64 { return e.Key })
		out := process.Keyed(keyed, "late", func() process.Function[datagen.Event, int64, int64] { return &lateTimer{} })
		stream.To(out, "sink", file.JSONLines[int64](dir+"/out"))
		runStepped(t, p, stream.RunOptions{CheckpointDir: dir + "/ck", Checkpoint: checkpoint.DefaultOptions(), Restart: runtime.RestartOptions{Delay: time.Millisecond, MaxAttempts: 1}}, fake, 10*time.Millisecond)
		lines, err := testkit.ReadCommitted(dir + "/out")
		if err != nil {
			t.Fatal(err)
		}
		return lines
	}
	if got := run(); len(got) != 0 {
		t.Fatalf("first run committed %d lines, want 0 (timers pending at end of input do not fire)", len(got))
	}
	fake.Advance(400 * time.Millisecond) // the timers' time passes "during the outage"
	if got := run(); len(got) != 0 {
		t.Fatalf("rerun of a finished pipeline committed %d new lines from timers suppressed at end of input", len(got))
	}
}
