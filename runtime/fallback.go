package runtime

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// This file decides whether recovery may fall back past damaged checkpoints.
//
// Falling back from the newest complete checkpoint N to an older one M
// restores M's state and source positions and replays every record after M.
// Whatever a sink already published for a checkpoint in (M, N] is then
// produced and published a second time: the fallback is exactly-once only if
// no sink published output of a checkpoint after M. Sinks commit a
// checkpoint moments after it completes, so with transactional sinks that is
// the exception (a crash between completion and commit); usually recovery
// must refuse and say why, and the user chooses: restore the damaged file, or
// accept duplicates (Options.AllowDuplicates).

// sinkProgress is what one transactional sink says about its published
// output, for the fallback decision.
type sinkProgress struct {
	sink string
	// last is the newest checkpoint it published (see CommitTracker).
	last int64
	// unknown says why it cannot tell; "" when last is known.
	unknown string
}

// checkFallback runs at every recovery and returns nil if recovery may go on
// from c.meta (or from no checkpoint, when nil): every transactional sink
// reports output published up to that checkpoint at most, or
// AllowDuplicates is set.
//
// When newer complete checkpoints are damaged (c.damaged), a sink that
// cannot tell counts as having published past the fallback, and the refusal
// is a *CorruptCheckpointError; it logs the checkpoints it skips. When none
// is, the recovery point is the newest checkpoint storage holds, and a sink
// that published past it says that newer checkpoints were deleted or lost
// without a trace (their directory or _metadata gone): the refusal is a
// *PublishedPastError. Only a sink that reports so counts then: one that
// cannot tell does not stop an ordinary recovery.
func (j *Job) checkFallback(ctx context.Context, c *candidate) error {
	var target int64
	if c.meta != nil {
		target = c.meta.ID
	}
	jobID := c.jobID
	if jobID == "" {
		jobID = j.jobID
	}
	damaged := len(c.damaged) > 0
	if !damaged && jobID == "" {
		return nil // a fresh start: no job whose output could be looked up
	}
	var past []sinkProgress
	for _, n := range j.plan.Nodes {
		if n.Committer == nil {
			continue
		}
		p := sinkProgress{sink: n.ID}
		tr, ok := n.Committer.(CommitTracker)
		switch {
		case jobID == "":
			p.unknown = "no readable checkpoint names the job, so its published output cannot be looked up"
		case !ok:
			p.unknown = "it cannot tell which checkpoint it published last"
		default:
			last, err := tr.LastCommitted(ctx, jobID, n.ID)
			switch {
			case errors.Is(err, ErrCommitUnknown):
				p.unknown = err.Error()
			case err != nil && damaged:
				return fmt.Errorf("sink %s: finding the newest checkpoint it published, to decide whether damaged checkpoint %d can be skipped: %w", n.ID, c.damaged[0].id, err)
			case err != nil:
				return fmt.Errorf("sink %s: finding the newest checkpoint it published, to check that restoring checkpoint %d publishes nothing twice: %w", n.ID, target, err)
			default:
				p.last = last
			}
		}
		if p.last > target || p.unknown != "" && damaged {
			past = append(past, p)
		}
	}
	if !damaged {
		if len(past) == 0 {
			return nil
		}
		perr := &PublishedPastError{Location: j.storage.Location(), Restored: target, past: past}
		if !j.opts.AllowDuplicates {
			return perr
		}
		j.log.Warn("restoring although sinks published output of newer checkpoints, which were deleted or lost; that output is published again (--allow-duplicates: at-least-once for this recovery)",
			"restored", target, "sinks", describeSinks(perr.past))
		return nil
	}
	ferr := &CorruptCheckpointError{Location: j.storage.Location(), Fallback: target, damaged: c.damaged, past: past}
	for _, d := range c.damaged {
		ferr.Checkpoints = append(ferr.Checkpoints, d.id)
	}
	if len(past) > 0 && !j.opts.AllowDuplicates {
		return ferr
	}
	to := "no checkpoint: sources start from their configured start positions"
	if target > 0 {
		to = fmt.Sprintf("checkpoint %d", target)
	}
	for _, d := range c.damaged {
		j.log.Warn("skipping a damaged checkpoint; falling back to "+to, "checkpoint", d.id, "err", d.err)
	}
	if len(past) > 0 {
		j.log.Warn("falling back although sinks published output after "+to+"; that output is published again (--allow-duplicates: at-least-once for this recovery)",
			"sinks", describeSinks(ferr.past))
	} else {
		j.log.Info("falling back is exactly-once: no sink published output after "+to, "skipped", ferr.Checkpoints)
	}
	return nil
}

// CorruptCheckpointError is the refusal to fall back past damaged
// checkpoints when doing so would publish output twice. Its message names
// each damaged checkpoint's file and what is wrong with it, which sinks
// already published output after the fallback point (or cannot tell), and
// the two ways on. It wraps ErrIncompatible, so Run returns it at once (a
// restart cannot repair a file), and the damage (storage.ErrCorrupt,
// storage.ErrNotFound or state.ErrCorrupt).
type CorruptCheckpointError struct {
	// Location is the checkpoint storage's location.
	Location string
	// Checkpoints are the damaged complete checkpoints, newest first.
	Checkpoints []int64
	// Fallback is the checkpoint recovery would fall back to, 0 for none.
	Fallback int64

	damaged []damagedCheckpoint
	past    []sinkProgress
}

// Error explains the refusal and the choices.
func (e *CorruptCheckpointError) Error() string {
	var b strings.Builder
	for i, d := range e.damaged {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%v", d.err)
	}
	newest := e.Checkpoints[0]
	target, why := "no checkpoint", " (none older is retained; checkpoint.retain keeps more)"
	replay := "starting without a checkpoint replays every record from the sources' start"
	if e.Fallback > 0 {
		target, why = fmt.Sprintf("checkpoint %d", e.Fallback), ""
		replay = fmt.Sprintf("restoring checkpoint %d replays every record after it", e.Fallback)
	}
	fmt.Fprintf(&b, ". Checkpoint %d in %s cannot be restored, and falling back to %s%s would publish output twice: %s, and %s. "+
		"Restore the damaged file from a backup and run again, or run with --allow-duplicates (Options.AllowDuplicates) to fall back to %s and publish that output a second time (at-least-once for this recovery)",
		newest, e.Location, target, why, describeSinks(e.past), replay, target)
	return b.String()
}

// describeSinks says, per sink, what it published after the checkpoint a
// recovery would restore.
func describeSinks(past []sinkProgress) string {
	parts := make([]string, len(past))
	for i, p := range past {
		if p.unknown != "" {
			parts[i] = fmt.Sprintf("sink %q cannot tell which checkpoint it published last (%s)", p.sink, p.unknown)
		} else {
			parts[i] = fmt.Sprintf("sink %q already published the output of checkpoint %d", p.sink, p.last)
		}
	}
	return strings.Join(parts, ", ")
}

// Unwrap returns ErrIncompatible and the damage of every damaged checkpoint.
func (e *CorruptCheckpointError) Unwrap() []error {
	errs := []error{ErrIncompatible}
	for _, d := range e.damaged {
		errs = append(errs, d.err)
	}
	return errs
}

// PublishedPastError is the refusal to restore a checkpoint older than what
// the sinks already published, when storage holds nothing newer: checkpoints
// were deleted (`ingest checkpoints delete --force`, a retention tool) or
// lost their directory or _metadata. Restoring replays every record after
// the restored checkpoint, so that output would be published twice. It
// wraps ErrIncompatible, so Run returns it at once.
type PublishedPastError struct {
	// Location is the checkpoint storage's location.
	Location string
	// Restored is the checkpoint recovery would restore, 0 for none.
	Restored int64

	past []sinkProgress
}

// Error says what the sinks published, what is missing and the ways on.
func (e *PublishedPastError) Error() string {
	target, replay := "no checkpoint", "starting without a checkpoint replays every record from the sources' start"
	if e.Restored > 0 {
		target = fmt.Sprintf("checkpoint %d", e.Restored)
		replay = fmt.Sprintf("restoring checkpoint %d replays every record after it", e.Restored)
	}
	var newest int64
	for _, p := range e.past {
		newest = max(newest, p.last)
	}
	return fmt.Sprintf("the newest complete checkpoint in %s is %s, but %s: checkpoint %d and any between were deleted or lost (a missing checkpoint directory or _metadata), and %s, so that output would be published twice. "+
		"Restore the missing checkpoint from a backup and run again, or run with --allow-duplicates (Options.AllowDuplicates) to restore %s and publish that output a second time (at-least-once for this recovery)",
		e.Location, target, describeSinks(e.past), newest, replay, target)
}

// Unwrap returns ErrIncompatible: a restart cannot bring the checkpoint back.
func (e *PublishedPastError) Unwrap() error { return ErrIncompatible }
