package file

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/ingest-engine/ingest/stream"
)

// positionVersion is the format version of a file source subtask's
// position. A reader refuses versions it does not know. Version 2 added the
// files' identities (filePosition.ID, AtEnd) and the assignment of files to
// subtasks by inode (position.ByPath); version 1 positions are read as
// version 2 ones without identities, assigned by path.
const (
	positionVersion       = 2
	legacyPositionVersion = 1
)

// position is a file source subtask's replay position, stored as inline
// JSON in every checkpoint.
type position struct {
	Version int `json:"version"`
	// Listed is set with stop_at latest: the subtask's files are exactly
	// Files, fixed (with their ends) at the job's first start.
	Listed bool `json:"listed,omitempty"`
	// ByPath says files are assigned to subtasks by the hash of their path,
	// as version 1 did, rather than of their inode number; a job restored
	// from a version 1 position keeps that assignment for as long as it
	// runs, so that no file changes subtask (see reader.ownsFile).
	ByPath bool           `json:"by_path,omitempty"`
	Files  []filePosition `json:"files"`
	// Seen are the inode numbers, sorted, of the files the glob matched at
	// the subtask's last look that are not in Files: other subtasks'. A
	// restored subtask that finds one under the path of a file of its own
	// that is gone knows it for a file renamed there (rotation with
	// numbered names), not one that replaced its file (see reader.isNew).
	Seen []uint64 `json:"seen,omitempty"`
	// Bad counts the subtask's bad records skipped or dead-lettered before
	// the position (nil: none), so the counts resume with it.
	Bad *stream.BadRecordTally `json:"bad,omitempty"`
}

// filePosition is where one file is read up to.
type filePosition struct {
	Path string `json:"path"`
	// Offset is the byte offset after the last record emitted: a restore
	// reads from here.
	Offset int64 `json:"offset"`
	// Line is the number of lines before Offset, for line numbers in errors
	// and Line.Number.
	Line int64 `json:"line"`
	// End is the size to read to (stop_at latest).
	End *int64 `json:"end,omitempty"`
	// MaxTime is the newest event time read from the file, which restores
	// its split's watermark.
	MaxTime *int64 `json:"max_time,omitempty"`
	// HeaderEnd is the offset after a CSV file's header, 0 before it was
	// read; a restore reads the header again and checks it ends there.
	HeaderEnd int64 `json:"header_end,omitempty"`
	// Done says the file was read to End.
	Done bool `json:"done,omitempty"`
	// AtEnd says the file had been read to its end when the source last
	// looked: had it gone since, nothing written before that look is lost.
	AtEnd bool `json:"at_end,omitempty"`
	// ID is the identity of the file read up to Offset; nil in version 1
	// positions (taken on restore, from the file then under Path).
	ID *fileID `json:"id,omitempty"`
}

// encodePosition serialises the splits' progress, sorted by path, the
// other subtasks' files seen (see position.Seen) and the bad-record tally.
func encodePosition(listed, byPath bool, splits []*split, seen []uint64, bad stream.BadRecordTally) ([]byte, error) {
	p := position{Version: positionVersion, Listed: listed, ByPath: byPath, Files: make([]filePosition, 0, len(splits)), Seen: seen}
	if bad != (stream.BadRecordTally{}) {
		p.Bad = &bad
	}
	for _, s := range splits {
		if s.dropped {
			continue
		}
		fp := filePosition{Path: s.path, Offset: s.off, Line: s.line, HeaderEnd: s.headerEnd, Done: s.done, AtEnd: s.atEnd && !s.done}
		if s.hasID {
			id := s.id
			fp.ID = &id
		}
		if s.end >= 0 {
			end := s.end
			fp.End = &end
		}
		if s.timed {
			t := s.maxTime
			fp.MaxTime = &t
		}
		p.Files = append(p.Files, fp)
	}
	slices.SortStableFunc(p.Files, func(a, b filePosition) int { return strings.Compare(a.Path, b.Path) })
	return json.Marshal(p)
}

// unionPositions merges the positions of every subtask of a checkpoint, for
// a restore at another parallelism (runtime.Context.RestoredUnion): every
// file once, with its progress. withBad takes the bad-record counts (one
// subtask, subtask 0, carries their sum on). A file is known by its inode
// where the position has it, else by its path: one path may be in two
// entries, a replaced file still being read and the file now under it.
func unionPositions(inlines [][]byte, withBad bool) (position, error) {
	u := position{Version: positionVersion}
	seen := map[string]bool{}
	for i, raw := range inlines {
		p, err := decodePosition(raw)
		if err != nil {
			return u, err
		}
		if i == 0 {
			u.Listed, u.ByPath = p.Listed, p.ByPath
		} else if p.Listed != u.Listed {
			return u, fmt.Errorf("restoring positions: the subtasks disagree on whether the file list was fixed at start")
		} else if p.ByPath != u.ByPath {
			return u, fmt.Errorf("restoring positions: the subtasks disagree on how files are assigned to subtasks")
		}
		for _, f := range p.Files {
			k := "path " + f.Path
			if f.ID != nil && f.ID.Ino != 0 {
				k = fmt.Sprintf("inode %d:%d", f.ID.Dev, f.ID.Ino)
			}
			if seen[k] {
				return u, fmt.Errorf("restoring positions: file %s (%s) is in the positions of two subtasks", f.Path, k)
			}
			seen[k] = true
			u.Files = append(u.Files, f)
		}
		u.Seen = append(u.Seen, p.Seen...)
		if p.Bad != nil && withBad {
			if u.Bad == nil {
				u.Bad = &stream.BadRecordTally{}
			}
			u.Bad.Skipped += p.Bad.Skipped
			u.Bad.DeadLettered += p.Bad.DeadLettered
		}
	}
	slices.Sort(u.Seen)
	u.Seen = slices.Compact(u.Seen)
	return u, nil
}

// decodePosition parses and checks a restored position.
func decodePosition(b []byte) (position, error) {
	var p position
	if err := json.Unmarshal(b, &p); err != nil {
		return p, fmt.Errorf("restoring position %.200q: %w", b, err)
	}
	if len(p.Seen) == 0 {
		p.Seen = nil // "seen": [] and no "seen" say the same
	}
	switch p.Version {
	case positionVersion:
	case legacyPositionVersion:
		// Files without identities, assigned by path; their identities are
		// taken on restore.
		p.Version, p.ByPath = positionVersion, true
		for i := range p.Files {
			p.Files[i].ID, p.Files[i].AtEnd = nil, false
		}
	default:
		return p, fmt.Errorf("restoring position: format version %d; this build reads versions %d and %d", p.Version, legacyPositionVersion, positionVersion)
	}
	for _, f := range p.Files {
		if f.ID != nil {
			if err := f.ID.validate(); err != nil {
				return p, fmt.Errorf("restoring position: file %s: %w", f.Path, err)
			}
		}
		switch {
		case f.Offset < 0 || f.Line < 0:
			return p, fmt.Errorf("restoring position: file %s has offset %d, line %d", f.Path, f.Offset, f.Line)
		case p.Listed && f.End == nil:
			return p, fmt.Errorf("restoring position: file %s has no end although the file list was fixed at start", f.Path)
		case f.End != nil && f.Offset > *f.End:
			return p, fmt.Errorf("restoring position: file %s has offset %d beyond its end %d", f.Path, f.Offset, *f.End)
		}
	}
	return p, nil
}
