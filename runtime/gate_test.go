package runtime

import (
	"context"
	"errors"
	"testing"
	"time"
)

// gateRead is the result of one gate.read.
type gateRead struct {
	m   *message
	ch  int
	err error
}

// testGate returns a gate over n channels of capacity 16 and their sending ends.
func testGate(n int) (*gate, []chan *message) {
	raw := make([]chan *message, n)
	in := make([]<-chan *message, n)
	for i := range raw {
		raw[i] = make(chan *message, 16)
		in[i] = raw[i]
	}
	return newGate(in), raw
}

func wm(v int64) *message { return &message{kind: kindWatermark, watermark: v} }

func none(int) bool { return false }

// readAsync starts a read and returns where its result arrives.
func readAsync(ctx context.Context, g *gate, blocked func(int) bool, mb *mailbox) chan gateRead {
	res := make(chan gateRead, 1)
	go func() {
		m, ch, err := g.read(ctx, blocked, mb, nil)
		res <- gateRead{m, ch, err}
	}()
	return res
}

// pending asserts that a read has not returned after a short while.
func pending(t *testing.T, res chan gateRead, why string) {
	t.Helper()
	select {
	case r := <-res:
		t.Fatalf("%s: read returned (channel %d, %+v, err %v) instead of waiting", why, r.ch, r.m, r.err)
	case <-time.After(50 * time.Millisecond):
	}
}

func await(t *testing.T, res chan gateRead) gateRead {
	t.Helper()
	select {
	case r := <-res:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("read still blocked")
	}
	return gateRead{}
}

// DESIGN.md §3 (alignment "stops reading that input … its later records wait
// in the channel"): the gate never reads a blocked channel, neither on its
// non-blocking path nor while waiting; a message on an open channel wakes it.
func TestGateDoesNotReadBlockedChannels(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g, raw := testGate(2)
	mb := newMailbox()
	first := func(i int) bool { return i == 0 }

	raw[0] <- wm(1)
	raw[1] <- wm(2)
	m, ch, err := g.read(ctx, first, mb, nil)
	if err != nil || ch != 1 || m.watermark != 2 {
		t.Fatalf("read = channel %d %+v %v, want channel 1's message", ch, m, err)
	}
	// Channel 0 holds a message but is blocked: the read must wait, and a
	// further message on channel 0 must not wake it.
	res := readAsync(ctx, g, first, mb)
	pending(t, res, "only the blocked channel has messages")
	raw[0] <- wm(3)
	pending(t, res, "a message arrived on the blocked channel")
	raw[1] <- wm(4)
	if r := await(t, res); r.err != nil || r.ch != 1 || r.m.watermark != 4 {
		t.Fatalf("read = channel %d %+v %v, want channel 1's new message", r.ch, r.m, r.err)
	}
	// Unblocked, channel 0's held messages come out in order.
	for _, want := range []int64{1, 3} {
		m, ch, err := g.read(ctx, none, mb, nil)
		if err != nil || ch != 0 || m.watermark != want {
			t.Fatalf("read = channel %d %+v %v, want channel 0's message %d", ch, m, err, want)
		}
	}
}

// runtime/gate.go: a read blocked on empty (or blocked) channels wakes when
// the job puts a control message in the mailbox, so triggers, completions and
// aborts are served while a task waits for input.
func TestGateMailboxWakesBlockedRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g, raw := testGate(2)
	mb := newMailbox()
	raw[0] <- wm(1)
	res := readAsync(ctx, g, func(i int) bool { return i == 0 }, mb)
	pending(t, res, "no readable message")
	mb.put(control{kind: ctlAbort, id: 7})
	r := await(t, res)
	if r.err != nil || r.m != nil || r.ch != -1 {
		t.Fatalf("read = channel %d %+v %v, want the mailbox signal (nil, -1, nil)", r.ch, r.m, r.err)
	}
	if items := mb.take(); len(items) != 1 || items[0].id != 7 {
		t.Fatalf("mailbox holds %+v, want the abort of 7", items)
	}

	// A signal put before the read is not lost.
	mb.put(control{kind: ctlComplete, id: 8})
	r = await(t, readAsync(ctx, g, func(i int) bool { return i == 0 }, mb))
	if r.m != nil || r.ch != -1 {
		t.Fatalf("read = channel %d %+v, want the pending mailbox signal", r.ch, r.m)
	}
}

// The mailbox is FIFO and take empties it: controls are served in the order
// the job sent them (NotifyComplete before a later trigger).
func TestMailboxKeepsOrder(t *testing.T) {
	t.Parallel()
	mb := newMailbox()
	for id := int64(1); id <= 5; id++ {
		mb.put(control{kind: ctlComplete, id: id})
	}
	items := mb.take()
	for i, c := range items {
		if c.id != int64(i+1) {
			t.Fatalf("take()[%d] = %d, want %d", i, c.id, i+1)
		}
	}
	if len(items) != 5 || len(mb.take()) != 0 {
		t.Fatalf("take returned %d items, then more: want 5, then none", len(items))
	}
}

// A blocked read ends with the job's cancellation cause.
func TestGateReadReturnsCancellationCause(t *testing.T) {
	t.Parallel()
	errStop := errors.New("stop")
	ctx, cancel := context.WithCancelCause(context.Background())
	g, _ := testGate(2)
	res := readAsync(ctx, g, none, newMailbox())
	pending(t, res, "nothing to read")
	cancel(errStop)
	if r := await(t, res); !errors.Is(r.err, errStop) {
		t.Fatalf("read after cancel: err %v, want %v", r.err, errStop)
	}
}

// runtime/gate.go (round-robin): when several channels have messages the gate
// takes one from each in turn, so a busy input cannot starve another; a
// channel's messages keep their order; ended channels are skipped.
func TestGateIsFairAcrossReadyChannels(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g, raw := testGate(3)
	mb := newMailbox()
	counts := []int{8, 2, 4}
	for c, n := range counts {
		for k := range n {
			raw[c] <- wm(int64(c*100 + k))
		}
	}
	var order []int
	next := make([]int64, len(raw))
	for range 14 {
		m, ch, err := g.read(ctx, none, mb, nil)
		if err != nil {
			t.Fatal(err)
		}
		if want := int64(ch*100) + next[ch]; m.watermark != want {
			t.Fatalf("channel %d delivered %d, want %d: order within a channel lost", ch, m.watermark, want)
		}
		next[ch]++
		order = append(order, ch)
	}
	want := []int{0, 1, 2, 0, 1, 2, 0, 2, 0, 2, 0, 0, 0, 0}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("read order %v, want round-robin %v", order, want)
		}
	}

	// Fair on the waiting path too: after a read from channel 1, the next ready
	// channel after it wins over channel 0.
	raw[1] <- wm(1)
	r := await(t, readAsync(ctx, g, none, mb))
	if r.ch != 1 {
		t.Fatalf("read channel %d, want 1", r.ch)
	}
	raw[0] <- wm(0)
	raw[2] <- wm(2)
	if _, ch, _ := g.read(ctx, none, mb, nil); ch != 2 {
		t.Fatalf("read channel %d after channel 1, want 2", ch)
	}

	// An ended channel is not read even if it holds messages.
	g.ended[0] = true
	res := readAsync(ctx, g, none, mb)
	pending(t, res, "only the ended channel has a message")
	raw[1] <- wm(5)
	if r := await(t, res); r.ch != 1 {
		t.Fatalf("read channel %d, want 1 (channel 0 ended)", r.ch)
	}
}
