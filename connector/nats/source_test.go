package nats_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ingest-engine/ingest/connector/nats"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/watermark"
)

// Every message is read once, in stream order, with its event time from the
// JSON field; batches are at most BatchSize.
func TestReadsStreamInOrder(t *testing.T) {
	t.Parallel()
	f := newStream(t, requireServer(t))
	const n = 2500
	f.publishEvents(0, n, 7)
	cfg := f.config()
	cfg.StopAt = nats.StopAtLatest
	cfg.BatchSize = 300
	st := open(t, eventSource(t, cfg), nil)
	res := st.drain(t)
	checkIDs(t, ids(st.out.recs), 0, n)
	for i, r := range st.out.recs {
		if want := makeEvent(int64(i), 7); r.Value != want {
			t.Fatalf("record %d = %+v, want %+v", i, r.Value, want)
		}
		if r.Time != eventTime(int64(i)) {
			t.Fatalf("record %d: event time %d, want %d", i, r.Time, eventTime(int64(i)))
		}
	}
	if want := eventTime(n-1) - 1; res.Watermark != want {
		t.Errorf("watermark at the end %d, want the last event time - 1ns %d", res.Watermark, want)
	}
	// Once exhausted it stays so and emits nothing more.
	f.publishEvents(n, n+10, 7)
	if res := st.read(t); !res.Exhausted || len(st.out.recs) != n {
		t.Fatalf("read after exhaustion: %+v, %d records", res, len(st.out.recs))
	}
}

// A position taken after any number of reads, restored into a new subtask,
// continues with the next message: nothing skipped, nothing repeated.
func TestRestoreContinuesAtPosition(t *testing.T) {
	t.Parallel()
	f := newStream(t, requireServer(t))
	const n = 1000
	f.publishEvents(0, n, 5)
	cfg := f.config()
	cfg.StopAt = nats.StopAtLatest
	cfg.BatchSize = 64
	src := eventSource(t, cfg)
	for _, cut := range []int{0, 1, 64, 65, 500, n} {
		first := open(t, src, nil)
		if cut > 0 {
			first.readUntil(t, cut)
		}
		before := ids(first.out.recs)
		pos := first.position(t)
		var p struct {
			Stream string `json:"stream"`
			Next   uint64 `json:"next"`
		}
		if err := json.Unmarshal(pos, &p); err != nil || p.Stream != f.name || p.Next != uint64(len(before))+1 {
			t.Fatalf("cut %d: position %s, want stream %s next %d", cut, pos, f.name, len(before)+1)
		}
		second := open(t, src, pos)
		second.drain(t)
		checkIDs(t, append(before, ids(second.out.recs)...), 0, n)
	}
}

// stop_at latest reads to the last sequence at the first start; a restore
// reads to the same end although more was published; a fresh start reads
// to the new end.
func TestStopAtLatestKeepsEndAcrossRestore(t *testing.T) {
	t.Parallel()
	f := newStream(t, requireServer(t))
	f.publishEvents(0, 300, 5)
	cfg := f.config()
	cfg.StopAt = nats.StopAtLatest
	cfg.BatchSize = 100
	src := eventSource(t, cfg)

	first := open(t, src, nil)
	first.readUntil(t, 100)
	pos := first.position(t)
	f.publishEvents(300, 400, 5)

	second := open(t, src, pos)
	second.drain(t)
	checkIDs(t, append(ids(first.out.recs), ids(second.out.recs)...), 0, 300)

	// The end is in the position; restoring the final position is exhausted
	// at once.
	end := second.position(t)
	third := open(t, src, end)
	if res := third.read(t); !res.Exhausted || len(third.out.recs) != 0 {
		t.Fatalf("restored at the end: %+v, %d records; want exhausted, none", res, len(third.out.recs))
	}

	fresh := open(t, src, nil)
	fresh.drain(t)
	checkIDs(t, ids(fresh.out.recs), 0, 400)
}

// With a subject filter the last message of the stream may not match: the
// source still ends, after finding nothing left up to the end.
func TestStopAtLatestWithFilterEndsAfterLastMatch(t *testing.T) {
	t.Parallel()
	f := newStream(t, requireServer(t))
	f.publishEvents(0, 200, 5) // ev.0 … ev.3 by id % 4
	f.publish(f.subject("other"), []byte(`{"id":-1}`))
	cfg := f.config()
	cfg.StopAt = nats.StopAtLatest
	cfg.Subject = f.subject("ev.1")
	st := open(t, eventSource(t, cfg), nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		st.drain(t)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the filtered source did not end")
	}
	got := ids(st.out.recs)
	if len(got) != 50 {
		t.Fatalf("%d records, want 50", len(got))
	}
	for i, id := range got {
		if id != int64(4*i+1) {
			t.Fatalf("record %d has id %d, want %d", i, id, 4*i+1)
		}
	}
}

// An empty stream with stop_at latest is exhausted at once.
func TestStopAtLatestEmptyStream(t *testing.T) {
	t.Parallel()
	f := newStream(t, requireServer(t))
	cfg := f.config()
	cfg.StopAt = nats.StopAtLatest
	st := open(t, eventSource(t, cfg), nil)
	if res := st.read(t); !res.Exhausted {
		t.Fatalf("empty stream: %+v, want exhausted", res)
	}
}

// The subject filter passes only matching messages; the position skips the
// others.
func TestSubjectFilter(t *testing.T) {
	t.Parallel()
	f := newStream(t, requireServer(t))
	f.publishEvents(0, 400, 5)
	cfg := f.config()
	cfg.Subject = f.subject("ev.2")
	cfg.BatchSize = 30
	src := eventSource(t, cfg)
	st := open(t, src, nil)
	st.readUntil(t, 40)
	pos := st.position(t)
	rest := open(t, src, pos)
	rest.readUntil(t, 100-len(st.out.recs))
	all := append(ids(st.out.recs), ids(rest.out.recs)...)
	for i, id := range all[:100] {
		if id != int64(4*i+2) {
			t.Fatalf("record %d has id %d, want %d", i, id, 4*i+2)
		}
	}
}

// Start: first (default), new, a sequence, a time. The position taken
// before any read holds the resolved start, so a restore does not move it.
func TestStartPositions(t *testing.T) {
	t.Parallel()
	f := newStream(t, requireServer(t))
	f.publishEvents(0, 100, 5)
	time.Sleep(20 * time.Millisecond)
	mid := time.Now()
	time.Sleep(20 * time.Millisecond)
	f.publishEvents(100, 150, 5)

	for _, tc := range []struct {
		start nats.Start
		from  int64
	}{
		{nats.Start{}, 0},
		{nats.Start{Policy: nats.StartSequence, Sequence: 42}, 41},
		{nats.Start{Policy: nats.StartTime, Time: mid}, 100},
	} {
		cfg := f.config()
		cfg.Start = tc.start
		cfg.StopAt = nats.StopAtLatest
		src := eventSource(t, cfg)
		st := open(t, src, nil)
		pos := st.position(t)
		st.drain(t)
		checkIDs(t, ids(st.out.recs), tc.from, 150)
		// The position before the first read holds the resolved start.
		again := open(t, src, pos)
		again.drain(t)
		checkIDs(t, ids(again.out.recs), tc.from, 150)
	}

	// new: nothing of what is there; what is published later. A restore of
	// the position taken before the first message keeps that start.
	cfg := f.config()
	cfg.Start = nats.Start{Policy: nats.StartNew}
	src := eventSource(t, cfg)
	st := open(t, src, nil)
	pos := st.position(t)
	if res := st.read(t); len(st.out.recs) != 0 || res.Wait <= 0 {
		t.Fatalf("start new: read %d records, result %+v; want none and a wait", len(st.out.recs), res)
	}
	f.publishEvents(150, 160, 5)
	st.readUntil(t, 10)
	checkIDs(t, ids(st.out.recs), 150, 160)
	again := open(t, src, pos)
	again.readUntil(t, 10)
	checkIDs(t, ids(again.out.recs), 150, 160)
}

// A decode error fails the read with an error naming the stream, subject,
// sequence and cause; SkipDecodeErrors drops the message instead.
func TestDecodeErrorNamesMessage(t *testing.T) {
	t.Parallel()
	f := newStream(t, requireServer(t))
	f.publishEvents(0, 10, 5)
	badSeq := f.publish(f.subject("ev.bad"), []byte(`{"id": 10, "ts": "yesterday"}`))
	f.publishEvents(11, 20, 5)

	cfg := f.config()
	cfg.StopAt = nats.StopAtLatest
	st := open(t, eventSource(t, cfg), nil)
	var err error
	for range 100 {
		if _, err = st.src.Read(); err != nil {
			break
		}
	}
	if err == nil {
		t.Fatal("no error for a message with a bad time")
	}
	if !errors.Is(err, nats.ErrBadMessage) {
		t.Errorf("error %v does not wrap ErrBadMessage", err)
	}
	for _, want := range []string{f.name, f.subject("ev.bad"), "sequence 11", `"yesterday"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if badSeq != 11 {
		t.Fatalf("bad message at sequence %d, test expects 11", badSeq)
	}

	cfg.SkipDecodeErrors = true
	skip := open(t, eventSource(t, cfg), nil)
	skip.drain(t)
	got := ids(skip.out.recs)
	checkIDs(t, got[:10], 0, 10)
	checkIDs(t, got[10:], 11, 20)
	var p struct{ Next uint64 }
	if err := json.Unmarshal(skip.position(t), &p); err != nil || p.Next != 21 {
		t.Fatalf("position after skipping %s, want next 21", skip.position(t))
	}
}

// A restored position of another stream or filter, or a garbled one, is
// refused; one the stream cannot serve any more is ErrPositionLost.
func TestRestoreRefusals(t *testing.T) {
	t.Parallel()
	f := newStream(t, requireServer(t))
	f.publishEvents(0, 50, 5)
	cfg := f.config()
	src := eventSource(t, cfg)
	for _, pos := range []string{`{"stream":"OTHER","next":3}`, `{"stream":"` + f.name + `","subject":"x.>","next":3}`} {
		if _, err := tryOpen(src, []byte(pos)); !errors.Is(err, runtime.ErrIncompatible) {
			t.Errorf("restore %s: %v, want ErrIncompatible", pos, err)
		}
	}
	for _, pos := range []string{`not json`, `{"stream":"` + f.name + `","next":0}`} {
		if _, err := tryOpen(src, []byte(pos)); err == nil {
			t.Errorf("restore %s: no error", pos)
		}
	}
	// Beyond the stream's end: the stream was recreated.
	if _, err := tryOpen(src, []byte(`{"stream":"`+f.name+`","next":500}`)); !errors.Is(err, nats.ErrPositionLost) || !errors.Is(err, runtime.ErrIncompatible) {
		t.Errorf("restore beyond the end: %v, want ErrPositionLost and ErrIncompatible", err)
	}
	// Right at the end is fine: nothing was read past it.
	st := open(t, src, []byte(`{"stream":"`+f.name+`","next":51}`))
	f.publishEvents(50, 52, 5)
	st.readUntil(t, 2)
	checkIDs(t, ids(st.out.recs), 50, 52)

	// Messages removed before they were read.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := f.js.Stream(ctx, f.name)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Purge(ctx, jetstream.WithPurgeSequence(20)); err != nil {
		t.Fatal(err)
	}
	_, err = tryOpen(src, []byte(`{"stream":"`+f.name+`","next":10}`))
	if !errors.Is(err, nats.ErrPositionLost) || !strings.Contains(err.Error(), "10-19") {
		t.Errorf("restore before the purged range: %v, want ErrPositionLost naming 10-19", err)
	}
	st2 := open(t, src, []byte(`{"stream":"`+f.name+`","next":20}`))
	st2.readUntil(t, 33)
	checkIDs(t, ids(st2.out.recs), 19, 52)
}

// A subtask opened with parallelism above 1 is refused; From adds the
// source with parallelism 1 and reports another as a builder error.
func TestParallelismIsOne(t *testing.T) {
	src, err := nats.NewSource(nats.SourceConfig{Stream: "S"}, nats.JSON[event])
	if err != nil {
		t.Fatal(err)
	}
	sub := runtime.EraseSource(src.NewSubtask())
	err = sub.Open(&runtime.Context{Parallelism: 2, Output: &collector[event]{}})
	if !errors.Is(err, runtime.ErrIncompatible) || !strings.Contains(err.Error(), "parallelism 2") {
		t.Fatalf("Open at parallelism 2: %v", err)
	}
}

// Watermark: newest event time - max_delay - 1ns; a quiet stream becomes
// idle after the idle timeout and active again with its next message.
func TestWatermarkAndIdleness(t *testing.T) {
	t.Parallel()
	f := newStream(t, requireServer(t))
	f.publishEvents(0, 10, 5)
	cfg := f.config()
	cfg.Watermark = watermark.Strategy{MaxDelay: 5 * time.Millisecond, IdleTimeout: 50 * time.Millisecond}
	src := eventSource(t, cfg)
	st := open(t, src, nil)
	st.readUntil(t, 10)
	res := st.read(t)
	if want := eventTime(9) - int64(5*time.Millisecond) - 1; res.Watermark != want || res.Idle {
		t.Fatalf("after 10 records: %+v, want watermark %d, not idle", res, want)
	}
	if res.Wait <= 0 || res.Wait > 50*time.Millisecond {
		t.Fatalf("quiet read asks to wait %v; want a positive wait up to the idle timeout", res.Wait)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !res.Idle {
		if time.Now().After(deadline) {
			t.Fatal("never idle on a quiet stream")
		}
		time.Sleep(res.Wait)
		res = st.read(t)
	}
	f.publishEvents(10, 11, 5)
	st.readUntil(t, 11)
	if res := st.read(t); res.Idle {
		t.Fatalf("still idle after a message: %+v", res)
	}

	// The restored position carries the newest event time: the watermark
	// is back at once.
	again := open(t, src, st.position(t))
	if res := again.read(t); res.Watermark != eventTime(10)-int64(5*time.Millisecond)-1 {
		t.Fatalf("restored watermark %d, want %d", res.Watermark, eventTime(10)-int64(5*time.Millisecond)-1)
	}
}

// A consumer deleted under the source (as a server restart does) is
// recreated at the position: nothing skipped, nothing repeated.
func TestConsumerDeletedIsRecreated(t *testing.T) {
	t.Parallel()
	f := newStream(t, requireServer(t))
	f.publishEvents(0, 600, 5)
	cfg := f.config()
	cfg.StopAt = nats.StopAtLatest
	cfg.BatchSize = 50
	st := open(t, eventSource(t, cfg), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := f.js.Stream(ctx, f.name)
	if err != nil {
		t.Fatal(err)
	}
	for _, at := range []int{100, 300, 450} {
		st.readUntil(t, at)
		names := s.ConsumerNames(ctx)
		n := 0
		for name := range names.Name() {
			if err := s.DeleteConsumer(ctx, name); err != nil {
				t.Fatal(err)
			}
			n++
		}
		if n != 1 {
			t.Fatalf("%d consumers on the stream, want the source's one", n)
		}
	}
	st.drain(t)
	checkIDs(t, ids(st.out.recs), 0, 600)
}

// Without a server, Open fails naming the URL; a missing stream is named.
func TestOpenErrors(t *testing.T) {
	t.Parallel()
	src, err := nats.NewSource(nats.SourceConfig{URL: "nats://127.0.0.1:1", Stream: "S"}, nats.JSON[event])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tryOpen(src, nil); err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Errorf("Open without a server: %v, want an error naming the URL", err)
	}
	url := requireServer(t)
	src, err = nats.NewSource(nats.SourceConfig{URL: url, Stream: "NO_SUCH_STREAM_" + uniqueName(t)}, nats.JSON[event])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tryOpen(src, nil); !errors.Is(err, jetstream.ErrStreamNotFound) || !strings.Contains(err.Error(), "NO_SUCH_STREAM_") {
		t.Errorf("Open of a missing stream: %v", err)
	}
}

// A consumer recreated after messages ahead of the position were removed
// fails the read with ErrPositionLost instead of skipping them.
func TestRecreationRefusesRemovedMessages(t *testing.T) {
	t.Parallel()
	f := newStream(t, requireServer(t))
	f.publishEvents(0, 100, 5)
	cfg := f.config()
	cfg.BatchSize = 10
	st := open(t, eventSource(t, cfg), nil)
	st.readUntil(t, 10)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := f.js.Stream(ctx, f.name)
	if err != nil {
		t.Fatal(err)
	}
	for name := range s.ConsumerNames(ctx).Name() {
		if err := s.DeleteConsumer(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Purge(ctx, jetstream.WithPurgeSequence(50)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		res, err := st.src.Read()
		if err != nil {
			if !errors.Is(err, nats.ErrPositionLost) || !strings.Contains(err.Error(), "sequences 11-49") {
				t.Fatalf("Read: %v, want ErrPositionLost naming sequences 11-49", err)
			}
			checkIDs(t, ids(st.out.recs), 0, 10)
			return
		}
		time.Sleep(res.Wait)
	}
	t.Fatalf("no error after the consumer's messages were removed; %d records", len(st.out.recs))
}
