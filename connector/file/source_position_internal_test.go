package file

import (
	"strings"
	"testing"

	"github.com/ingest-engine/ingest/stream"
)

// unionPositions merges every subtask's position for a restore at another
// parallelism: every file once with its progress, the bad-record counts once
// (for subtask 0), and refuses positions that cannot come from one
// checkpoint.
func TestUnionPositions(t *testing.T) {
	enc := func(listed bool, bad stream.BadRecordTally, files ...*split) []byte {
		t.Helper()
		b, err := encodePosition(listed, false, files, nil, bad)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	a := enc(false, stream.BadRecordTally{Skipped: 1, DeadLettered: 2}, &split{path: "a", off: 10, line: 1, end: -1}, &split{path: "c", off: 30, line: 3, end: -1})
	b := enc(false, stream.BadRecordTally{Skipped: 3}, &split{path: "b", off: 20, line: 2, end: -1})

	u, err := unionPositions([][]byte{a, b}, true)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range u.Files {
		got = append(got, f.Path)
		if f.Offset != 10*int64(f.Path[0]-'a'+1) {
			t.Errorf("file %s restored at offset %d", f.Path, f.Offset)
		}
	}
	if strings.Join(got, ",") != "a,c,b" {
		t.Errorf("files %v, want a, c, b", got)
	}
	if u.Bad == nil || *u.Bad != (stream.BadRecordTally{Skipped: 4, DeadLettered: 2}) {
		t.Errorf("bad-record counts %+v, want their sum once", u.Bad)
	}
	if u, err := unionPositions([][]byte{a, b}, false); err != nil || u.Bad != nil {
		t.Errorf("without the counts: %+v, %v", u.Bad, err)
	}
	if _, err := unionPositions([][]byte{a, a}, true); err == nil || !strings.Contains(err.Error(), "two subtasks") {
		t.Errorf("a file in two positions: %v", err)
	}
	end := int64(30)
	listed := enc(true, stream.BadRecordTally{}, &split{path: "d", end: end})
	if _, err := unionPositions([][]byte{a, listed}, true); err == nil || !strings.Contains(err.Error(), "disagree") {
		t.Errorf("listed and not listed: %v", err)
	}
}
