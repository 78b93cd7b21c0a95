package kafka_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/connector/kafka"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/watermark"
)

// srcCollector is a runtime.Output keeping every record.
type srcCollector struct {
	recs []runtime.Record[srcEvent]
}

func (c *srcCollector) Emit(r runtime.Records) error {
	b, ok := r.(runtime.Batch[srcEvent])
	if !ok {
		return errors.New("collector: unexpected batch type")
	}
	c.recs = append(c.recs, b...)
	return nil
}

func (c *srcCollector) ids() []int64 {
	ids := make([]int64, len(c.recs))
	for i, r := range c.recs {
		ids[i] = r.Value.ID
	}
	return ids
}

// srcSub is one opened source subtask with its output.
type srcSub struct {
	src runtime.Source
	out *srcCollector
}

// srcOpen opens subtask s of p of src, restored from inline when non-nil.
func srcOpen(t *testing.T, src *kafka.Source[srcEvent], s, p int, inline []byte) srcSub {
	t.Helper()
	st, err := srcTryOpen(t, src, s, p, inline)
	if err != nil {
		t.Fatalf("Open subtask %d of %d: %v", s, p, err)
	}
	return st
}

func srcTryOpen(t *testing.T, src *kafka.Source[srcEvent], s, p int, inline []byte) (srcSub, error) {
	t.Helper()
	return srcTryOpenContext(t, src, &runtime.Context{Task: checkpoint.TaskID{Operator: "events", Subtask: s}, Parallelism: p, MaxParallelism: 128, JobID: "job"}, inline)
}

// srcOpenClocked opens the only subtask of src on processing time clock.
func srcOpenClocked(t *testing.T, src *kafka.Source[srcEvent], clock func() time.Time) srcSub {
	t.Helper()
	st, err := srcTryOpenContext(t, src, &runtime.Context{Task: checkpoint.TaskID{Operator: "events"}, Parallelism: 1, MaxParallelism: 128, JobID: "job", Clock: clock}, nil)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return st
}

func srcTryOpenContext(t *testing.T, src *kafka.Source[srcEvent], ctx *runtime.Context, inline []byte) (srcSub, error) {
	t.Helper()
	out := &srcCollector{}
	st := runtime.EraseSource(src.NewSubtask())
	ctx.Output = out
	if inline != nil {
		ctx.Restored = &checkpoint.SubtaskState{Task: ctx.Task, Inline: inline, Watermark: runtime.MinWatermark}
	}
	t.Cleanup(func() { _ = st.Close() })
	return srcSub{src: st, out: out}, st.Open(ctx)
}

// read calls Read until cond holds for the last result, failing after 10s.
func (s srcSub) read(t *testing.T, cond func(runtime.ReadResult) bool) runtime.ReadResult {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		res, err := s.src.Read()
		if err != nil {
			t.Fatalf("Read: %v", err)
		}
		if cond(res) {
			return res
		}
		time.Sleep(res.Wait)
	}
	t.Fatalf("condition not reached within 10s; %d records read", len(s.out.recs))
	return runtime.ReadResult{}
}

// readN reads until n records were emitted in total.
func (s srcSub) readN(t *testing.T, n int) runtime.ReadResult {
	t.Helper()
	return s.read(t, func(runtime.ReadResult) bool { return len(s.out.recs) >= n })
}

func (s srcSub) position(t *testing.T) []byte {
	t.Helper()
	pos, err := s.src.Position()
	if err != nil {
		t.Fatal(err)
	}
	return pos
}

// srcCheckPartitionOrder checks that the events of each partition came in
// id order (events i ≡ p mod partitions, increasing) without gaps from the
// first one seen.
func srcCheckPartitionOrder(t *testing.T, recs []runtime.Record[srcEvent], partitions int64) {
	t.Helper()
	last := map[int64]int64{}
	for _, r := range recs {
		p := r.Value.ID % partitions
		if prev, ok := last[p]; ok && r.Value.ID != prev+partitions {
			t.Fatalf("partition %d: event %d follows %d", p, r.Value.ID, prev)
		}
		last[p] = r.Value.ID
		if r.Time != srcEventTime(r.Value.ID) {
			t.Fatalf("event %d: time %d, want %d", r.Value.ID, r.Time, srcEventTime(r.Value.ID))
		}
	}
}

func TestSourceConfig(t *testing.T) {
	t.Parallel()
	dec := srcDecode
	for _, tc := range []struct {
		name string
		cfg  kafka.SourceConfig
		want string
	}{
		{"no brokers", kafka.SourceConfig{Topic: "t"}, "at least one seed broker"},
		{"no topic", kafka.SourceConfig{Brokers: []string{"b:9092"}}, "topic is required"},
		{"bad start", kafka.SourceConfig{Brokers: []string{"b:9092"}, Topic: "t", Start: "middle"}, `start "middle"`},
		{"bad stop", kafka.SourceConfig{Brokers: []string{"b:9092"}, Topic: "t", StopAt: "earliest"}, `stop_at "earliest"`},
		{"negative delay", kafka.SourceConfig{Brokers: []string{"b:9092"}, Topic: "t", Watermark: watermark.Strategy{MaxDelay: -1}}, "max_delay"},
		{"group option", kafka.SourceConfig{Brokers: []string{"b:9092"}, Topic: "t", ClientOptions: []kgo.Opt{kgo.ConsumerGroup("g")}}, "ConsumerGroup"},
		{"topics option", kafka.SourceConfig{Brokers: []string{"b:9092"}, Topic: "t", ClientOptions: []kgo.Opt{kgo.ConsumeTopics("x")}}, "ConsumeTopics"},
	} {
		_, err := kafka.NewSource(tc.cfg, dec)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: NewSource error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
	if _, err := kafka.NewSource[srcEvent](kafka.SourceConfig{Brokers: []string{"b:9092"}, Topic: "t"}, nil); err == nil {
		t.Error("NewSource accepted a nil decode function")
	}
	src, err := kafka.NewSource(kafka.SourceConfig{Brokers: []string{"b:9092"}, Topic: "t"}, dec)
	if err != nil {
		t.Fatal(err)
	}
	c := src.Config()
	if c.Start != kafka.StartEarliest || c.StopAt != kafka.StopNever || c.ReadUncommitted || c.DiscoveryInterval != kafka.DefaultDiscoveryInterval ||
		c.PollInterval != kafka.DefaultPollInterval || c.RequestTimeout != kafka.DefaultRequestTimeout || c.MaxBatch != kafka.DefaultMaxBatch {
		t.Errorf("defaults: %+v", c)
	}
	if src.Descriptor().Capabilities.SourceGuarantee() != runtime.ExactlyOnce || src.Descriptor().Type != "kafka" {
		t.Errorf("Guarantee %v, Type %q", src.Descriptor().Capabilities.SourceGuarantee(), src.Descriptor().Type)
	}
	if d := src.Describe(); !strings.Contains(d, "kafka topic t") || !strings.Contains(d, "read committed") {
		t.Errorf("Describe = %q", d)
	}
}

// A subtask reads its partitions in offset order, and a subtask restored
// from its position continues exactly after the last record emitted.
func TestSourceReadAndResume(t *testing.T) {
	t.Parallel()
	const parts = 3
	k := srcNewKafka(t, parts)
	k.produceEvents(t, 0, 900, 7, parts)
	cfg := k.config()
	cfg.MaxBatch = 100
	src := srcNewSource(t, cfg)

	a := srcOpen(t, src, 0, 1, nil)
	a.readN(t, 450)
	pos := a.position(t)
	firstIDs := a.out.ids()
	srcCheckPartitionOrder(t, a.out.recs, parts)
	if err := a.src.Close(); err != nil {
		t.Fatal(err)
	}
	k.produceEvents(t, 900, 1200, 7, parts)

	b := srcOpen(t, src, 0, 1, pos)
	b.readN(t, 1200-len(firstIDs))
	all := append(firstIDs, b.out.ids()...)
	srcCheckPartitionOrder(t, append(slices.Clone(a.out.recs), b.out.recs...), parts)
	slices.Sort(all)
	if !slices.Equal(all, srcIDs(0, 1200)) {
		t.Fatalf("read %d events before and after the restore, want each of 0..1199 once", len(all))
	}
	// Nothing more arrives.
	res, err := b.src.Read()
	if err != nil || len(b.out.recs) != 1200-len(firstIDs) {
		t.Fatalf("extra read: %v, %d records", err, len(b.out.recs))
	}
	if res.Wait <= 0 {
		t.Errorf("an empty read asked for no wait")
	}
	// The position names every partition with its next offset.
	var p struct {
		Topic      string `json:"topic"`
		Partitions []struct {
			P    int32 `json:"p"`
			Next int64 `json:"next"`
		} `json:"partitions"`
	}
	if err := json.Unmarshal(b.position(t), &p); err != nil {
		t.Fatal(err)
	}
	ends := k.endOffsets(t)
	if p.Topic != k.topic || len(p.Partitions) != parts {
		t.Fatalf("position %+v", p)
	}
	for _, pp := range p.Partitions {
		if pp.Next != ends[pp.P] {
			t.Errorf("partition %d: next %d, want the end offset %d", pp.P, pp.Next, ends[pp.P])
		}
	}
}

// Partition p is read by subtask p % parallelism; a subtask without
// partitions is idle, or exhausted when bounded.
func TestSourcePartitionAssignment(t *testing.T) {
	t.Parallel()
	const parts = 5
	k := srcNewKafka(t, parts)
	k.produceEvents(t, 0, 500, 3, parts)
	src := srcNewSource(t, k.config())
	for s := range 2 {
		sub := srcOpen(t, src, s, 2, nil)
		want := 0
		for i := range int64(500) {
			if int(i%parts)%2 == s {
				want++
			}
		}
		sub.readN(t, want)
		for _, r := range sub.out.recs {
			if p := int(r.Value.ID % parts); p%2 != s {
				t.Fatalf("subtask %d of 2 read event %d of partition %d", s, r.Value.ID, p)
			}
		}
	}
	// Six subtasks over five partitions: subtask 5 has none.
	empty := srcOpen(t, src, 5, 6, nil)
	if res := empty.read(t, func(runtime.ReadResult) bool { return true }); !res.Idle || res.Exhausted {
		t.Errorf("a subtask without partitions reported %+v, want idle", res)
	}
	cfg := k.config()
	cfg.StopAt = kafka.StopAtLatest
	bounded := srcOpen(t, srcNewSource(t, cfg), 5, 6, nil)
	if res := bounded.read(t, func(runtime.ReadResult) bool { return true }); !res.Exhausted {
		t.Errorf("a bounded subtask without partitions reported %+v, want exhausted", res)
	}
}

// stop_at latest reads up to the end offsets found at the first start, also
// after a restore, however much is produced meanwhile.
func TestSourceStopAtLatest(t *testing.T) {
	t.Parallel()
	const parts = 3
	k := srcNewKafka(t, parts)
	k.produceEvents(t, 0, 600, 5, parts)
	cfg := k.config()
	cfg.StopAt = kafka.StopAtLatest
	cfg.MaxBatch = 50
	src := srcNewSource(t, cfg)

	a := srcOpen(t, src, 0, 1, nil)
	k.produceEvents(t, 600, 900, 5, parts) // after the ends were fixed
	a.readN(t, 200)
	mid := a.position(t)
	midIDs := a.out.ids()
	a.read(t, func(r runtime.ReadResult) bool { return r.Exhausted })
	got := a.out.ids()
	slices.Sort(got)
	if !slices.Equal(got, srcIDs(0, 600)) {
		t.Fatalf("bounded read %d events, want exactly 0..599", len(got))
	}
	end := a.position(t)

	// Restored from the middle: the rest up to the same ends.
	k.produceEvents(t, 900, 1000, 5, parts)
	b := srcOpen(t, src, 0, 1, mid)
	b.read(t, func(r runtime.ReadResult) bool { return r.Exhausted })
	rest := append(midIDs, b.out.ids()...)
	slices.Sort(rest)
	if !slices.Equal(rest, srcIDs(0, 600)) {
		t.Fatalf("restored bounded read: %d events in all, want exactly 0..599", len(rest))
	}
	// Restored from the end: exhausted at once.
	c := srcOpen(t, src, 0, 1, end)
	if res, err := c.src.Read(); err != nil || !res.Exhausted || len(c.out.recs) != 0 {
		t.Fatalf("restored at the end: %+v, %v, %d records", res, err, len(c.out.recs))
	}
}

// Watermarks are per partition: the subtask's is the minimum over its
// partitions, and a partition quiet for idle_timeout stops holding it.
func TestSourcePerPartitionWatermarks(t *testing.T) {
	t.Parallel()
	for _, idle := range []time.Duration{0, 150 * time.Millisecond} {
		k := srcNewKafka(t, 2)
		cfg := k.config()
		cfg.Watermark = watermark.Strategy{MaxDelay: 100 * time.Millisecond, IdleTimeout: idle}
		ev := func(p int32, id int64) *kgo.Record {
			v, _ := json.Marshal(srcEvent{ID: id, TS: srcEventTime(id) / int64(time.Millisecond)})
			return &kgo.Record{Partition: p, Value: v}
		}
		// Processing time is the test's: it moves only where the test
		// moves it, so idleness does not depend on how busy the machine is.
		now := time.Now()
		clock := func() time.Time { return now }
		// Partition 1 has one early event; partition 0 goes on.
		k.produce(t, ev(1, 100), ev(0, 50), ev(0, 500))
		sub := srcOpenClocked(t, srcNewSource(t, cfg), clock)
		res := sub.readN(t, 3)
		p1 := srcEventTime(100) - int64(100*time.Millisecond) - 1
		if res.Watermark != p1 {
			t.Fatalf("idle %v: watermark %d, want partition 1's %d (the minimum)", idle, res.Watermark, p1)
		}
		// Keep partition 0 busy for 600ms of processing time, one event
		// every 10ms, while partition 1 stays quiet.
		next := int64(600)
		for range 60 {
			k.produce(t, ev(0, next))
			next += 100
			sub.readN(t, int(3+(next-600)/100))
			now = now.Add(10 * time.Millisecond)
		}
		if idle == 0 {
			if res = sub.readN(t, 0); res.Watermark != p1 || res.Idle {
				t.Errorf("no idle timeout: watermark %d idle %v, want partition 1's %d: a quiet partition holds it", res.Watermark, res.Idle, p1)
			}
			continue
		}
		// Partition 1 has been quiet for 600ms: once a listing of end
		// offsets confirms it has nothing more, it no longer holds the
		// watermark. Partition 0 read its last event 10ms ago: active.
		p0 := srcEventTime(next-100) - int64(100*time.Millisecond) - 1
		res = sub.read(t, func(r runtime.ReadResult) bool { return r.Watermark == p0 && !r.Idle })
		if res.Watermark != p0 || res.Idle {
			t.Errorf("idle timeout %v: watermark %d idle %v, want partition 0's %d: the quiet partition must not hold it", idle, res.Watermark, res.Idle, p0)
		}
		// Both quiet: the subtask is idle, and its watermark does not go
		// back.
		now = now.Add(2 * idle)
		res = sub.read(t, func(r runtime.ReadResult) bool { return r.Idle })
		if !res.Idle || res.Watermark < p0 {
			t.Errorf("both partitions quiet: watermark %d idle %v, want idle at no less than %d", res.Watermark, res.Idle, p0)
		}
	}
}

// A record the decode function rejects fails the read with a DecodeError
// naming topic, partition and offset.
func TestSourceDecodeError(t *testing.T) {
	t.Parallel()
	k := srcNewKafka(t, 2)
	k.produceEvents(t, 0, 4, 2, 2)
	k.produce(t, &kgo.Record{Partition: 1, Value: []byte(`{"id": 9, "ts": "yesterday`)})
	sub := srcOpen(t, srcNewSource(t, k.config()), 0, 1, nil)
	var err error
	deadline := time.Now().Add(10 * time.Second)
	for err == nil && time.Now().Before(deadline) {
		_, err = sub.src.Read()
		time.Sleep(time.Millisecond)
	}
	var de *kafka.DecodeError
	if !errors.As(err, &de) {
		t.Fatalf("Read error %v, want a *kafka.DecodeError", err)
	}
	if de.Topic != k.topic || de.Partition != 1 || de.Offset != 2 {
		t.Errorf("DecodeError names topic %s partition %d offset %d, want %s 1 2", de.Topic, de.Partition, de.Offset, k.topic)
	}
	for _, want := range []string{k.topic, "partition 1", "offset 2", "not the expected JSON"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

// Transaction markers take offsets: with read_committed the position moves
// past them and past aborted records, and a bounded source whose end is the
// last stable offset finishes.
func TestSourceTransactionalInput(t *testing.T) {
	t.Parallel()
	k := srcNewKafka(t, 1)
	tx, err := kgo.NewClient(kgo.SeedBrokers(k.brokers...), kgo.TransactionalID("src-"+k.topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	ctx := context.Background()
	produceTx := func(commit bool, ids ...int64) {
		if err := tx.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			v, _ := json.Marshal(srcEvent{ID: id, TS: srcEventTime(id) / int64(time.Millisecond)})
			if err := tx.ProduceSync(ctx, &kgo.Record{Topic: k.topic, Value: v}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	produceTx(true, 0, 1)
	produceTx(false, 100, 101) // aborted
	produceTx(true, 2)
	produceTx(false, 102) // aborted, last in the log
	end := k.endOffsets(t)[0]

	cfg := k.config()
	cfg.StopAt = kafka.StopAtLatest
	sub := srcOpen(t, srcNewSource(t, cfg), 0, 1, nil)
	sub.read(t, func(r runtime.ReadResult) bool { return r.Exhausted })
	if got := sub.out.ids(); !slices.Equal(got, []int64{0, 1, 2}) {
		t.Fatalf("read committed events %v, want [0 1 2]", got)
	}
	var pos struct {
		Partitions []struct {
			Next int64  `json:"next"`
			End  *int64 `json:"end"`
		} `json:"partitions"`
	}
	if err := json.Unmarshal(sub.position(t), &pos); err != nil {
		t.Fatal(err)
	}
	if pp := pos.Partitions[0]; pp.Next != end || pp.End == nil || *pp.End != end {
		t.Errorf("position next %d end %v, want both %d (past the last abort marker)", pp.Next, pp.End, end)
	}

	// read_uncommitted sees the aborted records too.
	cfg.ReadUncommitted = true
	un := srcOpen(t, srcNewSource(t, cfg), 0, 1, nil)
	un.read(t, func(r runtime.ReadResult) bool { return r.Exhausted })
	if got := un.out.ids(); !slices.Equal(got, []int64{0, 1, 100, 101, 2, 102}) {
		t.Fatalf("read uncommitted events %v, want [0 1 100 101 2 102]", got)
	}
}

// Offsets are copied to the consumer group only for completed checkpoints,
// the newest completed one winning.
func TestSourceGroupCommitAfterComplete(t *testing.T) {
	t.Parallel()
	k := srcNewKafka(t, 2)
	k.produceEvents(t, 0, 100, 3, 2)
	cfg := k.config()
	cfg.Group = "monitor-" + k.topic
	sub := srcOpen(t, srcNewSource(t, cfg), 0, 1, nil)
	type checkpointer interface {
		PositionAt(id int64) ([]byte, error)
		NotifyComplete(id int64) error
	}
	cp, ok := sub.src.(checkpointer)
	if !ok {
		t.Fatal("the source subtask does not implement PositionAt and NotifyComplete")
	}
	groupOffsets := func() map[int32]int64 {
		resp, err := k.adm.FetchOffsets(context.Background(), cfg.Group)
		if errors.Is(err, kerr.GroupIDNotFound) {
			return map[int32]int64{}
		}
		if err != nil {
			t.Fatal(err)
		}
		out := map[int32]int64{}
		resp.Each(func(o kadm.OffsetResponse) { out[o.Partition] = o.At })
		return out
	}
	waitGroup := func(want map[int32]int64) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if got := groupOffsets(); len(got) == len(want) && func() bool {
				for p, o := range want {
					if got[p] != o {
						return false
					}
				}
				return true
			}() {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
		t.Fatalf("group offsets %v, want %v", groupOffsets(), want)
	}

	sub.readN(t, 100)
	if _, err := cp.PositionAt(1); err != nil {
		t.Fatal(err)
	}
	first := k.endOffsets(t)
	k.produceEvents(t, 100, 160, 3, 2)
	sub.readN(t, 160)
	if _, err := cp.PositionAt(2); err != nil {
		t.Fatal(err)
	}
	k.produceEvents(t, 160, 200, 3, 2)
	sub.readN(t, 200)
	if _, err := cp.PositionAt(3); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if got := groupOffsets(); len(got) != 0 {
		t.Fatalf("offsets %v committed before any checkpoint completed", got)
	}
	if err := cp.NotifyComplete(1); err != nil {
		t.Fatal(err)
	}
	waitGroup(first)
	// Checkpoint 2 failed; 3 completes and subsumes it.
	if err := cp.NotifyComplete(3); err != nil {
		t.Fatal(err)
	}
	waitGroup(k.endOffsets(t))
	// The group's offsets are never read: a fresh start begins at earliest.
	fresh := srcOpen(t, srcNewSource(t, cfg), 0, 1, nil)
	fresh.readN(t, 200)
}

// A subtask's own position written at another parallelism (the runtime
// hands all positions to every subtask then), for another topic, or at an
// offset the log no longer has is refused at Open with an error saying why.
func TestSourceRestoreRefusals(t *testing.T) {
	t.Parallel()
	k := srcNewKafka(t, 4)
	k.produceEvents(t, 0, 40, 2, 4)
	cfg := k.config()
	src := srcNewSource(t, cfg)
	sub := srcOpen(t, src, 0, 2, nil)
	sub.readN(t, 20)
	pos := sub.position(t)

	if _, err := srcTryOpen(t, src, 0, 3, pos); err == nil || !strings.Contains(err.Error(), "must get its own position") {
		t.Errorf("restore at parallelism 3 from 2: %v", err)
	}
	other := cfg
	other.Topic = k.topic + "-other"
	if _, err := srcTryOpen(t, srcNewSource(t, other), 0, 2, pos); err == nil || !strings.Contains(err.Error(), "cannot resume from another topic") {
		t.Errorf("restore for another topic: %v", err)
	}
	// A topic that does not exist.
	missing := cfg
	missing.Topic = k.topic + "-missing"
	if _, err := srcTryOpen(t, srcNewSource(t, missing), 0, 1, nil); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("open of a missing topic: %v", err)
	}
	// Retention deleted records the checkpoint still needs.
	if _, err := k.adm.DeleteRecords(context.Background(), kadm.Offsets{k.topic: {0: {Topic: k.topic, Partition: 0, At: 8, LeaderEpoch: -1}}}); err != nil {
		t.Fatal(err)
	}
	early := []byte(`{"v":1,"topic":"` + k.topic + `","subtask":0,"parallelism":2,"partitions":[{"p":0,"next":3},{"p":2,"next":0}]}`)
	if _, err := srcTryOpen(t, src, 0, 2, early); err == nil || !strings.Contains(err.Error(), "deleted") || !strings.Contains(err.Error(), "partition 0") {
		t.Errorf("restore before the log start: %v", err)
	}
}

// New partitions are found by discovery and read from their start.
func TestSourceDiscoversPartitions(t *testing.T) {
	t.Parallel()
	k := srcNewKafka(t, 2)
	k.produceEvents(t, 0, 20, 2, 2)
	cfg := k.config()
	cfg.DiscoveryInterval = 20 * time.Millisecond
	sub := srcOpen(t, srcNewSource(t, cfg), 0, 1, nil)
	sub.readN(t, 20)
	if _, err := k.adm.CreatePartitions(context.Background(), 2, k.topic); err != nil {
		t.Fatal(err)
	}
	k.produceEvents(t, 20, 60, 2, 4)
	sub.readN(t, 60)
	got := sub.out.ids()
	slices.Sort(got)
	if !slices.Equal(got, srcIDs(0, 60)) {
		t.Fatalf("read %d events, want each of 0..59 once: %v", len(got), got)
	}
	var pos struct {
		Partitions []struct{ P int32 } `json:"partitions"`
	}
	if err := json.Unmarshal(sub.position(t), &pos); err != nil {
		t.Fatal(err)
	}
	if len(pos.Partitions) != 4 {
		t.Errorf("position holds %d partitions, want 4", len(pos.Partitions))
	}
}

func TestJSONEventTime(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 6_000_000, time.UTC)
	for _, tc := range []struct {
		field, value string
		want         int64
		err          string
	}{
		{"ts", `{"ts": "2026-01-02T03:04:05.006Z"}`, at.UnixNano(), ""},
		{"ts", `{"ts": "2026-01-02T04:04:05.006+01:00"}`, at.UnixNano(), ""},
		{"ts", `{"ts": 1767323045006}`, at.UnixNano(), ""},
		{"ts", `{"ts": 1767323045006.5}`, at.UnixNano() + 500_000, ""},
		{"ts", `{"ts": -1000}`, -int64(time.Second), ""},
		{"meta.ts", `{"meta": {"ts": 1767323045006}}`, at.UnixNano(), ""},
		{"ts", `{"other": 1}`, 0, "missing"},
		{"ts", `{"ts": null}`, 0, "null"},
		{"ts", `{"ts": true}`, 0, "neither an RFC 3339 string nor epoch milliseconds"},
		{"ts", `{"ts": "03/04/2026"}`, 0, "not RFC 3339"},
		{"ts", `{"ts": 99999999999999999}`, 0, "outside the years"},
		{"ts", `[1, 2]`, 0, "not a JSON object"},
		{"meta.ts", `{"meta": 5}`, 0, `"meta": not a JSON object`},
	} {
		got, err := kafka.JSONEventTime(tc.field)(kafka.Message{Value: []byte(tc.value)})
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s in %s: %v", tc.field, tc.value, err)
		case tc.err == "" && got != tc.want:
			t.Errorf("%s in %s: %d, want %d", tc.field, tc.value, got, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s in %s: error %v, want one containing %q", tc.field, tc.value, err, tc.err)
		}
	}
	ts := time.UnixMilli(1234567)
	if got, err := kafka.RecordTimestamp(kafka.Message{Timestamp: ts}); err != nil || got != ts.UnixNano() {
		t.Errorf("RecordTimestamp = %d, %v", got, err)
	}
	dec := kafka.DecodeJSON[srcEvent](nil)
	v, tm, err := dec(kafka.Message{Value: []byte(`{"id": 4, "key": 1}`), Timestamp: ts})
	if err != nil || v.ID != 4 || tm != ts.UnixNano() {
		t.Errorf("DecodeJSON with the record timestamp: %+v %d %v", v, tm, err)
	}
	if _, _, err := dec(kafka.Message{Value: []byte(`not json`)}); err == nil {
		t.Error("DecodeJSON accepted a value that is not JSON")
	}
}

// Close ends every goroutine the subtask started (discovery, group commits,
// the client). Not parallel: it counts the process's goroutines.
func TestSourceCloseLeavesNoGoroutines(t *testing.T) {
	before := goleak.IgnoreCurrent()
	k := srcNewKafka(t, 2)
	k.produceEvents(t, 0, 50, 2, 2)
	cfg := k.config()
	cfg.Group = "leak-" + k.topic
	cfg.DiscoveryInterval = 10 * time.Millisecond
	sub := srcOpen(t, srcNewSource(t, cfg), 0, 1, nil)
	sub.readN(t, 50)
	cp := sub.src.(interface {
		PositionAt(int64) ([]byte, error)
		NotifyComplete(int64) error
	})
	if _, err := cp.PositionAt(1); err != nil {
		t.Fatal(err)
	}
	if err := cp.NotifyComplete(1); err != nil {
		t.Fatal(err)
	}
	if err := sub.src.Close(); err != nil {
		t.Fatal(err)
	}
	if err := sub.src.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	k.cl.Close()
	k.cluster.Close()
	goleak.VerifyNone(t, before)
}

// start latest skips what was in the topic at open; what is produced after
// is read, and the position holds concrete offsets from the first barrier.
func TestSourceStartLatest(t *testing.T) {
	t.Parallel()
	k := srcNewKafka(t, 2)
	k.produceEvents(t, 0, 100, 2, 2)
	cfg := k.config()
	cfg.Start = kafka.StartLatest
	src := srcNewSource(t, cfg)
	sub := srcOpen(t, src, 0, 1, nil)
	pos := sub.position(t) // before anything was read: the end offsets
	k.produceEvents(t, 100, 150, 2, 2)
	sub.readN(t, 50)
	got := sub.out.ids()
	slices.Sort(got)
	if !slices.Equal(got, srcIDs(100, 150)) {
		t.Fatalf("start latest read %v, want 100..149", got)
	}
	// Restored from the position taken before the new records: they are
	// read again, not skipped as "latest" would.
	re := srcOpen(t, src, 0, 1, pos)
	re.readN(t, 50)
	again := re.out.ids()
	slices.Sort(again)
	if !slices.Equal(again, srcIDs(100, 150)) {
		t.Fatalf("restored start-latest source read %v, want 100..149", again)
	}
}
