package process_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/connector/datagen"
	"github.com/ingest-engine/ingest/connector/file"
	"github.com/ingest-engine/ingest/internal/testkit"
	"github.com/ingest-engine/ingest/operator/process"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/state"
	"github.com/ingest-engine/ingest/stream"
)

// bucketCount is the output of bucketCounter: records of a key in one
// second of event time.
type bucketCount struct {
	Key    int64 `json:"key"`
	Bucket int64 `json:"bucket"`
	Count  int64 `json:"count"`
}

const bucket = int64(time.Second)

// injected counts injected failures.
var injected, restored atomic.Int64

// bucketCounter counts a key's records per second of event time in keyed
// state and emits the count from an event-time timer at the second's end.
// failAt, when set, fails attempt 0 of subtask 0 at that record.
type bucketCounter struct {
	counts *state.ValueState[bucketKey, int64]
	rt     *runtime.Context
	seen   int64
	failAt int64
}

// bucketKey is (key, bucket start); its hash is the key's, so the state lives
// in the key's key group.
type bucketKey struct{ Key, Start int64 }

func (k bucketKey) HashKey() uint64 { return state.HashKey(k.Key) }

type bucketKeyCodec struct{}

func (bucketKeyCodec) Name() string { return "test.bucketKey" }
func (bucketKeyCodec) Append(dst []byte, k bucketKey) []byte {
	return state.Int64Codec{}.Append(state.Int64Codec{}.Append(dst, k.Key), k.Start)
}
func (bucketKeyCodec) Decode(src []byte) (bucketKey, int, error) {
	k, n, err := state.Int64Codec{}.Decode(src)
	if err != nil {
		return bucketKey{}, 0, err
	}
	s, m, err := state.Int64Codec{}.Decode(src[n:])
	return bucketKey{k, s}, n + m, err
}

func (f *bucketCounter) Open(s process.Setup[int64]) error {
	f.rt = s.Runtime
	if f.rt.Attempt > 0 && f.rt.Restored != nil {
		restored.Add(1)
	}
	var err error
	f.counts, err = state.NewValueState[bucketKey, int64](s.State, "counts", bucketKeyCodec{}, state.Int64Codec{})
	return err
}

func (f *bucketCounter) ProcessRecord(c *process.Context[int64, bucketCount], e datagen.Event) error {
	f.seen++
	if f.failAt > 0 && f.rt.Attempt == 0 && f.seen == f.failAt {
		injected.Add(1)
		return errors.New("injected failure")
	}
	start := c.Time() - c.Time()%bucket
	k := bucketKey{c.Key(), start}
	n, _ := f.counts.Get(k)
	f.counts.Update(k, n+1)
	c.SetTimer(process.EventTime, start+bucket-1)
	return nil
}

func (f *bucketCounter) OnTimer(c *process.Context[int64, bucketCount], d process.Domain) error {
	if d != process.EventTime {
		return fmt.Errorf("unexpected %v timer", d)
	}
	start := c.Time() + 1 - bucket
	k := bucketKey{c.Key(), start}
	n, ok := f.counts.Get(k)
	if !ok {
		return fmt.Errorf("timer for key %d bucket %d without a count", c.Key(), start)
	}
	f.counts.Clear(k)
	c.Emit(bucketCount{Key: c.Key(), Bucket: start, Count: n})
	return nil
}

// runBuckets runs datagen → key by → bucketCounter → file sink and returns
// the committed lines, sorted.
func runBuckets(t *testing.T, count int64, failAt int64) []string {
	t.Helper()
	src, err := datagen.Events(datagen.Config{Count: count, Rate: 40000, Keys: 7, EventInterval: 3 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p := stream.New("buckets", stream.DefaultParallelism(2))
	events := stream.From[datagen.Event](p, "events", src)
	keyed := stream.KeyBy(events, func(e datagen.Event) int64 { return e.Key })
	out := process.Keyed(keyed, "buckets", func() process.Function[datagen.Event, int64, bucketCount] {
		return &bucketCounter{failAt: failAt}
	}, stream.Parallelism(3))
	stream.To(out, "sink", file.JSONLines[bucketCount](dir+"/out"))
	ck := checkpoint.DefaultOptions()
	ck.Interval = 5 * time.Millisecond
	// Stepped 10 ms (one tick of the job's driver, so each step triggers a
	// checkpoint): the 20,000 records take 500 ms of the job's time, some
	// 50 checkpoints, and the failure after 1,500 comes after several.
	runStepped(t, p, stream.RunOptions{CheckpointDir: dir + "/ck", Checkpoint: ck, Restart: runtime.RestartOptions{Delay: time.Millisecond, MaxAttempts: 3}}, nil, 10*time.Millisecond)
	lines, err := testkit.ReadCommitted(dir + "/out")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range lines {
		got = append(got, string(l.Text))
	}
	slices.Sort(got)
	return got
}

// TestEventTimeTimersExactlyOnce: counts per key and second from keyed state
// and event-time timers equal an independent count, with and without a
// failure in the middle (state and pending timers restored from a
// checkpoint).
func TestEventTimeTimersExactlyOnce(t *testing.T) {
	const count = 20000
	want := map[bucketKey]int64{}
	start := datagen.DefaultStartTime.UnixNano()
	for id := int64(0); id < count; id++ {
		ts := start + id*int64(3*time.Millisecond)
		want[bucketKey{id % 7, ts - ts%bucket}]++
	}
	var wantLines []string
	for k, n := range want {
		b, _ := json.Marshal(bucketCount{Key: k.Key, Bucket: k.Start, Count: n})
		wantLines = append(wantLines, string(b))
	}
	slices.Sort(wantLines)
	for _, failAt := range []int64{0, 1500} {
		injected.Store(0)
		restored.Store(0)
		got := runBuckets(t, count, failAt)
		if failAt > 0 && (injected.Load() == 0 || restored.Load() == 0) {
			t.Fatalf("%d failures injected, %d subtasks restored from a checkpoint: the test did not exercise recovery", injected.Load(), restored.Load())
		}
		if !slices.Equal(got, wantLines) {
			t.Fatalf("failAt=%d: %d lines, want %d; first got %q", failAt, len(got), len(wantLines), got[:min(3, len(got))])
		}
	}
}

// firstSeen emits, for each key, the number of its records seen by the time
// a processing-time timer set 5ms after its first record fires.
type firstSeen struct {
	n     *state.ValueState[int64, int64]
	fired *atomic.Int64
}

func (f *firstSeen) Open(s process.Setup[int64]) error {
	var err error
	f.n, err = state.NewValueState[int64, int64](s.State, "n", s.KeyCodec, state.Int64Codec{})
	return err
}

func (f *firstSeen) ProcessRecord(c *process.Context[int64, int64], _ datagen.Event) error {
	n, ok := f.n.Get(c.Key())
	if !ok {
		c.SetTimer(process.ProcessingTime, c.Now()+int64(5*time.Millisecond))
	}
	f.n.Update(c.Key(), n+1)
	return nil
}

func (f *firstSeen) OnTimer(c *process.Context[int64, int64], d process.Domain) error {
	if d != process.ProcessingTime {
		return fmt.Errorf("unexpected %v timer", d)
	}
	if now := c.Now(); now < c.Time() {
		return fmt.Errorf("timer for %d fired early at %d", c.Time(), now)
	}
	n, _ := f.n.Get(c.Key())
	f.fired.Add(1)
	c.Emit(n)
	return nil
}

// TestProcessingTimeTimers: processing-time timers fire while records still
// flow (a rate-limited source), one per key, not before their time.
func TestProcessingTimeTimers(t *testing.T) {
	src, err := datagen.Events(datagen.Config{Count: 300, Rate: 1500, Keys: 5})
	if err != nil {
		t.Fatal(err)
	}
	var fired atomic.Int64
	p := stream.New("pt")
	events := stream.From[datagen.Event](p, "events", src)
	keyed := stream.KeyBy(events, func(e datagen.Event) int64 { return e.Key })
	out := process.Keyed(keyed, "first", func() process.Function[datagen.Event, int64, int64] {
		return &firstSeen{fired: &fired}
	})
	stream.To(out, "sink", stream.Discard[int64]())
	// Stepped one 10 ms checkpoint interval at a time: the 300 records take
	// 200 ms of the job's time, and each key's timer (5 ms after its first
	// record) comes due at the next step, while records still flow.
	ck := checkpoint.DefaultOptions()
	ck.Interval = 10 * time.Millisecond
	runStepped(t, p, stream.RunOptions{CheckpointDir: t.TempDir(), Checkpoint: ck}, nil, ck.Interval)
	if got := fired.Load(); got != 5 {
		t.Fatalf("%d processing-time timers fired, want one per key (5)", got)
	}
}

// onceTimer sets one processing-time timer per key, 150ms after the key's
// first record, and remembers in state that it did; the timer emits the key.
type onceTimer struct {
	set *state.ValueState[int64, bool]
	rt  *runtime.Context
}

func (f *onceTimer) Open(s process.Setup[int64]) error {
	f.rt = s.Runtime
	if f.rt.Attempt > 0 && f.rt.Restored != nil {
		restored.Add(1)
	}
	var err error
	f.set, err = state.NewValueState[int64, bool](s.State, "set", s.KeyCodec, state.BoolCodec{})
	return err
}

func (f *onceTimer) ProcessRecord(c *process.Context[int64, int64], _ datagen.Event) error {
	if _, ok := f.set.Get(c.Key()); !ok {
		f.set.Update(c.Key(), true)
		c.SetTimer(process.ProcessingTime, c.Now()+int64(150*time.Millisecond))
	}
	return nil
}

func (f *onceTimer) OnTimer(c *process.Context[int64, int64], d process.Domain) error {
	if f.rt.Attempt == 0 {
		return nil // attempt 0 fails before its timers are due
	}
	c.Emit(c.Key())
	return nil
}

// failAfterCheckpoint fails attempt 0 once a checkpoint completed.
type failAfterCheckpoint struct {
	stream.Stateless
	ctx       *runtime.Context
	completed bool
}

func (o *failAfterCheckpoint) Open(ctx *runtime.Context) error {
	o.ctx, o.Out = ctx, ctx.Output
	return nil
}
func (o *failAfterCheckpoint) NotifyComplete(int64) error { o.completed = true; return nil }
func (o *failAfterCheckpoint) ProcessBatch(_ int, r runtime.Records) error {
	if o.ctx.Attempt == 0 && o.completed {
		injected.Add(1)
		return errors.New("injected failure after a checkpoint")
	}
	return o.Out.Emit(r)
}

// TestProcessingTimersRestored: processing-time timers pending at a
// checkpoint fire after the job restores from it. The function sets each
// key's timer only once (remembered in state), so the output can only come
// from restored timers.
func TestProcessingTimersRestored(t *testing.T) {
	injected.Store(0)
	restored.Store(0)
	src, err := datagen.Events(datagen.Config{Count: 400, Rate: 1000, Keys: 4})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p := stream.New("pt-restore")
	events := stream.From[datagen.Event](p, "events", src)
	failing := stream.Add[datagen.Event, datagen.Event](events, &runtime.Node{ID: "fail", NewOperator: func() runtime.Operator { return &failAfterCheckpoint{} }})
	keyed := stream.KeyBy(failing, func(e datagen.Event) int64 { return e.Key })
	out := process.Keyed(keyed, "once", func() process.Function[datagen.Event, int64, int64] { return &onceTimer{} })
	stream.To(out, "sink", file.JSONLines[int64](dir+"/out"))
	ck := checkpoint.DefaultOptions()
	ck.Interval = 20 * time.Millisecond
	// On a clock stepped one interval per checkpoint, attempt 0 fails at
	// the first batch after its first checkpoint, some 40 ms of the job's
	// time in: its timers (150 ms after each key's first record) are
	// pending in that checkpoint however slow the machine.
	runStepped(t, p, stream.RunOptions{CheckpointDir: dir + "/ck", Checkpoint: ck, Restart: runtime.RestartOptions{Delay: time.Millisecond, MaxAttempts: 2}}, nil, ck.Interval)
	if injected.Load() == 0 || restored.Load() == 0 {
		t.Fatalf("%d failures, %d restores: recovery was not exercised", injected.Load(), restored.Load())
	}
	lines, err := testkit.ReadCommitted(dir + "/out")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range lines {
		got = append(got, string(l.Text))
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"0", "1", "2", "3"}) {
		t.Fatalf("keys emitted by restored timers: %q, want each of 0..3 once", got)
	}
}

// rearm sets a processing-time timer at Now() from its own firing, forever:
// "as soon as possible, again".
type rearm struct{ fired *atomic.Int64 }

func (f *rearm) Open(process.Setup[int64]) error { return nil }
func (f *rearm) ProcessRecord(c *process.Context[int64, int64], _ datagen.Event) error {
	c.SetTimer(process.ProcessingTime, c.Now())
	return nil
}
func (f *rearm) OnTimer(c *process.Context[int64, int64], _ process.Domain) error {
	f.fired.Add(1)
	c.SetTimer(process.ProcessingTime, c.Now())
	return nil
}

// TestTimerRearmedAtNowDoesNotStall: a timer that sets itself again at the
// current time fires in later turns of the task loop, so records, barriers
// and the end of the input still get through and the job finishes.
func TestTimerRearmedAtNowDoesNotStall(t *testing.T) {
	src, err := datagen.Events(datagen.Config{Count: 200, Rate: 2000, Keys: 3})
	if err != nil {
		t.Fatal(err)
	}
	var fired atomic.Int64
	p := stream.New("rearm")
	keyed := stream.KeyBy(stream.From[datagen.Event](p, "events", src), func(e datagen.Event) int64 { return e.Key })
	out := process.Keyed(keyed, "rearm", func() process.Function[datagen.Event, int64, int64] { return &rearm{fired: &fired} })
	stream.To(out, "sink", stream.Discard[int64]())
	ck := checkpoint.DefaultOptions()
	ck.Interval = 10 * time.Millisecond
	job := runStepped(t, p, stream.RunOptions{CheckpointDir: t.TempDir(), Checkpoint: ck}, nil, ck.Interval)
	if fired.Load() < 3 || job.Stats().Completed < 2 {
		t.Fatalf("timer fired %d times, %d checkpoints completed", fired.Load(), job.Stats().Completed)
	}
}
