package storage

import (
	"context"
	"errors"
	"fmt"
)

// Latest finds the checkpoint to restore from: the newest complete checkpoint whose metadata reads
// and verifies. It returns its id and metadata payload.
//
// Complete checkpoints whose metadata is corrupt (or vanished after listing) are skipped in favour of
// the previous one (DESIGN.md §7); each is reported in skipped with the file and the reason, for the
// caller to log. Any other error (I/O, a cancelled context) stops the walk and is returned: falling
// back to an older checkpoint because of a transient failure would replay output a sink may already
// have committed.
//
// If no complete checkpoint verifies, err wraps ErrNotFound.
func Latest(ctx context.Context, s Storage) (id int64, metadata []byte, skipped []error, err error) {
	entries, err := s.List(ctx)
	if err != nil {
		return 0, nil, nil, err
	}
	for i := len(entries) - 1; i >= 0; i-- {
		e := entries[i]
		if !e.Complete {
			continue
		}
		meta, err := s.ReadMetadata(ctx, e.ID)
		switch {
		case err == nil:
			return e.ID, meta, skipped, nil
		case IsCorrupt(err) || errors.Is(err, ErrNotFound):
			skipped = append(skipped, err)
		default:
			return 0, nil, skipped, err
		}
	}
	return 0, nil, skipped, fmt.Errorf("%w: no complete checkpoint in %s (%d skipped)", ErrNotFound, s.Location(), len(skipped))
}
