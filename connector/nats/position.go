package nats

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/stream"
)

// ErrPositionLost marks a checkpointed position the stream can no longer
// serve: messages from it on were removed (retention limits, a purge) or the
// stream was recreated. Replaying from it would skip messages, so the source
// refuses; the error also wraps runtime.ErrIncompatible, so the job stops
// instead of restarting into the same refusal.
var ErrPositionLost = errors.New("checkpointed stream position no longer available")

// position is the source's replay position as stored in checkpoints
// (Snapshot.Inline, JSON).
type position struct {
	// Stream and Subject identify what the position belongs to: a position
	// of another stream or filter is refused.
	Stream  string `json:"stream"`
	Subject string `json:"subject,omitempty"`
	// Next is the stream sequence to read next.
	// INVARIANT: every message with a sequence below Next that matches
	// Subject was emitted before the barrier the position is stored with;
	// none at or after Next was.
	Next uint64 `json:"next"`
	// End is the last sequence to read when HasEnd (stop_at latest): the
	// stream's last sequence at the first start, kept across restores.
	End    uint64 `json:"end,omitempty"`
	HasEnd bool   `json:"has_end,omitempty"`
	// MaxTime is the newest event time emitted, to restore the watermark;
	// nil before the first record.
	MaxTime *int64 `json:"max_time,omitempty"`
	// Bad counts the bad records skipped or dead-lettered before Next (nil:
	// none), so the counts resume with the position.
	Bad *stream.BadRecordTally `json:"bad,omitempty"`
	// Horizon is the stream's last sequence at the source's last look at
	// it (at most End), when that is at or past Next; Holes is how many
	// sequences from Next to Horizon were missing then and had been since
	// before the source began. More missing there at a restore were removed
	// since the checkpoint: a gap (ErrGap). Both 0: no horizon.
	Horizon uint64 `json:"horizon,omitempty"`
	Holes   uint64 `json:"holes,omitempty"`
	// Gaps counts the gaps skipped under OnGapSkip before Next (nil: none).
	Gaps *GapTally `json:"gaps,omitempty"`
}

// decodePosition parses a restored position and checks that it belongs to
// cfg's stream and filter.
func decodePosition(inline []byte, cfg *SourceConfig) (position, error) {
	var p position
	if err := json.Unmarshal(inline, &p); err != nil {
		return p, fmt.Errorf("restoring position %q: %w", inline, err)
	}
	if p.Stream != cfg.Stream || p.Subject != cfg.Subject {
		return p, fmt.Errorf("%w: the checkpoint's position belongs to stream %q subject %q, the source reads stream %q subject %q",
			runtime.ErrIncompatible, p.Stream, p.Subject, cfg.Stream, cfg.Subject)
	}
	if p.Next == 0 {
		return p, fmt.Errorf("restoring position %s: next sequence 0 (sequences begin at 1)", inline)
	}
	// The reader reads no sequence past End, so Next is at most End+1.
	if p.HasEnd && p.Next-1 > p.End {
		return p, fmt.Errorf("restoring position %s: next sequence %d is past the end sequence %d + 1: the source never reads beyond its end", inline, p.Next, p.End)
	}
	if !p.HasEnd && p.End != 0 {
		return p, fmt.Errorf("restoring position %s: an end sequence %d without has_end", inline, p.End)
	}
	// The reader stores a horizon at or past Next (and at most End), and
	// holes inside it.
	if p.Horizon != 0 && (p.Horizon < p.Next || p.HasEnd && p.Horizon > p.End) {
		return p, fmt.Errorf("restoring position %s: horizon %d outside next %d … end: the source never stores one", inline, p.Horizon, p.Next)
	}
	if p.Holes != 0 && (p.Horizon == 0 || p.Holes > p.Horizon-p.Next+1) {
		return p, fmt.Errorf("restoring position %s: %d holes do not fit between next %d and horizon %d", inline, p.Holes, p.Next, p.Horizon)
	}
	if g := p.Gaps; g != nil && (g.Ranges < 0 || g.Sequences < g.Ranges) {
		return p, fmt.Errorf("restoring position %s: a gap count of %d ranges and %d sequences", inline, g.Ranges, g.Sequences)
	}
	return p, nil
}

// encode serialises the position.
func (p position) encode() ([]byte, error) { return json.Marshal(p) }
