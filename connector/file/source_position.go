package file

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/ingest-engine/ingest/stream"
)

// positionVersion is the format version of a file source subtask's
// position. A reader refuses versions it does not know.
const positionVersion = 1

// position is a file source subtask's replay position, stored as inline
// JSON in every checkpoint.
type position struct {
	Version int `json:"version"`
	// Listed is set with stop_at latest: the subtask's files are exactly
	// Files, fixed (with their ends) at the job's first start.
	Listed bool           `json:"listed,omitempty"`
	Files  []filePosition `json:"files"`
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
}

// encodePosition serialises the splits' progress, sorted by path, and the
// bad-record tally.
func encodePosition(listed bool, splits []*split, bad stream.BadRecordTally) ([]byte, error) {
	p := position{Version: positionVersion, Listed: listed, Files: make([]filePosition, 0, len(splits))}
	if bad != (stream.BadRecordTally{}) {
		p.Bad = &bad
	}
	for _, s := range splits {
		fp := filePosition{Path: s.path, Offset: s.off, Line: s.line, HeaderEnd: s.headerEnd, Done: s.done}
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
	slices.SortFunc(p.Files, func(a, b filePosition) int { return strings.Compare(a.Path, b.Path) })
	return json.Marshal(p)
}

// unionPositions merges the positions of every subtask of a checkpoint, for
// a restore at another parallelism (runtime.Context.RestoredUnion): every
// file once, with its progress. withBad takes the bad-record counts (one
// subtask, subtask 0, carries their sum on).
func unionPositions(inlines [][]byte, withBad bool) (position, error) {
	u := position{Version: positionVersion}
	seen := map[string]bool{}
	for i, raw := range inlines {
		p, err := decodePosition(raw)
		if err != nil {
			return u, err
		}
		if i == 0 {
			u.Listed = p.Listed
		} else if p.Listed != u.Listed {
			return u, fmt.Errorf("restoring positions: the subtasks disagree on whether the file list was fixed at start")
		}
		for _, f := range p.Files {
			if seen[f.Path] {
				return u, fmt.Errorf("restoring positions: file %s is in the positions of two subtasks", f.Path)
			}
			seen[f.Path] = true
			u.Files = append(u.Files, f)
		}
		if p.Bad != nil && withBad {
			if u.Bad == nil {
				u.Bad = &stream.BadRecordTally{}
			}
			u.Bad.Skipped += p.Bad.Skipped
			u.Bad.DeadLettered += p.Bad.DeadLettered
		}
	}
	return u, nil
}

// decodePosition parses and checks a restored position.
func decodePosition(b []byte) (position, error) {
	var p position
	if err := json.Unmarshal(b, &p); err != nil {
		return p, fmt.Errorf("restoring position %.200q: %w", b, err)
	}
	if p.Version != positionVersion {
		return p, fmt.Errorf("restoring position: format version %d; this build reads version %d", p.Version, positionVersion)
	}
	for _, f := range p.Files {
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
