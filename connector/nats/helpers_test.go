package nats_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/connector/nats"
	"github.com/ingest-engine/ingest/internal/natstest"
	"github.com/ingest-engine/ingest/runtime"
)

// realURL is the NATS server the tests use; INGEST_NATS_URL overrides it.
func realURL() string {
	if u := os.Getenv("INGEST_NATS_URL"); u != "" {
		return u
	}
	return "nats://127.0.0.1:4222"
}

// requireServer returns the real server's URL, or skips the test (fails it
// under INGEST_REQUIRE_SERVICES=1) when JetStream is not reachable there.
func requireServer(t testing.TB) string {
	t.Helper()
	url := realURL()
	nc, err := natsgo.Connect(url, natsgo.Timeout(time.Second), natsgo.MaxReconnects(0))
	if err == nil {
		defer nc.Close()
		js, jerr := jetstream.New(nc)
		if jerr == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_, jerr = js.AccountInfo(ctx)
			cancel()
		}
		err = jerr
	}
	if err != nil {
		msg := fmt.Sprintf("NATS JetStream at %s is not reachable (%v): start `nats-server -js` on 127.0.0.1:4222 (or set INGEST_NATS_URL) to run this test", url, err)
		if os.Getenv("INGEST_REQUIRE_SERVICES") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return url
}

// fixture is a unique stream on a server, deleted when the test ends. Its
// subjects are <name>.>.
type fixture struct {
	t    testing.TB
	url  string
	nc   *natsgo.Conn
	js   jetstream.JetStream
	name string
}

// uniqueName derives a stream name from the test's name and a random suffix.
func uniqueName(t testing.TB) string {
	var b strings.Builder
	for _, r := range t.Name() {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	base := b.String()
	if len(base) > 40 {
		base = base[:40]
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	return "T_" + base + "_" + hex.EncodeToString(rnd[:])
}

func newStream(t testing.TB, url string) *fixture {
	t.Helper()
	return newStreamWith(t, url, nil)
}

// newStreamWith is newStream with the stream's configuration changed by
// edit (limits, for example) before it is created.
func newStreamWith(t testing.TB, url string, edit func(*jetstream.StreamConfig)) *fixture {
	t.Helper()
	nc, err := natsgo.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(2000))
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, url: url, nc: nc, js: js, name: uniqueName(t)}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	sc := jetstream.StreamConfig{Name: f.name, Subjects: []string{f.name + ".>"}}
	if edit != nil {
		edit(&sc)
	}
	if _, err := natstest.CreateStream(ctx, js, sc); err != nil {
		t.Fatalf("creating stream %s: %v", f.name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := js.DeleteStream(ctx, f.name); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			t.Logf("deleting stream %s: %v", f.name, err)
		}
		nc.Close()
	})
	return f
}

// subject returns the full subject <name>.<suffix>.
func (f *fixture) subject(suffix string) string { return f.name + "." + suffix }

// publish publishes one message and returns its stream sequence.
func (f *fixture) publish(subject string, data []byte) uint64 {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ack, err := f.js.Publish(ctx, subject, data)
	if err != nil {
		f.t.Fatalf("publishing to %s: %v", subject, err)
	}
	return ack.Sequence
}

// event is the test record: the datagen contract (key i % keys, value
// i % 1000, event time start + i ms) carried as JSON with an RFC 3339 time.
type event struct {
	ID    int64  `json:"id"`
	Key   int64  `json:"key"`
	Value int64  `json:"value"`
	TS    string `json:"ts"`
}

// baseTime is the event time of event 0.
var baseTime = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func eventTime(i int64) int64 { return baseTime.UnixNano() + i*int64(time.Millisecond) }

func makeEvent(i, keys int64) event {
	return event{ID: i, Key: i % keys, Value: i % 1000, TS: time.Unix(0, eventTime(i)).UTC().Format(time.RFC3339Nano)}
}

// eventSubject spreads events over four subjects, ev.0 … ev.3, by id.
func (f *fixture) eventSubject(i int64) string { return f.subject(fmt.Sprintf("ev.%d", i%4)) }

// publishEvents publishes events [from, to) asynchronously and waits for
// every acknowledgement; stream order is id order. An event the stream
// refused (an error answer instead of an acknowledgement) fails the test
// here: PublishAsyncComplete only says that every publish was answered,
// and a refused event would otherwise show up much later as a reader
// "missing" records that were never stored.
func (f *fixture) publishEvents(from, to, keys int64) {
	f.t.Helper()
	pending := make([]jetstream.PubAckFuture, 0, min(to-from, 1000))
	// Wait for the acknowledgements every 1000 messages: fewer are pending
	// than the 2000 that stall PublishAsync, also on a slow file store.
	wait := func() {
		f.t.Helper()
		select {
		case <-f.js.PublishAsyncComplete():
		case <-time.After(30 * time.Second):
			f.t.Fatalf("publishing events %d-%d: acknowledgements did not arrive", from, to)
		}
		for _, paf := range pending {
			select {
			case <-paf.Ok():
			case err := <-paf.Err():
				f.t.Fatalf("publishing events %d-%d: the stream refused %s: %v", from, to, paf.Msg().Data, err)
			case <-time.After(30 * time.Second):
				f.t.Fatalf("publishing events %d-%d: %s neither acknowledged nor refused", from, to, paf.Msg().Data)
			}
		}
		pending = pending[:0]
	}
	for i := from; i < to; i++ {
		data, _ := json.Marshal(makeEvent(i, keys))
		paf, err := f.js.PublishAsync(f.eventSubject(i), data)
		if err != nil {
			f.t.Fatalf("publishing event %d: %v", i, err)
		}
		pending = append(pending, paf)
		if (i-from)%1000 == 999 {
			wait()
		}
	}
	wait()
}

// info returns the stream's state.
func (f *fixture) state() jetstream.StreamState {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := f.js.Stream(ctx, f.name)
	if err != nil {
		f.t.Fatal(err)
	}
	return s.CachedInfo().State
}

// config is the source configuration of the fixture's stream.
func (f *fixture) config() nats.SourceConfig {
	return nats.SourceConfig{URL: f.url, Stream: f.name, RetryBackoff: 10 * time.Millisecond, PollInterval: time.Millisecond}
}

// eventSource returns a source of events with the ts field as event time.
func eventSource(t testing.TB, cfg nats.SourceConfig) *nats.Source[event] {
	t.Helper()
	src, err := nats.NewSource(cfg, nats.JSONWithTime[event]("ts"))
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// collector is a runtime.Output keeping every record.
type collector[T any] struct{ recs []runtime.Record[T] }

func (c *collector[T]) Emit(r runtime.Records) error {
	b, ok := r.(runtime.Batch[T])
	if !ok {
		return fmt.Errorf("collector: batch of %T", r)
	}
	c.recs = append(c.recs, b...)
	return nil
}

// subtask is an opened source subtask with its output.
type subtask[T any] struct {
	src runtime.Source
	out *collector[T]
}

// open opens the source's subtask, restored from pos when pos is not nil.
func open[T any](t testing.TB, src *nats.Source[T], pos []byte) subtask[T] {
	t.Helper()
	st, err := tryOpen(src, pos)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = st.src.Close() })
	return st
}

func tryOpen[T any](src *nats.Source[T], pos []byte) (subtask[T], error) {
	out := &collector[T]{}
	s := runtime.EraseSource(src.NewSubtask())
	ctx := &runtime.Context{Task: checkpoint.TaskID{Operator: "events"}, Parallelism: 1, MaxParallelism: 128, Output: out, JobID: "job"}
	if pos != nil {
		ctx.Restored = &checkpoint.SubtaskState{Task: ctx.Task, Inline: pos}
	}
	if err := s.Open(ctx); err != nil {
		_ = s.Close()
		return subtask[T]{}, err
	}
	return subtask[T]{src: s, out: out}, nil
}

// read calls Read once, failing the test on an error.
func (s subtask[T]) read(t testing.TB) runtime.ReadResult {
	t.Helper()
	res, err := s.src.Read()
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	return res
}

// drain reads until the source is exhausted.
func (s subtask[T]) drain(t testing.TB) runtime.ReadResult {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		res := s.read(t)
		if res.Exhausted {
			return res
		}
		if res.Wait > 0 {
			time.Sleep(res.Wait)
		}
	}
	t.Fatalf("not exhausted after 30s; %d records read", len(s.out.recs))
	return runtime.ReadResult{}
}

// readUntil reads until at least n records were emitted.
func (s subtask[T]) readUntil(t testing.TB, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for len(s.out.recs) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d records after 30s, want %d", len(s.out.recs), n)
		}
		res := s.read(t)
		if res.Wait > 0 {
			time.Sleep(res.Wait)
		}
	}
}

// position returns the subtask's position.
func (s subtask[T]) position(t testing.TB) []byte {
	t.Helper()
	p, err := s.src.Position()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// ids returns the ids of event records.
func ids(recs []runtime.Record[event]) []int64 {
	out := make([]int64, len(recs))
	for i, r := range recs {
		out[i] = r.Value.ID
	}
	return out
}

// checkIDs checks that got is exactly from, from+1, …, to-1.
func checkIDs(t testing.TB, got []int64, from, to int64) {
	t.Helper()
	if int64(len(got)) != to-from {
		t.Fatalf("%d records, want %d (ids %d-%d)", len(got), to-from, from, to-1)
	}
	for i, id := range got {
		if id != from+int64(i) {
			t.Fatalf("record %d has id %d, want %d (skipped or repeated around it)", i, id, from+int64(i))
		}
	}
}
