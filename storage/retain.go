package storage

import (
	"context"
	"errors"
	"fmt"
)

// Retain applies the retention policy to s (DESIGN.md §7: keep the last K complete checkpoints) and
// returns the ids it discarded, in increasing order.
//
// It keeps the newest keep complete checkpoints and deletes every other checkpoint, complete or not,
// whose id is lower than the newest complete one. It never deletes:
//   - protect (for instance the checkpoint the job was restored from; pass -1 to protect nothing);
//   - the newest complete checkpoint or anything newer: newer checkpoints may still be in flight.
//
// "Complete" here means that the metadata reads and verifies, not just that it exists: a checkpoint
// whose metadata is corrupt counts as incomplete, so it cannot take the place of a good checkpoint in
// the kept set (Latest would skip it and need the one before). A corrupt checkpoint newer than the
// newest good one is left for inspection. With no good complete checkpoint Retain deletes nothing.
//
// keep must be at least 1, since the newest complete checkpoint is the recovery point. Flink's
// equivalent setting, state.checkpoints.num-retained, defaults to 1.
//
// Retain assumes that a checkpoint's metadata references only state files of that checkpoint (every
// handle's Checkpoint is its own id). Metadata is opaque to this package, so a caller whose
// checkpoints share files with older ones (incremental snapshots) must not use Retain.
//
// If metadata cannot be read for a reason other than corruption or absence, Retain deletes nothing
// and returns that error. If a Discard fails it goes on with the others and returns every failure.
func Retain(ctx context.Context, s Storage, keep int, protect int64) ([]int64, error) {
	if keep < 1 {
		return nil, fmt.Errorf("storage: retain %d checkpoints: must keep at least 1", keep)
	}
	entries, err := s.List(ctx)
	if err != nil {
		return nil, err
	}

	// Walk complete checkpoints newest first until keep good ones are found.
	kept := make(map[int64]bool, keep)
	newest := int64(-1) // id of the newest good complete checkpoint; -1: none
	for i := len(entries) - 1; i >= 0 && len(kept) < keep; i-- {
		e := entries[i]
		if !e.Complete {
			continue
		}
		if _, err := s.ReadMetadata(ctx, e.ID); err != nil {
			if IsCorrupt(err) || errors.Is(err, ErrNotFound) {
				continue
			}
			return nil, fmt.Errorf("storage: retain: %w", err)
		}
		kept[e.ID] = true
		if newest < 0 {
			newest = e.ID
		}
	}
	if newest < 0 {
		return nil, nil
	}

	var discarded []int64
	var errs []error
	for _, e := range entries {
		if e.ID >= newest || e.ID == protect || kept[e.ID] {
			continue
		}
		if err := s.Discard(ctx, e.ID); err != nil {
			errs = append(errs, err)
			continue
		}
		discarded = append(discarded, e.ID)
	}
	return discarded, errors.Join(errs...)
}
