package storage

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// Retain applies the retention policy to s (DESIGN.md §7: keep the last K complete checkpoints, and
// never delete a file that a retained checkpoint still references) and returns the ids it discarded,
// in increasing order.
//
// It keeps the newest keep complete checkpoints and deletes every other checkpoint, complete or not,
// whose id is lower than the newest complete one. It never deletes:
//   - protect (for instance the checkpoint the job was restored from; pass -1 to protect nothing);
//   - the newest complete checkpoint or anything newer: newer checkpoints may still be in flight;
//   - a file that a kept checkpoint builds on (incremental snapshots): refs decodes a checkpoint's
//     metadata into the files of earlier checkpoints it references, and every file referenced by
//     one kept above, or by protect when it is complete, stays (their own references are not
//     followed: a checkpoint references every file it reads). A checkpoint kept only because
//     kept ones reference some of its files is trimmed to exactly those files (Storage.Trim): its
//     metadata and every other file go, so it is never taken for a recovery point, and it is not
//     among the ids returned. One already trimmed (by an earlier Retain or a running job's
//     coordinator: no metadata, only referenced files) is recognised as referenced the same way and
//     trimmed again, which deletes nothing more unless references went. nil refs means no
//     checkpoint references another.
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
// protect references is ever deleted, and with refs the others are discarded or trimmed newest
// first, each deleting its metadata before its files, so a crash in the middle of Retain cannot
// leave a kept checkpoint, or a complete one it discards or trims, with a file it references
// missing (one kept only for its files is no recovery point and keeps nothing it references
// itself). A referenced checkpoint that is corrupt or incomplete is trimmed too (it is no recovery
// point, and what kept ones read of it stays).
//
// If metadata cannot be read for a reason other than corruption or absence, or refs fails, Retain
// deletes nothing and returns that error. If a Discard or Trim fails it goes on with the others and
// returns every failure; the checkpoint it failed on may still be complete, so the older ones then
// keep the files it references (trimmed to them rather than discarded), and if its references
// cannot be read nothing older is deleted.
func Retain(ctx context.Context, s Storage, keep int, protect int64, refs func(metadata []byte) ([]FileRef, error)) ([]int64, error) {
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
	var referenced map[int64][]string // files of checkpoints that are not kept whole
	if refs != nil {
		if protect >= 0 && !kept[protect] {
			roots = append(roots, protect)
		}
		if referenced, err = keepReferenced(ctx, s, entries, roots, kept, refs); err != nil {
			return nil, err
		}
	}

	// Newest first: a checkpoint references only earlier ones, so a crash between two deletions
	// never leaves a checkpoint whose referenced files are gone, even among those being deleted
	// (each loses its metadata before its files).
	var doomed []int64
	for _, e := range entries {
		if e.ID < newest && e.ID != protect && !kept[e.ID] {
			doomed = append(doomed, e.ID)
		}
	}
	slices.Reverse(doomed)
	var discarded []int64
	var errs []error
	for _, id := range doomed {
		var err error
		if names, ok := referenced[id]; ok {
			err = s.Trim(ctx, id, names)
		} else if err = s.Discard(ctx, id); err == nil {
			discarded = append(discarded, id)
		}
		if err == nil {
			continue
		}
		errs = append(errs, err)
		// The failed one may still be complete (its metadata not deleted): what it references
		// stays, so that no complete checkpoint is left with a file it references missing.
		if refs != nil {
			if err := keepReferencedBy(ctx, s, id, kept, referenced, refs); err != nil {
				errs = append(errs, err)
				break // what it references is not known: delete nothing older
			}
		}
	}
	slices.Sort(discarded)
	return discarded, errors.Join(errs...)
}

// keepReferencedBy adds to referenced the files of checkpoints not kept that checkpoint id
// references, if its metadata is still there: Retain's deletion of id failed, so id may still be
// complete, and the older checkpoints, deleted after it, keep what it reads.
func keepReferencedBy(ctx context.Context, s Storage, id int64, kept map[int64]bool, referenced map[int64][]string, refs func([]byte) ([]FileRef, error)) error {
	meta, err := s.ReadMetadata(ctx, id)
	if IsCorrupt(err) || errors.Is(err, ErrNotFound) {
		return nil // no recovery point: nothing of what it references needs to stay
	}
	if err != nil {
		return fmt.Errorf("storage: retain: checkpoint %d, whose deletion failed: %w", id, err)
	}
	files, err := refs(meta)
	if err != nil {
		return fmt.Errorf("storage: retain: references of checkpoint %d, whose deletion failed: %w", id, err)
	}
	for _, f := range files {
		if f.Checkpoint < id && !kept[f.Checkpoint] && !slices.Contains(referenced[f.Checkpoint], f.Name) {
			referenced[f.Checkpoint] = append(referenced[f.Checkpoint], f.Name)
		}
	}
	return nil
}

// keepReferenced marks the roots in kept (they are kept whole) and returns, for every other
// checkpoint a root references through refs, the names of its files the roots reference, sorted.
// Only the roots' references count, not those of the checkpoints they reference: a checkpoint's
// references name every earlier file its state is read from, and a checkpoint kept only for its
// files is no recovery point. A root without good metadata references nothing (it is no recovery
// point either); a referenced checkpoint is trimmed to what is referenced whatever its state.
func keepReferenced(ctx context.Context, s Storage, entries []Entry, roots []int64, kept map[int64]bool, refs func([]byte) ([]FileRef, error)) (map[int64][]string, error) {
	complete := make(map[int64]bool, len(entries))
	for _, e := range entries {
		complete[e.ID] = e.Complete
	}
	for _, id := range roots {
		kept[id] = true
	}
	referenced := map[int64][]string{}
	for _, id := range roots {
		if !complete[id] {
			continue
		}
		meta, err := s.ReadMetadata(ctx, id)
		if err != nil {
			if IsCorrupt(err) || errors.Is(err, ErrNotFound) {
				continue
			}
			return nil, fmt.Errorf("storage: retain: %w", err)
		}
		files, err := refs(meta)
		if err != nil {
			return nil, fmt.Errorf("storage: retain: references of checkpoint %d: %w", id, err)
		}
		for _, f := range files {
			if f.Checkpoint != id && !kept[f.Checkpoint] {
				referenced[f.Checkpoint] = append(referenced[f.Checkpoint], f.Name)
			}
		}
	}
	for id, names := range referenced {
		slices.Sort(names)
		referenced[id] = slices.Compact(names)
	}
	return referenced, nil
}
