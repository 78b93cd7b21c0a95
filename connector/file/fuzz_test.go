package file

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// FuzzCSVRecord holds the CSV record parser (csvRecord.parse) to what the
// reader relies on, on arbitrary bytes and separators. The seed corpus,
// testdata/fuzz/FuzzCSVRecord, holds the example's trades.csv and records
// with quotes, separators and line breaks in quoted fields.
//
//   - Nothing panics; with final, the end of data ends a record, so parse
//     never answers errIncomplete.
//   - Chunking does not matter. The reader parses what it has buffered
//     without final and, on errIncomplete, reads more and parses the record
//     again from its start. A parse without final that returns anything but
//     errIncomplete decided on bytes it had, so it returns what parsing
//     with final returns on any longer data: reading data in two chunks,
//     the first cut where the fuzzer says, gives the same records, and the
//     same error, as reading it whole.
//   - A record spans n > 0 bytes holding exactly lines line breaks, and its
//     fields, written back as RFC 4180 (every field quoted), parse to the
//     same fields.
func FuzzCSVRecord(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte, cut uint16, comma byte) {
		if comma == 0 {
			comma = ',' // SourceConfig's default
		}
		if comma >= 0x80 || comma == '"' || comma == '\n' || comma == '\r' {
			return // refused by SourceConfig
		}
		whole, wholeErr := csvRecords(t, data, len(data), comma)
		chunked, chunkedErr := csvRecords(t, data, int(cut)%(len(data)+1), comma)
		if !reflect.DeepEqual(whole, chunked) || wholeErr != chunkedErr {
			t.Fatalf("%q with comma %q: read whole: %+v, %s; in two chunks cut at %d: %+v, %s",
				data, comma, whole, wholeErr, int(cut)%(len(data)+1), chunked, chunkedErr)
		}
		var r csvRecord
		for _, rec := range whole {
			enc := csvEncode(rec.fields, comma)
			n, lines, err := r.parse(enc, comma, true)
			if err != nil || n != len(enc) || lines != bytes.Count(enc, []byte{'\n'}) || !slices.Equal(r.strings(), rec.fields) {
				t.Fatalf("fields %q written as %q parse to %q (%d bytes, %d lines, %v)", rec.fields, enc, r.strings(), n, lines, err)
			}
		}
	})
}

// csvRec is one parsed record.
type csvRec struct {
	fields   []string
	n, lines int
}

// csvRecords parses the records of data as the reader does when the first
// avail bytes are buffered at first and the rest arrives after parse asks
// for more. It returns the records and the error that stopped it, with
// where it was found, as text: "" at the end of data.
func csvRecords(t *testing.T, data []byte, avail int, comma byte) ([]csvRec, string) {
	var (
		r   csvRecord
		out []csvRec
		pos int
	)
	for pos < len(data) {
		if avail <= pos {
			avail = len(data) // the reader reads more
			continue
		}
		buf, final := data[pos:avail], avail == len(data)
		n, lines, err := r.parse(buf, comma, final)
		if errors.Is(err, errIncomplete) {
			if final {
				t.Fatalf("%q: parse with final says the record at byte %d is incomplete", data, pos)
			}
			avail = len(data)
			continue
		}
		if err != nil {
			return out, fmt.Sprintf("record at byte %d: error at byte %d: %v", pos, n, err)
		}
		if n <= 0 || n > len(buf) {
			t.Fatalf("%q: the record at byte %d spans %d of %d bytes", data, pos, n, len(buf))
		}
		if want := bytes.Count(buf[:n], []byte{'\n'}); lines != want {
			t.Fatalf("%q: the record at byte %d spans %d line breaks, parse counts %d", data, pos, want, lines)
		}
		out = append(out, csvRec{fields: slices.Clone(r.strings()), n: n, lines: lines})
		pos += n
	}
	return out, ""
}

// csvEncode writes fields as one RFC 4180 record, every field quoted.
func csvEncode(fields []string, comma byte) []byte {
	var b []byte
	for i, f := range fields {
		if i > 0 {
			b = append(b, comma)
		}
		b = append(b, '"')
		b = append(b, strings.ReplaceAll(f, `"`, `""`)...)
		b = append(b, '"')
	}
	return append(b, '\n')
}

// FuzzDecodePosition feeds decodePosition, which reads a file source
// subtask's replay position back from a checkpoint, arbitrary bytes. The
// seed corpus, testdata/fuzz/FuzzDecodePosition, holds positions of real
// runs (a CSV source with stop_at latest, JSON Lines sources following
// their files), in format version 1; the seeds below add version 2 ones,
// with identities. It never panics; garbage and positions that break the
// format's rules are errors; an accepted position obeys the rules the
// reader relies on, and encodes (as encodePosition does, with JSON) to
// bytes that decode to the same position.
func FuzzDecodePosition(f *testing.F) {
	end, maxTime := int64(2521), int64(1767225602000000000)
	for _, p := range []position{
		{Version: positionVersion, Files: []filePosition{}},
		{Version: positionVersion, Files: []filePosition{{Path: "/in/a.jsonl", Offset: 680, Line: 5, MaxTime: &maxTime}, {Path: "/in/b.jsonl"}}},
		{Version: positionVersion, Listed: true, Files: []filePosition{{Path: "/in/t.csv", Offset: 26, Line: 1, End: &end, HeaderEnd: 26}, {Path: "/in/u.csv", Offset: 2521, Line: 49, End: &end, HeaderEnd: 20, Done: true}}},
		{Version: positionVersion, ByPath: true, Seen: []uint64{7, 12}, Files: []filePosition{{Path: "/in/a.jsonl", Offset: 680, Line: 5, AtEnd: true, ID: &fileID{Dev: 2049, Ino: 9, Size: 680, HeadLen: 680, HeadCRC: 0xdeadbeef}}}},
		{Version: legacyPositionVersion, Files: []filePosition{{Path: "/in/a.jsonl", Offset: 680, Line: 5}}},
	} {
		b, err := json.Marshal(p) // as encodePosition writes it
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := decodePosition(data)
		if err != nil {
			return
		}
		if p.Version != positionVersion {
			t.Fatalf("accepted format version %d", p.Version)
		}
		for _, fp := range p.Files {
			if fp.Offset < 0 || fp.Line < 0 || (p.Listed && fp.End == nil) || (fp.End != nil && fp.Offset > *fp.End) {
				t.Fatalf("accepted an invalid file position %+v (listed %v)", fp, p.Listed)
			}
		}
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatalf("a decoded position does not encode: %v", err)
		}
		p2, err := decodePosition(b)
		if err != nil {
			t.Fatalf("position %s, encoded from %q, does not decode: %v", b, data, err)
		}
		if !reflect.DeepEqual(p, p2) {
			t.Fatalf("position %q decodes to %+v, which encodes to %s and decodes to %+v", data, p, b, p2)
		}
	})
}
