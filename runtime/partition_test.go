package runtime

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/state"
)

// testChannels returns the channels of one producer subtask towards n
// consumer subtasks, each holding capacity messages, and the receiving ends.
func testChannels(ctx context.Context, n, capacity, maxP int) (*channels, []chan *message) {
	chs := &channels{ctx: ctx, maxParallelism: maxP, sent: new(atomic.Int64)}
	raw := make([]chan *message, n)
	for i := range raw {
		raw[i] = make(chan *message, capacity)
		chs.out = append(chs.out, raw[i])
	}
	return chs, raw
}

// drain returns the messages waiting on c, oldest first, without blocking.
func drain(c chan *message) []*message {
	var ms []*message
	for {
		select {
		case m := <-c:
			ms = append(ms, m)
		default:
			return ms
		}
	}
}

// intBatch returns records with values from..to-1; each record's time is its
// position in the whole test stream so order can be checked.
func intBatch(from, to int, key func(int) int) Batch[int] {
	b := make(Batch[int], 0, to-from)
	for i := from; i < to; i++ {
		b = append(b, Record[int]{Value: key(i), Time: int64(i)})
	}
	return b
}

func intHash(v int) uint64 { return state.HashKey(v) }

// DESIGN.md §4 and §6 (hash partitioner: key → hash → key group → subtask):
// every record reaches the consumer subtask owning its key group, so all
// records of one key reach one subtask; records keep their order per
// consumer; and records travel in batches, not one channel send per record.
func TestHashRoutesEveryRecordToItsKeyGroupOwner(t *testing.T) {
	t.Parallel()
	const total = 10_000
	for _, maxP := range []int{state.DefaultMaxParallelism, 16} {
		for _, p := range []int{1, 2, 3, 5, 7, maxP} {
			t.Run(fmt.Sprintf("maxP=%d/p=%d", maxP, p), func(t *testing.T) {
				// Room for a message per record: a writer that sent too many
				// messages fails the count below instead of blocking.
				chs, raw := testChannels(context.Background(), p, total, maxP)
				w := Hash(intHash).newWriter(chs)
				key := func(i int) int { return i % 997 }
				// Uneven batch sizes cross DefaultBatchSize boundaries.
				cuts := []int{0, 3000, 3001, 8000, total}
				for i := 1; i < len(cuts); i++ {
					if err := w.emit(intBatch(cuts[i-1], cuts[i], key), nil); err != nil {
						t.Fatal(err)
					}
				}
				if err := w.flush(); err != nil {
					t.Fatal(err)
				}
				const flushes = 1
				owner := map[int]int{}
				seen := 0
				messages := 0
				for c, ch := range raw {
					ms := drain(ch)
					messages += len(ms)
					last := int64(-1)
					for mi, m := range ms {
						if m.kind != kindRecords {
							t.Fatalf("channel %d: message kind %d, want records", c, m.kind)
						}
						b := m.records.(Batch[int])
						// Only the flush may send a partial batch, and only as the
						// channel's last message.
						if len(b) != DefaultBatchSize && mi != len(ms)-1 {
							t.Errorf("channel %d message %d holds %d records; only the last (flushed) one may hold fewer than %d", c, mi, len(b), DefaultBatchSize)
						}
						for _, r := range b {
							want := state.SubtaskForKeyGroup(maxP, p, state.KeyGroupFor(intHash(r.Value), maxP))
							if c != want {
								t.Fatalf("key %d reached subtask %d, its key group is owned by subtask %d", r.Value, c, want)
							}
							if o, ok := owner[r.Value]; ok && o != c {
								t.Fatalf("key %d reached subtasks %d and %d", r.Value, o, c)
							}
							owner[r.Value] = c
							if r.Time <= last {
								t.Fatalf("channel %d: record %d after record %d: order lost", c, r.Time, last)
							}
							last = r.Time
							seen++
						}
					}
				}
				if seen != total {
					t.Fatalf("consumers received %d records, want %d", seen, total)
				}
				if got := chs.sent.Load(); got != total {
					t.Errorf("sent counter = %d, want %d", got, total)
				}
				if limit := total/DefaultBatchSize + flushes*p; messages > limit {
					t.Errorf("%d messages for %d records: more than records/DefaultBatchSize + flushes×consumers = %d", messages, total, limit)
				}
			})
		}
	}
}

// DESIGN.md §6 ("records move in batches … never a channel send per
// record"): a hash writer sends a consumer's buffer exactly when it holds
// DefaultBatchSize records, and the rest only when flushed.
func TestHashSendsFullBatchesAndRestOnFlush(t *testing.T) {
	t.Parallel()
	chs, raw := testChannels(context.Background(), 1, 4*DefaultBatchSize, state.DefaultMaxParallelism)
	w := Hash(intHash).newWriter(chs)
	same := func(int) int { return 42 }
	expect := func(step string, sizes ...int) {
		t.Helper()
		ms := drain(raw[0])
		if len(ms) != len(sizes) {
			t.Fatalf("%s: %d messages, want %d", step, len(ms), len(sizes))
		}
		for i, m := range ms {
			if n := m.records.Len(); n != sizes[i] {
				t.Fatalf("%s: message %d holds %d records, want %d", step, i, n, sizes[i])
			}
		}
	}
	if err := w.emit(intBatch(0, DefaultBatchSize-1, same), nil); err != nil {
		t.Fatal(err)
	}
	expect("one short of a batch")
	if err := w.emit(intBatch(DefaultBatchSize-1, DefaultBatchSize, same), nil); err != nil {
		t.Fatal(err)
	}
	expect("batch full", DefaultBatchSize)
	if err := w.emit(intBatch(0, 3*DefaultBatchSize+10, same), nil); err != nil {
		t.Fatal(err)
	}
	expect("three batches and a rest in one emit", DefaultBatchSize, DefaultBatchSize, DefaultBatchSize)
	if err := w.flush(); err != nil {
		t.Fatal(err)
	}
	expect("flush", 10)
	if err := w.flush(); err != nil {
		t.Fatal(err)
	}
	expect("flush of empty buffers")
}

// DESIGN.md §6 (rebalance): batches are spread round-robin over consumers,
// whole, one message a batch.
func TestRebalanceSpreadsBatchesRoundRobin(t *testing.T) {
	t.Parallel()
	chs, raw := testChannels(context.Background(), 3, 16, state.DefaultMaxParallelism)
	w := Rebalance().newWriter(chs)
	const batches = 8
	for b := range batches {
		if err := w.emit(intBatch(b*10, b*10+10, func(i int) int { return i }), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.flush(); err != nil {
		t.Fatal(err)
	}
	for c, ch := range raw {
		ms := drain(ch)
		var want []int
		for b := c; b < batches; b += len(raw) {
			want = append(want, b)
		}
		if len(ms) != len(want) {
			t.Fatalf("consumer %d got %d batches, want %d", c, len(ms), len(want))
		}
		for i, m := range ms {
			b := m.records.(Batch[int])
			if len(b) != 10 || b[0].Value != want[i]*10 {
				t.Errorf("consumer %d message %d: batch starting at %d (len %d), want batch %d whole", c, i, b[0].Value, len(b), want[i])
			}
		}
	}
}

// DESIGN.md §6 (broadcast): every consumer receives every batch, in order.
func TestBroadcastReachesEveryConsumer(t *testing.T) {
	t.Parallel()
	chs, raw := testChannels(context.Background(), 4, 16, state.DefaultMaxParallelism)
	w := Broadcast().newWriter(chs)
	for b := range 5 {
		if err := w.emit(intBatch(b*3, b*3+3, func(i int) int { return i }), nil); err != nil {
			t.Fatal(err)
		}
	}
	for c, ch := range raw {
		ms := drain(ch)
		if len(ms) != 5 {
			t.Fatalf("consumer %d got %d batches, want 5", c, len(ms))
		}
		for i, m := range ms {
			if v := m.records.(Batch[int])[0].Value; v != i*3 {
				t.Errorf("consumer %d batch %d starts at %d, want %d", c, i, v, i*3)
			}
		}
	}
	if got := chs.sent.Load(); got != 4*15 {
		t.Errorf("sent counter = %d, want %d (every record once per consumer)", got, 4*15)
	}
}

// DESIGN.md §3 ("Barriers … never overtake them") and message.go: a control
// event sent through fanout.control follows every record emitted before it on
// every channel, including records still buffered by a hash writer.
func TestControlEventsNeverOvertakeRecords(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// Room for a message per record, so a writer that sends too much fails
	// the checks below instead of blocking.
	hashCh, hashRaw := testChannels(ctx, 2, 4096, state.DefaultMaxParallelism)
	rebCh, rebRaw := testChannels(ctx, 2, 4096, state.DefaultMaxParallelism)
	ws := []edgeWriter{Hash(intHash).newWriter(hashCh), Rebalance().newWriter(rebCh)}
	f := fanout{writers: ws, main: ws}
	id := func(i int) int { return i }

	// Phase 1: records 0..99 (buffered by the hash writer), then a watermark.
	if err := f.emit(intBatch(0, 100, id)); err != nil {
		t.Fatal(err)
	}
	if err := f.control(&message{kind: kindWatermark, watermark: 99}); err != nil {
		t.Fatal(err)
	}
	// Phase 2: records 100..2599 (some full hash batches), then a barrier.
	for from := 100; from < 2600; from += 500 {
		if err := f.emit(intBatch(from, from+500, id)); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.control(&message{kind: kindBarrier, barrier: Barrier{ID: 1}}); err != nil {
		t.Fatal(err)
	}

	for name, raws := range map[string][]chan *message{"hash": hashRaw, "rebalance": rebRaw} {
		perPhase := [2]int{}
		for c, ch := range raws {
			phase := 0
			for _, m := range drain(ch) {
				switch m.kind {
				case kindRecords:
					for _, r := range m.records.(Batch[int]) {
						p := 0
						if r.Value >= 100 {
							p = 1
						}
						if p != phase {
							t.Fatalf("%s channel %d: record %d of phase %d arrived in phase %d: a control event overtook it", name, c, r.Value, p, phase)
						}
						perPhase[p]++
					}
				case kindWatermark:
					if phase != 0 {
						t.Fatalf("%s channel %d: watermark after the barrier", name, c)
					}
					phase = 1
				case kindBarrier:
					if phase != 1 {
						t.Fatalf("%s channel %d: barrier before the watermark", name, c)
					}
					phase = 2
				}
			}
			if phase != 2 {
				t.Fatalf("%s channel %d: control events missing (phase %d)", name, c, phase)
			}
		}
		if perPhase != [2]int{100, 2500} {
			t.Errorf("%s: records per phase %v, want [100 2500]", name, perPhase)
		}
	}
}

// DESIGN.md §6 ("bounded channels; a full channel is backpressure"): a send
// on a full channel waits, it is released by the consumer reading, and it
// returns the job's cancellation cause when the job is cancelled.
func TestSendBlocksOnFullChannelUntilReadOrCancel(t *testing.T) {
	t.Parallel()
	errStop := errors.New("job stopped")
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	chs, raw := testChannels(ctx, 1, channelCapacity, state.DefaultMaxParallelism)
	batch := func() *message { return &message{kind: kindRecords, records: Batch[int]{{Value: 1}}} }

	for i := range channelCapacity {
		done := make(chan error, 1)
		go func() { done <- chs.send(0, batch()) }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("send %d: %v", i, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("send %d blocked although the channel holds only %d of %d messages", i, i, channelCapacity)
		}
	}

	blocked := func() chan error {
		done := make(chan error, 1)
		go func() { done <- chs.send(0, batch()) }()
		select {
		case err := <-done:
			t.Fatalf("send on a full channel returned (%v) instead of waiting", err)
		case <-time.After(50 * time.Millisecond):
		}
		return done
	}

	// Released by the consumer.
	done := blocked()
	<-raw[0]
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("send released by a read: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("send still blocked after the consumer read a message")
	}

	// Released by cancellation, with the cause, and nothing delivered.
	done = blocked()
	cancel(errStop)
	select {
	case err := <-done:
		if !errors.Is(err, errStop) {
			t.Fatalf("send after cancel returned %v, want the cancellation cause %v", err, errStop)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("send still blocked after the job was cancelled")
	}
	if n := len(raw[0]); n != channelCapacity {
		t.Errorf("channel holds %d messages, want %d: a cancelled send must not deliver", n, channelCapacity)
	}
	if got := chs.sent.Load(); got != channelCapacity+1 {
		t.Errorf("sent counter = %d, want %d (only delivered batches count)", got, channelCapacity+1)
	}
}
