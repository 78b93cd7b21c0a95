package kafka

import (
	"fmt"
	"regexp"
	"strings"
)

// txnSlotState is where one transactional id of a subtask's pool stands.
type txnSlotState int

const (
	// txnSlotIdle: no transaction of this subtask's lifetime is pending on
	// the id (fenced at open, or its last transaction is known committed).
	txnSlotIdle txnSlotState = iota
	// txnSlotOpen: the id carries the transaction being written.
	txnSlotOpen
	// txnSlotPrepared: the id carries a prepared transaction whose
	// checkpoint is not known complete; it is reported as a committable.
	txnSlotPrepared
	// txnSlotCommitting: the prepared transaction's checkpoint is complete;
	// the committer commits it, and the subtask commits it itself (an
	// idempotent no-op when the committer was first) before reusing the id.
	txnSlotCommitting
)

// txnSlot is one transactional id of a subtask's pool.
type txnSlot struct {
	id    string
	state txnSlotState
	// txn is the transaction a prepared or committing slot holds.
	txn txnCommittable
	// freed orders idle slots by when they became idle: the longest idle is
	// reused first, so an id's previous transaction had the most time to be
	// committed by the committer.
	freed int64
}

// txnPool is a sink subtask's bounded set of transactional ids,
// <prefix>-<subtask>-<slot> for slot in [0, size). Only the subtask's
// goroutine uses it.
//
// INVARIANT: an id is never given a new transaction (InitProducerID, which
// fences and aborts whatever the id had open) while it holds a prepared
// transaction that a checkpoint may still commit: prepared slots are never
// reused, and committing slots are committed first.
type txnPool struct {
	slots []txnSlot
	clock int64
}

// txnIDFor is the transactional id of slot of subtask.
func txnIDFor(prefix string, subtask, slot int) string {
	return fmt.Sprintf("%s-%d-%d", prefix, subtask, slot)
}

// txnIDSuffix is what follows "<prefix>-" in an id the sink made.
var txnIDSuffix = regexp.MustCompile(`^[0-9]+-[0-9]+$`)

// txnOwnedBy reports whether id is one of the ids prefix makes, for any
// subtask and slot (also of a parallelism or pool size since changed).
func txnOwnedBy(prefix, id string) bool {
	rest, ok := strings.CutPrefix(id, prefix+"-")
	return ok && txnIDSuffix.MatchString(rest)
}

func newTxnPool(prefix string, subtask, size int) *txnPool {
	p := &txnPool{slots: make([]txnSlot, size)}
	for i := range p.slots {
		p.slots[i] = txnSlot{id: txnIDFor(prefix, subtask, i), freed: int64(i)}
	}
	p.clock = int64(size)
	return p
}

// next picks the slot for a new transaction: the longest idle one, else the
// committing one prepared earliest (the caller must make sure it is
// committed before reusing it: reuse says so). ok is false when every slot
// is open or prepared.
func (p *txnPool) next() (slot int, reuse bool, ok bool) {
	best := -1
	for i, s := range p.slots {
		if s.state == txnSlotIdle && (best < 0 || s.freed < p.slots[best].freed) {
			best = i
		}
	}
	if best >= 0 {
		return best, false, true
	}
	for i, s := range p.slots {
		if s.state == txnSlotCommitting && (best < 0 || s.txn.PreparedAt < p.slots[best].txn.PreparedAt) {
			best = i
		}
	}
	return best, best >= 0, best >= 0
}

// open marks slot as carrying the transaction being written.
func (p *txnPool) open(slot int) {
	p.slots[slot].state = txnSlotOpen
	p.slots[slot].txn = txnCommittable{}
}

// prepare marks slot as holding prepared transaction c.
func (p *txnPool) prepare(slot int, c txnCommittable) {
	p.slots[slot].state = txnSlotPrepared
	p.slots[slot].txn = c
}

// abandon returns an open slot to idle (its transaction is aborted or will
// be fenced).
func (p *txnPool) abandon(slot int) {
	p.clock++
	p.slots[slot].state = txnSlotIdle
	p.slots[slot].freed = p.clock
}

// complete moves the slots prepared at or before checkpoint id to committing.
func (p *txnPool) complete(id int64) {
	for i := range p.slots {
		if s := &p.slots[i]; s.state == txnSlotPrepared && s.txn.PreparedAt <= id {
			s.state = txnSlotCommitting
		}
	}
}

// prepared returns the transactions of the prepared slots.
func (p *txnPool) prepared() []*txnCommittable {
	var out []*txnCommittable
	for i := range p.slots {
		if p.slots[i].state == txnSlotPrepared {
			out = append(out, &p.slots[i].txn)
		}
	}
	return out
}

// exhausted describes a pool whose every id is busy, for the error that
// fails the subtask.
func (p *txnPool) exhausted() string {
	var ids []string
	for _, s := range p.slots {
		switch s.state {
		case txnSlotPrepared:
			ids = append(ids, fmt.Sprintf("%s: prepared at checkpoint %d", s.id, s.txn.PreparedAt))
		case txnSlotOpen:
			ids = append(ids, s.id+": open")
		}
	}
	return fmt.Sprintf("all %d transactional ids are busy (%s): checkpoints have failed %d times in a row since the oldest was prepared; "+
		"raise pool_size above tolerable_failures + max_concurrent (the job restarts from the last complete checkpoint now)",
		len(p.slots), strings.Join(ids, "; "), len(p.slots)-1)
}
