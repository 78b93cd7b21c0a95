package runtime

import "strings"

// CommitScope is how much of a sink's output one commit makes visible at
// once.
type CommitScope uint8

const (
	// ScopeNone: the sink does not commit (it writes at once, or is a source).
	ScopeNone CommitScope = iota
	// ScopeSubtask: each sink subtask's output of a checkpoint becomes
	// visible atomically, but not all subtasks' together (a Kafka
	// transaction per subtask): a reader may see one subtask's part of a
	// checkpoint before another's.
	ScopeSubtask
	// ScopeDestination: all of a checkpoint's output becomes visible at once
	// (one directory rename, one database transaction).
	ScopeDestination
)

// Capabilities is what a connector declares toward delivery guarantees; the
// pipeline's effective guarantee is derived from its connectors' (see
// Plan.Delivery).
type Capabilities struct {
	// Replayable: a source re-reads exactly from a position stored in a
	// checkpoint.
	Replayable bool
	// Transactional: a sink stages output per checkpoint and publishes it
	// only when the checkpoint is complete, re-publishing idempotently after
	// a recovery.
	Transactional bool
	// Idempotent: a sink where writing the same record again leaves the
	// destination unchanged (an upsert by key).
	Idempotent bool
	// CommitScope is a transactional sink's unit of atomic visibility.
	CommitScope CommitScope
}

// SourceGuarantee is the guarantee of a source with these capabilities.
func (c Capabilities) SourceGuarantee() Guarantee {
	if c.Replayable {
		return ExactlyOnce
	}
	return NoGuarantee
}

// SinkGuarantee is the guarantee of a sink with these capabilities: an
// idempotent sink that is not transactional repeats writes after a recovery
// without changing the result only for deterministic keys and values, so it
// counts as at-least-once.
func (c Capabilities) SinkGuarantee() Guarantee {
	if c.Transactional {
		return ExactlyOnce
	}
	return AtLeastOnce
}

// String lists the capabilities for plans: "replayable",
// "transactional, destination-wide commit", "writes at once".
func (c Capabilities) String() string {
	var parts []string
	if c.Replayable {
		parts = append(parts, "replayable")
	}
	if c.Transactional {
		parts = append(parts, "transactional")
		switch c.CommitScope {
		case ScopeDestination:
			parts = append(parts, "destination-wide commit")
		case ScopeSubtask:
			parts = append(parts, "commit per subtask")
		}
	}
	if c.Idempotent {
		parts = append(parts, "idempotent")
	}
	if len(parts) == 0 {
		return "writes at once, not replayable"
	}
	return strings.Join(parts, ", ")
}
