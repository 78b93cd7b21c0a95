package storage

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// Retain applies the retention policy to s (DESIGN.md §7: keep the last K complete checkpoints) and
// returns the ids it discarded, in increasing order.
//
// It keeps the newest keep complete checkpoints and deletes every other checkpoint, complete or not,
// whose id is lower than the newest complete one. It never deletes:
//   - protect (for instance the checkpoint the job was restored from; pass -1 to protect nothing);
//   - the newest complete checkpoint or anything newer: newer checkpoints may still be in flight;
//   - a checkpoint whose files a kept one builds on (incremental snapshots): refs decodes a
//     checkpoint's metadata into the ids of the earlier checkpoints it references, and every
//     checkpoint referenced by one kept above, or by protect when it is complete, is kept (their
//     own references are not followed: a checkpoint references every file it reads). nil refs
//     means no checkpoint references another.
//
// "Complete" here means that the metadata reads and verifies, not just that it exists: a checkpoint
// whose metadata is corrupt counts as incomplete, so it cannot take the place of a good checkpoint in
// the kept set (Latest would skip it and need the one before). A corrupt checkpoint newer than the
// newest good one is left for inspection. With no good complete checkpoint Retain deletes nothing.
//
// keep must be at least 1, since the newest complete checkpoint is the recovery point. Flink's
// equivalent setting, state.checkpoints.num-retained, defaults to 1.
//
// Metadata is opaque to this package, hence refs; a checkpoint references only earlier ones. Every
// reference that counts is resolved before anything is deleted, nothing that a kept checkpoint or
// protect references is ever deleted, and with refs the others are deleted newest first, so a
// crash in the middle of Retain cannot leave a kept checkpoint, or one it deletes, with a file it
// references missing (one kept only because a kept one references it may lose what it references
// itself: it is no recovery point). A referenced checkpoint that is corrupt or incomplete is kept
// too (for inspection: it is no recovery point, but deleting it would lose what is left).
//
// If metadata cannot be read for a reason other than corruption or absence, or refs fails, Retain
// deletes nothing and returns that error. If a Discard fails it goes on with the others and returns
// every failure.
func Retain(ctx context.Context, s Storage, keep int, protect int64, refs func(metadata []byte) ([]int64, error)) ([]int64, error) {
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
	var roots []int64   // the kept ones, then protect: where references are followed from
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
		roots = append(roots, e.ID)
		if newest < 0 {
			newest = e.ID
		}
	}
	if newest < 0 {
		return nil, nil
	}
	if refs != nil {
		if protect >= 0 && !kept[protect] {
			roots = append(roots, protect)
		}
		if err := keepReferenced(ctx, s, entries, roots, kept, refs); err != nil {
			return nil, err
		}
	}

	var doomed []int64
	for _, e := range entries {
		if e.ID < newest && e.ID != protect && !kept[e.ID] {
			doomed = append(doomed, e.ID)
		}
	}
	if refs != nil {
		// Newest first: a checkpoint references only earlier ones, so a crash between two
		// Discards never leaves a checkpoint whose referenced files are gone, even among those
		// being deleted.
		slices.Reverse(doomed)
	}
	var discarded []int64
	var errs []error
	for _, id := range doomed {
		if err := s.Discard(ctx, id); err != nil {
			errs = append(errs, err)
			continue
		}
		discarded = append(discarded, id)
	}
	slices.Sort(discarded)
	return discarded, errors.Join(errs...)
}

// keepReferenced adds to kept the roots and every checkpoint a root references through refs. Only
// the roots' references count, not those of the checkpoints they reference: a checkpoint's
// references name every earlier file its state is read from, and a checkpoint kept only for its
// files is no recovery point. A root without good metadata references nothing (it is no recovery
// point either); a referenced checkpoint is kept whatever its state.
func keepReferenced(ctx context.Context, s Storage, entries []Entry, roots []int64, kept map[int64]bool, refs func([]byte) ([]int64, error)) error {
	complete := make(map[int64]bool, len(entries))
	for _, e := range entries {
		complete[e.ID] = e.Complete
	}
	for _, id := range roots {
		kept[id] = true
		if !complete[id] {
			continue
		}
		meta, err := s.ReadMetadata(ctx, id)
		if err != nil {
			if IsCorrupt(err) || errors.Is(err, ErrNotFound) {
				continue
			}
			return fmt.Errorf("storage: retain: %w", err)
		}
		ids, err := refs(meta)
		if err != nil {
			return fmt.Errorf("storage: retain: references of checkpoint %d: %w", id, err)
		}
		for _, r := range ids {
			kept[r] = true
		}
	}
	return nil
}
