package runtime

import (
	"context"
	"slices"
	"testing"
)

// leadHead is a channel head over channels of inputs 0 and 1 (chanInput)
// whose operator leads with input 0 by 10.
func leadHead(chanInput ...int) (*channelHead, []chan *message) {
	g, raw := testGate(len(chanInput))
	h := &channelHead{gate: g, chanInput: chanInput, chanWM: make([]int64, len(chanInput)), chanIdle: make([]bool, len(chanInput)),
		leader: struct{ InputLeader }{}, lead: 0, by: 10}
	for i := range h.chanWM {
		h.chanWM[i] = MinWatermark
	}
	return h, raw
}

// While records wait on both inputs, the gate reads the lead input's
// channels first as long as its watermark is at most by ahead of the
// other input's, and the other's first beyond that; idle and ended
// channels do not count, and a preferred input with nothing waiting
// holds nothing back.
func TestInputLeaderOrdersReads(t *testing.T) {
	h, raw := leadHead(0, 1, 1)
	read := func() int {
		t.Helper()
		_, ch, err := h.gate.read(context.Background(), none, newMailbox(), nil)
		if err != nil {
			t.Fatal(err)
		}
		return ch
	}
	fill := func() {
		for _, c := range raw {
			c <- wm(0)
		}
	}
	cases := []struct {
		name       string
		wm         []int64
		idle       []bool
		wantFirst  int // the channel read first
		wantSecond int
	}{
		{"nothing yet: the lead input first", []int64{MinWatermark, MinWatermark, MinWatermark}, nil, 0, 1},
		{"lead behind", []int64{100, 200, 150}, nil, 0, 1},
		{"lead ahead by exactly by", []int64{160, 200, 150}, nil, 0, 1},
		{"lead ahead by more", []int64{161, 200, 150}, nil, 1, 2},
		{"the lagging other channel idle", []int64{161, 200, 150}, []bool{false, false, true}, 0, 1},
	}
	for _, c := range cases {
		copy(h.chanWM, c.wm)
		clear(h.chanIdle)
		copy(h.chanIdle, c.idle)
		h.gate.next = 0
		h.preferInputs()
		fill()
		if got := read(); got != c.wantFirst {
			t.Fatalf("%s: read channel %d first, want %d", c.name, got, c.wantFirst)
		}
		if got := read(); got != c.wantSecond {
			t.Fatalf("%s: read channel %d second, want %d", c.name, got, c.wantSecond)
		}
		for range len(raw) - 2 {
			read()
		}
	}
	// A preferred input with nothing waiting does not hold the other back.
	copy(h.chanWM, []int64{100, 200, 150})
	h.preferInputs()
	raw[2] <- wm(1)
	if got := read(); got != 2 {
		t.Fatalf("read channel %d, want 2: the only one with a message", got)
	}
	// Nor does it block: with nothing anywhere the read waits for any.
	res := readAsync(context.Background(), h.gate, none, newMailbox())
	pending(t, res, "no message")
	raw[1] <- wm(2)
	if r := await(t, res); r.ch != 1 {
		t.Fatalf("blocked read returned channel %d, want 1", r.ch)
	}
}

// The lead input is read at most maxStreak times in a row while another has
// a message waiting: the other is never starved (nor its barriers).
func TestInputLeaderStreakIsBounded(t *testing.T) {
	h, raw := leadHead(0, 1)
	h.preferInputs()
	for i := range 3 {
		raw[1] <- wm(int64(i))
	}
	var order []int
	for i := range 3*maxStreak + 3 {
		if len(raw[0]) < 2 {
			raw[0] <- wm(int64(i)) // the lead input always has one waiting
		}
		_, ch, err := h.gate.read(context.Background(), none, newMailbox(), nil)
		if err != nil {
			t.Fatal(err)
		}
		order = append(order, ch)
	}
	var others []int
	for i, ch := range order {
		if ch == 1 {
			others = append(others, i)
		}
	}
	// Each other message after a full streak of the lead's.
	if want := []int{maxStreak, 2*maxStreak + 1, 3*maxStreak + 2}; !slices.Equal(others, want) {
		t.Fatalf("reads %v: the other input read at %v, want %v", order, others, want)
	}
}
