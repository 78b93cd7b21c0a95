// Package storage keeps checkpoint data: the state files subtasks write for a checkpoint and the
// metadata file whose presence makes a checkpoint complete.
//
// Every stored file carries a checksum trailer (see format.go), so a truncated or corrupted file is
// reported as an error that wraps [ErrCorrupt] and names the file, never returned as data. Metadata
// is written atomically and durably: a checkpoint is a recovery point only once [Storage.WriteMetadata]
// has returned nil, and an incomplete checkpoint never looks complete (checkpointing.txt, "An
// incomplete checkpoint never replaces the last successful one").
//
// [Local] is the local-directory backend. [Faulty] wraps any Storage to inject failures in tests, and
// [CrashFS] is an in-memory filesystem under a Local that models what survives a power loss.
package storage

import (
	"cmp"
	"context"
	"errors"
	"fmt"
)

// LedgerName is the name of the checkpoint ledger, beside the checkpoint directories (see
// Storage.WriteLedger).
const LedgerName = "_ledger"

// MetadataName is the name of the file that makes a checkpoint complete. State file names may not
// start with '_', so no state file can collide with it.
const MetadataName = "_metadata"

// Storage keeps checkpoint data. Implementations must be safe for concurrent use.
type Storage interface {
	// WriteFile durably stores one state file of checkpoint id (write, fsync). The stored bytes
	// carry a checksum trailer. Writing a name that exists replaces it, so a failed write can be
	// retried.
	WriteFile(ctx context.Context, id int64, name string, data []byte) (Handle, error)
	// ReadFile reads the file a handle names and verifies its trailer and checksum, and that the
	// payload's size and checksum match the handle.
	ReadFile(ctx context.Context, h Handle) ([]byte, error)
	// StatFile checks that the file a handle names is stored, without reading it: for a file whose
	// content was verified elsewhere (a local copy with the handle's checksum), that storage still
	// holds it. A missing file fails it with an error wrapping ErrNotFound; where the store tells
	// the size cheaply (a local directory), a file of another size with one wrapping ErrCorrupt.
	StatFile(ctx context.Context, h Handle) error
	// WriteMetadata makes checkpoint id complete: it writes the metadata with a checksum atomically
	// and durably (temp file in the checkpoint directory, fsync, rename to the final name, fsync the
	// directory). Until it returns nil the checkpoint is not complete; if it fails no partial
	// metadata file is visible under the final name, and none becomes visible later: a write that
	// ctx ended before it could commit is abandoned for good (the caller reports the checkpoint as
	// failed and may abort its sink output), or, past its commit point, awaited.
	WriteMetadata(ctx context.Context, id int64, data []byte) error
	// ReadMetadata returns the verified metadata payload of checkpoint id.
	ReadMetadata(ctx context.Context, id int64) ([]byte, error)
	// List returns every checkpoint present, complete or not, in increasing id order.
	List(ctx context.Context) ([]Entry, error)
	// Discard deletes everything stored for checkpoint id. Discarding an absent id is not an error.
	Discard(ctx context.Context, id int64) error
	// Trim reduces checkpoint id to the state files named in keep, for a checkpoint that is kept
	// only because later checkpoints build on some of its files (retention is reference-counted).
	// It deletes the metadata first, durably: from then on the checkpoint is incomplete and never
	// a recovery point, whatever happens next. Then it deletes every other file of the checkpoint
	// (state files not in keep, temporary files). With keep empty it is Discard: the checkpoint's
	// directory (or key prefix) goes too.
	//
	// Names in keep that are not stored are ignored; a name that cannot be a state file name
	// (ValidName) fails the call before anything is deleted. Trim is idempotent and safe to retry:
	// trimming an absent checkpoint, or one already trimmed, is not an error. A crash or failure
	// part-way leaves every file in keep and, once the metadata's deletion was attempted, possibly
	// an incomplete checkpoint with some of the other files, which a later Trim or Discard deletes.
	Trim(ctx context.Context, id int64, keep []string) error
	// WriteLedger replaces the checkpoint ledger (LedgerName, beside the checkpoints) with data,
	// atomically and durably: after it returns nil a reader finds data (with a checksum); after it
	// fails a reader finds the old ledger or the new one, whole. The ledger is the job's memory of
	// what no checkpoint directory may be trusted to keep (checkpoint ids reserved, checkpoints
	// reported failed; see checkpoint.Ledger), so it is never deleted with checkpoints.
	WriteLedger(ctx context.Context, data []byte) error
	// ReadLedger returns the verified ledger payload, or an error wrapping ErrNotFound when there
	// is none, or ErrCorrupt when it fails its checksum.
	ReadLedger(ctx context.Context) ([]byte, error)
	// Location describes where the data lives, for messages (e.g. the directory path).
	Location() string
}

// Handle names one stored state file. Subtasks return handles in their acks and the coordinator
// records them in the checkpoint's metadata; ReadFile uses them to find and verify the file.
type Handle struct {
	// Name is the file's name, relative to its checkpoint.
	Name string `json:"name"`
	// Checkpoint is the id of the checkpoint the file was written for.
	Checkpoint int64 `json:"checkpoint"`
	// Size is the payload's length in bytes (without the trailer).
	Size int64 `json:"size"`
	// CRC is the CRC-32C (Castagnoli) of the payload.
	CRC uint32 `json:"crc"`
}

// FileRef names one stored state file by checkpoint and name, without the size and checksum a
// Handle adds: what retention counts references by (a file is deleted only when no kept
// checkpoint references it; see Retain and Storage.Trim).
type FileRef struct {
	// Checkpoint is the id of the checkpoint the file was written for.
	Checkpoint int64 `json:"checkpoint"`
	// Name is the file's name, relative to its checkpoint.
	Name string `json:"name"`
}

// Ref returns the FileRef of the file h names.
func (h Handle) Ref() FileRef { return FileRef{Checkpoint: h.Checkpoint, Name: h.Name} }

// Compare orders references by checkpoint, then name.
func (r FileRef) Compare(o FileRef) int {
	if c := cmp.Compare(r.Checkpoint, o.Checkpoint); c != 0 {
		return c
	}
	return cmp.Compare(r.Name, o.Name)
}

// String formats the reference as <checkpoint>/<name>.
func (r FileRef) String() string { return fmt.Sprintf("%d/%s", r.Checkpoint, r.Name) }

// Entry describes one checkpoint found by List.
type Entry struct {
	// ID is the checkpoint id.
	ID int64
	// Complete reports whether the checkpoint's metadata file exists. List does not verify it;
	// ReadMetadata does.
	Complete bool
	// Path is where the checkpoint lives, for messages.
	Path string
}

// ErrCorrupt marks a stored file that is truncated or fails its checksum. Test for it with
// [IsCorrupt] or errors.Is; [*CorruptError] carries the file and the reason.
var ErrCorrupt = errors.New("storage: corrupt checkpoint data")

// ErrNotFound marks a missing checkpoint file or metadata, or the absence of any usable complete
// checkpoint. The error that wraps it names the file.
var ErrNotFound = errors.New("storage: not found")

// CorruptError reports a stored file that cannot be trusted: it names the file and says why. It
// wraps [ErrCorrupt].
type CorruptError struct {
	// Path is the file's location.
	Path string
	// Reason says what is wrong, e.g. "truncated: 3 bytes, expected at least 16".
	Reason string
}

// Error implements error.
func (e *CorruptError) Error() string {
	return fmt.Sprintf("storage: corrupt checkpoint file %s: %s", e.Path, e.Reason)
}

// Unwrap returns [ErrCorrupt], so errors.Is(err, ErrCorrupt) holds.
func (e *CorruptError) Unwrap() error { return ErrCorrupt }

// IsCorrupt reports whether err says that stored data is truncated or fails its checksum.
func IsCorrupt(err error) bool { return errors.Is(err, ErrCorrupt) }

// checkID rejects ids that cannot name a checkpoint directory.
func checkID(id int64) error {
	if id < 0 {
		return fmt.Errorf("storage: invalid checkpoint id %d: must not be negative", id)
	}
	return nil
}

// ContextErr returns ctx.Err() (nil while ctx is live), wrapped with the context's cause when one
// was given (context.WithDeadlineCause and the like), so that an error says why the caller gave up
// and still matches context.DeadlineExceeded or context.Canceled.
func ContextErr(ctx context.Context) error {
	err := ctx.Err()
	if err == nil {
		return nil
	}
	if cause := context.Cause(ctx); cause != nil && cause != err {
		return fmt.Errorf("%w: %w", cause, err)
	}
	return err
}
