package checkpoint

import (
	"encoding/json"
	"fmt"
	"slices"
)

// LedgerVersion is the format version of the checkpoint ledger. A reader
// refuses versions it does not know.
const LedgerVersion = 1

// IDReservation is how many checkpoint ids one ledger write reserves: the
// coordinator writes the ledger once per IDReservation checkpoints, not at
// every trigger. Ids reserved and never triggered (a crash, a restart) are
// skipped, never used: ids only have to be unique and increasing.
const IDReservation = 16

// Ledger is what a pipeline's checkpoint storage remembers beside its
// checkpoints (storage.LedgerName), for facts that no checkpoint directory
// can be trusted to keep, since an operator may delete checkpoints
// (`ingest checkpoints delete`) or lose one to damage:
//
//   - which checkpoint ids may have been used: an id names staged and
//     published sink output (a file sink's directory, a transaction's
//     marker), so reusing one would let a sink take new output for output it
//     already published, and drop it;
//   - which checkpoints were reported failed although their metadata may be
//     stored (a write whose outcome is unknown and whose undo failed): the
//     job went on as if they never completed, so none may be a recovery
//     point;
//   - which job wrote the checkpoints, so that a recovery that finds none of
//     them left still knows whose published output to look up.
//
// INVARIANT: Reserved only grows over a pipeline's lifetime, and every id the
// coordinator triggers is at most the Reserved of a ledger that was durable
// before the trigger.
type Ledger struct {
	Version  int    `json:"version"`
	Pipeline string `json:"pipeline"`
	JobID    string `json:"job_id"`
	// Reserved is the highest id that may have been used: a new checkpoint
	// takes an id above it.
	Reserved int64 `json:"reserved"`
	// Failed are checkpoints reported failed whose metadata may still be in
	// storage; increasing. A recovery never restores one (it deletes it) and
	// drops an id from here once its checkpoint is gone.
	Failed []int64 `json:"failed,omitempty"`
}

// IsFailed reports whether checkpoint id was reported failed.
func (l *Ledger) IsFailed(id int64) bool {
	_, ok := slices.BinarySearch(l.Failed, id)
	return ok
}

// Apply returns a copy of l with the facts of w recorded: the reservation
// raised to w.Reserved and w.Failed added.
func (l Ledger) Apply(w WriteLedger) Ledger {
	l.Reserved = max(l.Reserved, w.Reserved)
	l.Failed = slices.Clone(l.Failed)
	for _, id := range w.Failed {
		if !l.IsFailed(id) {
			l.Failed = append(l.Failed, id)
			slices.Sort(l.Failed)
		}
	}
	return l
}

// Encode serialises the ledger as JSON. The storage layer adds the checksum.
func (l *Ledger) Encode() ([]byte, error) {
	l.Version = LedgerVersion
	b, err := json.Marshal(l)
	if err != nil {
		return nil, fmt.Errorf("encoding the checkpoint ledger: %w", err)
	}
	return b, nil
}

// DecodeLedger parses a ledger written by Encode and checks its version.
func DecodeLedger(b []byte) (*Ledger, error) {
	var l Ledger
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, fmt.Errorf("decoding the checkpoint ledger: %w", err)
	}
	if l.Version != LedgerVersion {
		return nil, fmt.Errorf("the checkpoint ledger has format version %d; this build reads version %d", l.Version, LedgerVersion)
	}
	if l.Reserved < 0 {
		return nil, fmt.Errorf("decoding the checkpoint ledger: negative reservation %d", l.Reserved)
	}
	slices.Sort(l.Failed)
	l.Failed = slices.Compact(l.Failed)
	return &l, nil
}
