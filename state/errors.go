package state

import "errors"

// ErrCorrupt marks a snapshot that cannot be trusted: a checksum does not
// match, the file is truncated, or its structure is inconsistent. Storage
// treats it like a missing file and falls back to an older checkpoint.
var ErrCorrupt = errors.New("state: corrupt snapshot")

// ErrStateMismatch marks restored state that does not fit the pipeline that
// is restoring it: a state registered with a different kind or codec than the
// one that wrote it, a different max parallelism, or keys that no longer hash
// to the key group they were stored in. It is a configuration or schema
// change, not damage: falling back to an older checkpoint would not help.
var ErrStateMismatch = errors.New("state: restored state does not match registration")

// IsCorrupt reports whether err (or any error it wraps) is ErrCorrupt.
func IsCorrupt(err error) bool { return errors.Is(err, ErrCorrupt) }
