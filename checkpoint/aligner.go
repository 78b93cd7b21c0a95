package checkpoint

import "time"

// Aligner tracks the checkpoint barriers of one subtask's inputs. In
// ExactlyOnce mode an input that delivered barrier N is blocked — the task
// must not read it — until barrier N arrived on every input that has not
// ended; then the subtask snapshots once and forwards N. In AtLeastOnce mode
// no input is blocked; the subtask snapshots when the last barrier arrives.
//
// Like the Coordinator it is a pure state machine: the task goroutine feeds it
// barriers and end-of-input events with the current time and acts on the
// returned Alignment.
type Aligner struct {
	mode Mode
	// current is the checkpoint being aligned, 0 when none.
	current int64
	// arrived[i] is set when input i delivered barrier current.
	// INVARIANT: in ExactlyOnce mode, Blocked(i) == arrived[i] while current != 0.
	arrived []bool
	ended   []bool
	// waiting counts inputs that neither delivered current nor ended.
	waiting int
	// last is the newest checkpoint this subtask completed or abandoned;
	// barriers at or below it are stale.
	last int64
	// aborted are checkpoints above last that the coordinator abandoned
	// before their first barrier arrived here: their barriers are stale too.
	// Without this, a subtask could block an input for a barrier that an
	// upstream subtask, told of the abort while aligning, never forwards.
	// INVARIANT: every id in aborted is > last.
	aborted map[int64]bool
	started time.Time
}

// Alignment is what the task must do after a barrier or end-of-input event.
type Alignment struct {
	// Complete is set when every input delivered barrier ID (or ended): the task
	// snapshots now, forwards barrier ID on every output and reads all inputs
	// again.
	Complete bool
	// ID is the checkpoint that completed alignment.
	ID int64
	// Duration is the time from the first barrier of ID to the last.
	Duration time.Duration
	// Abandoned is a checkpoint whose alignment was given up because a newer
	// barrier arrived on an input that had not delivered it; the task declines it.
	Abandoned int64
}

// NewAligner returns an aligner for a task with n inputs.
func NewAligner(mode Mode, n int) *Aligner {
	return &Aligner{mode: mode, arrived: make([]bool, n), ended: make([]bool, n)}
}

// Blocked reports whether the task must not read input i now.
func (a *Aligner) Blocked(i int) bool {
	return a.mode == ExactlyOnce && a.current != 0 && a.arrived[i]
}

// Aligning returns the checkpoint being aligned, 0 when none.
func (a *Aligner) Aligning() int64 { return a.current }

// Barrier records barrier id arriving on input i at time now.
func (a *Aligner) Barrier(now time.Time, i int, id int64) Alignment {
	var res Alignment
	switch {
	case id <= a.last || (a.current != 0 && id < a.current) || a.aborted[id]:
		return res // stale: a checkpoint this subtask already finished or gave up
	case a.current != 0 && id > a.current:
		// Input i skipped barrier current (it was abandoned upstream) and
		// delivered a newer one: give current up and align on id instead.
		res.Abandoned = a.current
		a.setLast(a.current)
		a.reset()
	}
	if a.current == 0 {
		a.current = id
		a.started = now
		a.waiting = 0
		for j := range a.arrived {
			if !a.ended[j] {
				a.waiting++
			}
		}
	}
	if !a.arrived[i] && !a.ended[i] {
		a.arrived[i] = true
		a.waiting--
	}
	return a.maybeComplete(now, res)
}

// EndOfInput records that input i ended at time now: it delivers no more
// barriers, so it no longer holds an alignment back.
func (a *Aligner) EndOfInput(now time.Time, i int) Alignment {
	if a.ended[i] {
		return Alignment{}
	}
	a.ended[i] = true
	if a.current == 0 || a.arrived[i] {
		a.arrived[i] = false
		return Alignment{}
	}
	a.waiting--
	return a.maybeComplete(now, Alignment{})
}

// Abort gives up checkpoint id: if it is being aligned every input is
// unblocked; if its barriers have not arrived yet they will be ignored.
func (a *Aligner) Abort(id int64) {
	switch {
	case id <= a.last:
	case a.current == id:
		a.setLast(id)
		a.reset()
	default:
		if a.aborted == nil {
			a.aborted = map[int64]bool{}
		}
		a.aborted[id] = true
	}
}

// setLast records id as the newest finished checkpoint and forgets aborted
// ids at or below it.
func (a *Aligner) setLast(id int64) {
	a.last = id
	for k := range a.aborted {
		if k <= id {
			delete(a.aborted, k)
		}
	}
}

func (a *Aligner) maybeComplete(now time.Time, res Alignment) Alignment {
	if a.waiting > 0 {
		return res
	}
	res.Complete = true
	res.ID = a.current
	res.Duration = now.Sub(a.started)
	a.setLast(a.current)
	a.reset()
	return res
}

func (a *Aligner) reset() {
	a.current = 0
	clear(a.arrived)
	a.waiting = 0
}
