package runtime

import (
	"context"
	"reflect"
	"sync"
	"time"
)

// controlKind says what the job asks of a subtask.
type controlKind uint8

const (
	// ctlTrigger asks a source subtask to start a checkpoint.
	ctlTrigger controlKind = iota
	// ctlComplete says a checkpoint is complete.
	ctlComplete
	// ctlAbort says a checkpoint failed.
	ctlAbort
	// ctlStop asks a source subtask to stop reading (graceful stop).
	ctlStop
	// ctlEnd asks a source subtask to end its output: the final checkpoint is committed.
	ctlEnd
)

type control struct {
	kind    controlKind
	barrier Barrier // ctlTrigger
	id      int64   // ctlComplete, ctlAbort
}

// mailbox carries control messages from the job to a subtask. It is
// unbounded so the job's goroutine never blocks on a busy subtask.
type mailbox struct {
	mu    sync.Mutex
	items []control
	// signal has one buffered slot; a put fills it so a waiting subtask wakes.
	signal chan struct{}
}

func newMailbox() *mailbox { return &mailbox{signal: make(chan struct{}, 1)} }

func (m *mailbox) put(c control) {
	m.mu.Lock()
	m.items = append(m.items, c)
	m.mu.Unlock()
	select {
	case m.signal <- struct{}{}:
	default:
	}
}

// take returns every pending control message, oldest first.
func (m *mailbox) take() []control {
	m.mu.Lock()
	items := m.items
	m.items = nil
	m.mu.Unlock()
	return items
}

// gate reads a subtask's input channels, skipping blocked ones. It tries each
// readable channel without blocking first (the common case costs one select
// per batch, no reflection) and blocks with reflect.Select only when all are
// empty.
type gate struct {
	in []<-chan *message
	// ended[i] is set once channel i delivered end-of-input.
	ended []bool
	next  int
	cases []reflect.SelectCase
	// first, when set, marks the channels read before the others while
	// both kinds have a message waiting (InputLeader); nil reads every
	// channel in turn. streak counts the reads of marked channels in a
	// row: after maxStreak of them the others are read first once, so
	// that none waits for ever (its barriers neither).
	first  []bool
	streak int
}

// maxStreak is how many messages of the lead input the gate reads in a row
// while another input has one waiting.
const maxStreak = 16

func newGate(in []<-chan *message) *gate {
	g := &gate{in: in, ended: make([]bool, len(in)), cases: make([]reflect.SelectCase, len(in)+3)}
	for i := range g.cases {
		g.cases[i].Dir = reflect.SelectRecv
	}
	return g
}

// read returns the next message and its channel index; msg is nil when the
// mailbox signalled or wake fired instead. blocked(i) says which channels
// must not be read; wake may be nil.
func (g *gate) read(ctx context.Context, blocked func(int) bool, mb *mailbox, wake <-chan time.Time) (*message, int, error) {
	n := len(g.in)
	passes := 1
	if g.first != nil {
		passes = 2 // the marked channels, then the others
	}
	for pass := range passes {
		// marked: the channels of this pass; the others first after a
		// streak.
		marked := (pass == 0) != (g.streak >= maxStreak)
		for k := 0; k < n; k++ {
			i := (g.next + k) % n
			if g.ended[i] || blocked(i) || g.first != nil && g.first[i] != marked {
				continue
			}
			select {
			case m := <-g.in[i]:
				g.next = (i + 1) % n
				if g.first != nil && g.first[i] {
					g.streak++
				} else {
					g.streak = 0
				}
				return m, i, nil
			default:
			}
		}
	}
	// Nothing readable right now: block on every readable channel, the
	// mailbox and cancellation.
	for i := range g.in {
		if g.ended[i] || blocked(i) {
			g.cases[i].Chan = reflect.Value{}
		} else {
			g.cases[i].Chan = reflect.ValueOf(g.in[i])
		}
	}
	g.cases[n].Chan = reflect.ValueOf(mb.signal)
	g.cases[n+1].Chan = reflect.ValueOf(ctx.Done())
	g.cases[n+2].Chan = reflect.Value{}
	if wake != nil {
		g.cases[n+2].Chan = reflect.ValueOf(wake)
	}
	chosen, v, _ := reflect.Select(g.cases)
	switch chosen {
	case n, n + 2:
		return nil, -1, nil
	case n + 1:
		return nil, -1, context.Cause(ctx)
	}
	g.next = (chosen + 1) % n
	return v.Interface().(*message), chosen, nil
}
