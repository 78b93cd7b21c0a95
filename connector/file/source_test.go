package file_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/connector/file"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/watermark"
)

func TestSourceConfigDefaultsAndValidation(t *testing.T) {
	s := newSource(t, file.SourceConfig{Path: "./in/*.jsonl"}, recDecoder(t))
	got := s.Config()
	if got.Format != file.FormatJSONLines || got.StopAt != file.StopNever || got.PollInterval != time.Second ||
		got.BatchSize != 1024 || got.MaxLineBytes != 1<<20 || got.MaxOpenFiles != 64 || got.Comma != ',' || got.Path != "in/*.jsonl" || got.OnReplace != file.ReplaceFail {
		t.Errorf("defaults: %+v", got)
	}
	if s.Descriptor().Capabilities.SourceGuarantee() != runtime.ExactlyOnce || s.Descriptor().Type != "file" {
		t.Errorf("Guarantee %v, Type %q; want exactly-once, file", s.Descriptor().Capabilities.SourceGuarantee(), s.Descriptor().Type)
	}
	if d := s.Describe(); !strings.Contains(d, "in/*.jsonl") || !strings.Contains(d, "following") {
		t.Errorf("Describe = %q", d)
	}
	_, err := file.NewSource(file.SourceConfig{Path: "[", Format: "xml", StopAt: "earliest", BatchSize: -1, Comma: '"', OnReplace: "ignore",
		Watermark: watermark.Strategy{MaxDelay: -1}}, recDecoder(t))
	if err == nil {
		t.Fatal("NewSource accepted an invalid configuration")
	}
	for _, want := range []string{`path "[" is not a valid glob`, `format "xml"`, `stop_at "earliest"`, "batch_size -1", `comma '"'`, `on_replace "ignore"`, "max_delay"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if _, err := file.NewSource[rec](file.SourceConfig{}, nil); err == nil || !strings.Contains(err.Error(), "path is required") || !strings.Contains(err.Error(), "decoder is required") {
		t.Errorf("empty config: %v", err)
	}
}

// Every line of every file is read once, in file order per file, with its
// location and its event time; stop_at latest then reports Exhausted.
func TestSourceReadsJSONLinesFiles(t *testing.T) {
	dir := t.TempDir()
	want := map[string][]int64{}
	for f := range 3 {
		var b strings.Builder
		for i := range 1000 + f {
			id := int64(f*10000 + i)
			b.WriteString(jsonLine(id, "k", int64(i), 1_767_225_600_000+int64(i)))
			want[fmt.Sprintf("f%d.jsonl", f)] = append(want[fmt.Sprintf("f%d.jsonl", f)], id)
		}
		writeFile(t, filepath.Join(dir, fmt.Sprintf("f%d.jsonl", f)), b.String())
	}
	writeFile(t, filepath.Join(dir, "other.csv"), "not,matched\n")
	src := newSource(t, file.SourceConfig{Path: filepath.Join(dir, "*.jsonl"), StopAt: file.StopAtLatest, BatchSize: 100}, recDecoder(t))
	st := openSource(t, src, 0, 1, nil)
	if res := st.drain(); res.Watermark < (1_767_225_600_000+999)*int64(time.Millisecond)-1 {
		t.Errorf("final watermark %d, want at least the last event time of the earliest-ending file", res.Watermark)
	}
	got := map[string][]int64{}
	for _, r := range st.out.recs {
		f, _, _ := strings.Cut(r.Value.Where, ":")
		got[f] = append(got[f], r.Value.ID)
		i := r.Value.ID % 10000
		if wantT := (1_767_225_600_000 + i) * int64(time.Millisecond); r.Time != wantT {
			t.Fatalf("%s: event time %d, want %d", r.Value.Where, r.Time, wantT)
		}
		if want := fmt.Sprintf(":%d@", i+1); !strings.Contains(r.Value.Where, want) {
			t.Fatalf("record %d located at %s, want line %d", r.Value.ID, r.Value.Where, i+1)
		}
	}
	for f, ids := range want {
		if !slices.Equal(got[f], ids) {
			t.Errorf("%s: read %d records, want %d in file order", f, len(got[f]), len(ids))
		}
	}
	if st.out.batches < 30 {
		t.Errorf("%d batches for 3003 records with batch size 100", st.out.batches)
	}
}

// Read returns one batch of at most BatchSize records and round-robins over
// the files, so all files progress together.
func TestSourceBatchesRoundRobin(t *testing.T) {
	dir := t.TempDir()
	for f := range 2 {
		var b strings.Builder
		for i := range 50 {
			b.WriteString(jsonLine(int64(f*100+i), "k", 0, int64(i)))
		}
		writeFile(t, filepath.Join(dir, fmt.Sprintf("f%d.jsonl", f)), b.String())
	}
	src := newSource(t, file.SourceConfig{Path: filepath.Join(dir, "*.jsonl"), StopAt: file.StopAtLatest, BatchSize: 10}, recDecoder(t))
	st := openSource(t, src, 0, 1, nil)
	var files []string
	for range 4 {
		n := len(st.out.recs)
		st.read()
		if got := len(st.out.recs) - n; got != 10 {
			t.Fatalf("a Read emitted %d records, want BatchSize 10", got)
		}
		f, _, _ := strings.Cut(st.out.recs[n].Value.Where, ":")
		files = append(files, f)
	}
	if !slices.Equal(files, []string{"f0.jsonl", "f1.jsonl", "f0.jsonl", "f1.jsonl"}) {
		t.Errorf("reads went to %v, want alternating files", files)
	}
}

// CSV: header, quoted fields with commas, quotes and line breaks, CRLF, a
// byte order mark and blank lines.
func TestSourceReadsCSV(t *testing.T) {
	dir := t.TempDir()
	content := "\xEF\xBB\xBFid,name,ts\r\n" +
		"1,plain,1000\r\n" +
		"\r\n" +
		`2,"with, comma",2000` + "\n" +
		`3,"say ""hi""",3000` + "\n" +
		"4,\"two\nlines\",4000\n" +
		`5,"",5000` + "\n" +
		"6,last,6000" // no line break: the end of the file ends it (stop_at latest)
	writeFile(t, filepath.Join(dir, "a.csv"), content)
	type row struct {
		Fields       []string
		Number, Off  int64
		Name, Header string
	}
	d, err := file.WithEventTime(func(l file.Line) (row, error) {
		name, _ := l.Field("name")
		return row{Fields: slices.Clone(l.Fields), Number: l.Number, Off: l.Offset, Name: name, Header: strings.Join(l.Header.Names, "|")}, nil
	}, "ts", file.TimeEpochMillis)
	if err != nil {
		t.Fatal(err)
	}
	src := newSource(t, file.SourceConfig{Path: filepath.Join(dir, "*.csv"), Format: file.FormatCSV, StopAt: file.StopAtLatest}, d)
	st := openSource(t, src, 0, 1, nil)
	st.drain()
	want := []struct {
		name   string
		number int64
		at     string // the text the record starts with
	}{{"plain", 2, "1,plain"}, {"with, comma", 4, "2,"}, {`say "hi"`, 5, "3,"}, {"two\nlines", 6, "4,"}, {"", 8, "5,"}, {"last", 9, "6,"}}
	if len(st.out.recs) != len(want) {
		t.Fatalf("read %d records, want %d: %+v", len(st.out.recs), len(want), st.values())
	}
	for i, r := range st.out.recs {
		w := want[i]
		if r.Value.Name != w.name || r.Value.Number != w.number || r.Value.Header != "id|name|ts" || len(r.Value.Fields) != 3 {
			t.Errorf("record %d: %+v, want name %q on line %d", i, r.Value, w.name, w.number)
		}
		if !strings.HasPrefix(content[r.Value.Off:], w.at) {
			t.Errorf("record %d: offset %d points at %q, want %q", i, r.Value.Off, content[r.Value.Off:min(len(content), int(r.Value.Off)+10)], w.at)
		}
		if r.Time != int64(i+1)*1000*int64(time.Millisecond) {
			t.Errorf("record %d: event time %d", i, r.Time)
		}
	}
}

// Files are split over subtasks by a hash of the path: every file is read
// by exactly one subtask, and the assignment does not change when more
// files appear.
func TestSourceSplitsFilesOverSubtasks(t *testing.T) {
	dir := t.TempDir()
	const files, p = 24, 3
	for f := range files {
		writeFile(t, filepath.Join(dir, fmt.Sprintf("f%02d.jsonl", f)), jsonLine(int64(f), "k", 0, 0))
	}
	owner := func(n int) map[int64]int {
		src := newSource(t, file.SourceConfig{Path: filepath.Join(dir, "*.jsonl"), StopAt: file.StopAtLatest}, recDecoder(t))
		who := map[int64]int{}
		for s := range p {
			st := openSource(t, src, s, p, nil)
			st.drain()
			for _, r := range st.out.recs {
				if prev, dup := who[r.Value.ID]; dup {
					t.Fatalf("file %d read by subtasks %d and %d", r.Value.ID, prev, s)
				}
				who[r.Value.ID] = s
			}
		}
		if len(who) != n {
			t.Fatalf("%d of %d files read", len(who), n)
		}
		return who
	}
	before := owner(files)
	perSubtask := make([]int, p)
	for _, s := range before {
		perSubtask[s]++
	}
	for s, n := range perSubtask {
		if n == 0 {
			t.Errorf("subtask %d got no file of %d: %v", s, files, perSubtask)
		}
	}
	for f := files; f < 2*files; f++ {
		writeFile(t, filepath.Join(dir, fmt.Sprintf("f%02d.jsonl", f)), jsonLine(int64(f), "k", 0, 0))
	}
	after := owner(2 * files)
	for id, s := range before {
		if after[id] != s {
			t.Errorf("file %d moved from subtask %d to %d when files were added", id, s, after[id])
		}
	}
}

// Files and directories whose names a wildcard matched and that begin
// with '.' or '_' are skipped; directories matching the glob too.
func TestSourceSkipsHiddenFiles(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "d1", "a.jsonl"), jsonLine(1, "k", 0, 0))
	writeFile(t, filepath.Join(dir, "d1", ".b.jsonl"), jsonLine(2, "k", 0, 0))
	writeFile(t, filepath.Join(dir, "d1", "_c.jsonl"), jsonLine(3, "k", 0, 0))
	writeFile(t, filepath.Join(dir, "_staging", "d.jsonl"), jsonLine(4, "k", 0, 0))
	writeFile(t, filepath.Join(dir, "_lit", "e.jsonl"), jsonLine(5, "k", 0, 0))
	if err := os.MkdirAll(filepath.Join(dir, "d1", "dir.jsonl"), 0o755); err != nil {
		t.Fatal(err)
	}
	read := func(pattern string) []int64 {
		st := openSource(t, newSource(t, file.SourceConfig{Path: pattern, StopAt: file.StopAtLatest}, recDecoder(t)), 0, 1, nil)
		st.drain()
		var ids []int64
		for _, v := range st.values() {
			ids = append(ids, v.ID)
		}
		slices.Sort(ids)
		return ids
	}
	if got := read(filepath.Join(dir, "*", "*.jsonl")); !slices.Equal(got, []int64{1}) {
		t.Errorf("read %v, want only [1]", got)
	}
	// A literal '_' component is the user's choice.
	if got := read(filepath.Join(dir, "_lit", "*.jsonl")); !slices.Equal(got, []int64{5}) {
		t.Errorf("read %v, want [5]", got)
	}
}

// Following a file: a last line without its line break is not consumed
// until it is complete; the position stays before it, so a restore reads
// it whole too.
func TestSourceGrowingFileWithPartialLastLine(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "grow.jsonl")
	first := jsonLine(1, "a", 1, 1000)
	writeFile(t, path, first+`{"id":2,"key":"b",`)
	src := newSource(t, file.SourceConfig{Path: filepath.Join(dir, "*.jsonl"), PollInterval: time.Millisecond}, recDecoder(t))
	st := openSource(t, src, 0, 1, nil)
	st.readUntilQuiet()
	if ids := st.values(); len(ids) != 1 || ids[0].ID != 1 {
		t.Fatalf("read %+v, want only record 1 (the second line is partial)", ids)
	}
	pos := st.position()
	var p struct {
		Files []struct {
			Path   string
			Offset int64
			Line   int64
		}
	}
	if err := json.Unmarshal(pos, &p); err != nil || len(p.Files) != 1 || p.Files[0].Offset != int64(len(first)) || p.Files[0].Line != 1 {
		t.Fatalf("position %s, want offset %d line 1 (%v)", pos, len(first), err)
	}
	if !json.Valid(pos) {
		t.Fatalf("position %q is not JSON", pos)
	}

	// The rest of the line arrives.
	appendFile(t, path, `"value":2,"ts":2000}`)
	time.Sleep(2 * time.Millisecond)
	st.readUntilQuiet()
	if n := len(st.out.recs); n != 1 {
		t.Fatalf("a line still without its line break was read: %+v", st.values())
	}
	appendFile(t, path, "\n"+jsonLine(3, "c", 3, 3000))
	time.Sleep(2 * time.Millisecond)
	st.readUntilQuiet()
	if got := st.values(); len(got) != 3 || got[1].ID != 2 || got[2].ID != 3 || got[1].Where != "grow.jsonl:2@"+fmt.Sprint(len(first)) {
		t.Fatalf("after the line completed: %+v", got)
	}

	// A subtask restored from the position taken before the line was
	// complete reads it, whole, and the next one.
	again := openSource(t, src, 0, 1, pos)
	again.readUntilQuiet()
	if got := again.values(); len(got) != 2 || got[0].ID != 2 || got[1].ID != 3 {
		t.Fatalf("restored subtask read %+v, want records 2 and 3", got)
	}
}

// stop_at latest reads each file to its size at the first start and
// treats a last line without a line break as a line; appended data and new
// files are ignored, also by a subtask restored from its position.
func TestSourceStopAtLatestReadsToSizeAtStart(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.jsonl"), filepath.Join(dir, "b.jsonl")
	writeFile(t, a, jsonLine(1, "a", 0, 1)+jsonLine(2, "a", 0, 2)+jsonLine(3, "a", 0, 3))
	writeFile(t, b, jsonLine(10, "b", 0, 1)+strings.TrimSuffix(jsonLine(11, "b", 0, 2), "\n"))
	src := newSource(t, file.SourceConfig{Path: filepath.Join(dir, "*.jsonl"), StopAt: file.StopAtLatest, BatchSize: 1}, recDecoder(t))
	st := openSource(t, src, 0, 1, nil)
	st.read()
	st.read()
	pos := st.position() // after records 1 and 10
	appendFile(t, a, jsonLine(4, "a", 0, 4))
	appendFile(t, b, "\n"+jsonLine(12, "b", 0, 3))
	writeFile(t, filepath.Join(dir, "c.jsonl"), jsonLine(20, "c", 0, 1))
	st.drain()
	ids := func(st *srcTask[rec]) []int64 {
		var out []int64
		for _, v := range st.values() {
			out = append(out, v.ID)
		}
		slices.Sort(out)
		return out
	}
	if got := ids(st); !slices.Equal(got, []int64{1, 2, 3, 10, 11}) {
		t.Fatalf("read %v, want the records present at start [1 2 3 10 11]", got)
	}
	// Restored: the same end, not the grown files, not the new file.
	again := openSource(t, src, 0, 1, pos)
	res := again.drain()
	if got := ids(again); !slices.Equal(got, []int64{2, 3, 11}) {
		t.Fatalf("restored subtask read %v, want the rest of what was present at the first start [2 3 11]", got)
	}
	if !res.Exhausted {
		t.Fatal("not exhausted")
	}
	// Once exhausted, it stays so and emits nothing.
	n := len(again.out.recs)
	if res := again.read(); !res.Exhausted || len(again.out.recs) != n {
		t.Fatalf("read after exhaustion: %+v, %d more records", res, len(again.out.recs)-n)
	}
	// A subtask with no file at all is exhausted at once.
	empty := openSource(t, newSource(t, file.SourceConfig{Path: filepath.Join(dir, "*.none"), StopAt: file.StopAtLatest}, recDecoder(t)), 0, 1, nil)
	if res := empty.read(); !res.Exhausted {
		t.Fatalf("a subtask without files: %+v, want Exhausted", res)
	}
}

// A restored subtask resumes every file exactly after the last record
// emitted before the position was taken, for JSON Lines and for CSV (whose
// header it reads again), in the middle of a batch of files.
func TestSourceRestoreResumesExactly(t *testing.T) {
	for _, format := range []file.Format{file.FormatJSONLines, file.FormatCSV} {
		t.Run(string(format), func(t *testing.T) {
			dir := t.TempDir()
			var all []int64
			for f := range 4 {
				var b strings.Builder
				if format == file.FormatCSV {
					b.WriteString("id,key,value,ts\n")
				}
				for i := range 257 {
					id := int64(f*1000 + i)
					all = append(all, id)
					if format == file.FormatCSV {
						b.WriteString(csvLine(id, "k", int64(i), int64(i)))
					} else {
						b.WriteString(jsonLine(id, "k", int64(i), int64(i)))
					}
				}
				writeFile(t, filepath.Join(dir, fmt.Sprintf("f%d.in", f)), b.String())
			}
			src := newSource(t, file.SourceConfig{Path: filepath.Join(dir, "*.in"), Format: format, StopAt: file.StopAtLatest, BatchSize: 37}, recDecoder(t))
			for _, cut := range []int{1, 5, 13, 27} {
				st := openSource(t, src, 0, 1, nil)
				for range cut {
					st.read()
				}
				pos := st.position()
				before := st.values()
				again := openSource(t, src, 0, 1, pos)
				again.drain()
				var got []int64
				seen := map[string]bool{}
				for _, v := range append(before, again.values()...) {
					got = append(got, v.ID)
					if seen[v.Where] {
						t.Fatalf("cut after %d reads: %s read twice", cut, v.Where)
					}
					seen[v.Where] = true
				}
				slices.Sort(got)
				if !slices.Equal(got, all) {
					t.Fatalf("cut after %d reads: %d records before + %d after the restore, want each of %d once", cut, len(before), len(again.out.recs), len(all))
				}
			}
		})
	}
}

// Following: files that appear later are read; a file deleted after it was
// read is forgotten, and a new file at its path is read from the start.
func TestSourceFollowDiscoversNewFiles(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.jsonl"), jsonLine(1, "a", 0, 1))
	src := newSource(t, file.SourceConfig{Path: filepath.Join(dir, "*.jsonl"), PollInterval: time.Millisecond}, recDecoder(t))
	st := openSource(t, src, 0, 1, nil)
	st.readUntilQuiet()
	res := st.read()
	if res.Exhausted || res.Wait <= 0 || res.Wait > 5*time.Millisecond {
		t.Fatalf("following with nothing to read: %+v, want a wait of about the poll interval", res)
	}
	writeFile(t, filepath.Join(dir, "b.jsonl"), jsonLine(2, "b", 0, 1))
	time.Sleep(2 * time.Millisecond)
	st.readUntilQuiet()
	if err := os.Remove(filepath.Join(dir, "a.jsonl")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Millisecond)
	st.readUntilQuiet()
	if strings.Contains(string(st.position()), "a.jsonl") {
		t.Errorf("position %s still lists the deleted file", st.position())
	}
	writeFile(t, filepath.Join(dir, "a.jsonl"), jsonLine(3, "a", 0, 1))
	time.Sleep(2 * time.Millisecond)
	st.readUntilQuiet()
	var ids []int64
	for _, v := range st.values() {
		ids = append(ids, v.ID)
	}
	if !slices.Equal(ids, []int64{1, 2, 3}) {
		t.Fatalf("read %v, want [1 2 3]", ids)
	}
}

// More files than MaxOpenFiles are all read, each to its end.
func TestSourceMaxOpenFiles(t *testing.T) {
	dir := t.TempDir()
	for f := range 10 {
		var b strings.Builder
		for i := range 30 {
			b.WriteString(jsonLine(int64(f*100+i), "k", 0, int64(i)))
		}
		writeFile(t, filepath.Join(dir, fmt.Sprintf("f%d.jsonl", f)), b.String())
	}
	st := openSource(t, newSource(t, file.SourceConfig{Path: filepath.Join(dir, "*.jsonl"), StopAt: file.StopAtLatest, BatchSize: 7, MaxOpenFiles: 2}, recDecoder(t)), 0, 1, nil)
	st.drain()
	if n := len(st.out.recs); n != 300 {
		t.Fatalf("read %d records, want 300", n)
	}
}

// Decode errors name the file, the line and the byte offset; CSV rows with
// the wrong number of fields name file:line.
func TestSourceErrorsNameFileLineAndOffset(t *testing.T) {
	ok := jsonLine(1, "k", 0, 1)
	for _, tc := range []struct {
		name, content string
		format        file.Format
		max           int
		want          []string
	}{
		{"bad json", ok + `{"id": nope}` + "\n", file.FormatJSONLines, 0, []string{"in.x:2 (byte offset " + fmt.Sprint(len(ok)) + ")", "invalid character"}},
		{"missing event time", ok + `{"id":2}` + "\n", file.FormatJSONLines, 0, []string{"in.x:2 (byte offset", `event-time field "ts" is missing`}},
		{"bad event time", ok + `{"id":2,"ts":"soon"}` + "\n", file.FormatJSONLines, 0, []string{"in.x:2", `"soon" is not epoch milliseconds`}},
		{"csv field count", "id,key,value,ts\n1,k,0,1\n2,k,0\n", file.FormatCSV, 0, []string{"in.x:3 (byte offset 24)", "3 fields, the header has 4"}},
		{"csv bare quote", "id,key,value,ts\n1,k\"x,0,1\n", file.FormatCSV, 0, []string{"in.x:2 (byte offset 16)", `bare "`}},
		{"csv duplicate header", "id,id\n", file.FormatCSV, 0, []string{"in.x:1", `column "id" twice`}},
		{"csv unclosed quote at end", "id,key,value,ts\n1,\"k", file.FormatCSV, 0, []string{"in.x:2", "not closed"}},
		{"line too long", ok + strings.Repeat("x", 300), file.FormatJSONLines, 256, []string{"in.x:2 (byte offset", "longer than max_line_bytes 256"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "in.x"), tc.content)
			src := newSource(t, file.SourceConfig{Path: filepath.Join(dir, "*.x"), Format: tc.format, MaxLineBytes: tc.max, StopAt: file.StopAtLatest}, recDecoder(t))
			st := openSource(t, src, 0, 1, nil)
			var err error
			for range 100 {
				var res runtime.ReadResult
				if res, err = st.src.Read(); err != nil || res.Exhausted {
					break
				}
			}
			if err == nil {
				t.Fatalf("no error for %q", tc.content)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if !strings.Contains(err.Error(), filepath.Join(dir, "in.x")) {
				t.Errorf("error %q does not name the file's path", err)
			}
		})
	}
}

// A file that shrinks below what was read is an error, not a silent
// re-read.
func TestSourceTruncatedFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "t.jsonl")
	writeFile(t, path, jsonLine(1, "k", 0, 1)+jsonLine(2, "k", 0, 2))
	st := openSource(t, newSource(t, file.SourceConfig{Path: filepath.Join(dir, "*.jsonl"), PollInterval: time.Millisecond}, recDecoder(t)), 0, 1, nil)
	st.readUntilQuiet()
	writeFile(t, path, jsonLine(3, "k", 0, 3))
	time.Sleep(2 * time.Millisecond)
	var err error
	for range 10 {
		if _, err = st.src.Read(); err != nil {
			break
		}
	}
	if err == nil || !strings.Contains(err.Error(), "truncated or rewritten") || !strings.Contains(err.Error(), path) {
		t.Fatalf("error %v, want one naming %s as truncated", err, path)
	}
}

// A file listed at start with stop_at latest that is deleted before it was
// read to its end is an error naming it.
func TestSourceStopAtLatestFileDeletedBeforeRead(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "gone.jsonl")
	writeFile(t, path, jsonLine(1, "k", 0, 1))
	st := openSource(t, newSource(t, file.SourceConfig{Path: filepath.Join(dir, "*.jsonl"), StopAt: file.StopAtLatest}, recDecoder(t)), 0, 1, nil)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	_, err := st.src.Read()
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "must stay until it is read") {
		t.Fatalf("error %v, want one naming the deleted file", err)
	}
}

// Every file is a watermark split: the subtask's watermark is the least
// over the files; with stop_at latest a file read to its end no longer
// holds it back; the newest event time per file is in the position, so a
// restored subtask's watermark does not start over.
func TestSourceWatermarksPerFile(t *testing.T) {
	dir := t.TempDir()
	ms := int64(time.Millisecond)
	writeFile(t, filepath.Join(dir, "a.jsonl"), jsonLine(1, "a", 0, 100)+jsonLine(2, "a", 0, 200))
	var b strings.Builder
	for i := range 10 {
		b.WriteString(jsonLine(int64(10+i), "b", 0, int64(1000+i)))
	}
	writeFile(t, filepath.Join(dir, "b.jsonl"), b.String())
	src := newSource(t, file.SourceConfig{Path: filepath.Join(dir, "*.jsonl"), StopAt: file.StopAtLatest, BatchSize: 2}, recDecoder(t))
	st := openSource(t, src, 0, 1, nil)
	res := st.read() // a: 100, 200
	if res.Watermark != runtime.MinWatermark {
		t.Fatalf("watermark %d after reading only file a, want the minimum (file b has produced nothing)", res.Watermark)
	}
	res = st.read() // b: 1000, 1001
	if want := 200*ms - 1; res.Watermark != want {
		t.Fatalf("watermark %d, want file a's %d", res.Watermark, want)
	}
	pos := st.position()
	res = st.read() // a: at its end, finished; the same Read goes on to b: 1002, 1003
	if want := 1003*ms - 1; res.Watermark != want {
		t.Fatalf("watermark %d after file a finished, want file b's %d", res.Watermark, want)
	}
	again := openSource(t, src, 0, 1, pos)
	if res := again.read(); res.Watermark < 200*ms-1 {
		t.Fatalf("restored subtask's watermark %d, want at least file a's %d", res.Watermark, 200*ms-1)
	}
}

// Following with idle_timeout: a file with nothing new stops holding the
// watermark back, and a subtask whose files are all quiet is idle.
func TestSourceFollowIdleTimeout(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.jsonl"), jsonLine(1, "a", 0, 100))
	src := newSource(t, file.SourceConfig{Path: filepath.Join(dir, "*.jsonl"), PollInterval: time.Hour,
		Watermark: watermark.Strategy{IdleTimeout: 20 * time.Millisecond}}, recDecoder(t))
	st := openSource(t, src, 0, 1, nil)
	res := st.read()
	if res.Idle {
		t.Fatal("idle right after a record")
	}
	res = st.read()
	if res.Wait <= 0 || res.Wait > 20*time.Millisecond {
		t.Fatalf("wait %v, want at most the idle timeout", res.Wait)
	}
	time.Sleep(25 * time.Millisecond)
	if res := st.read(); !res.Idle {
		t.Fatalf("%+v: not idle after the idle timeout", res)
	}
}

func TestParseEventTime(t *testing.T) {
	ms := int64(time.Millisecond)
	for _, tc := range []struct {
		in   string
		f    file.TimeFormat
		want int64
		err  string
	}{
		{"2026-01-01T00:00:00Z", file.TimeRFC3339, 1_767_225_600_000 * ms, ""},
		{"2026-01-01T01:00:00.5+01:00", file.TimeRFC3339, 1_767_225_600_000*ms + 500*ms, ""},
		{"1767225600000", file.TimeEpochMillis, 1_767_225_600_000 * ms, ""},
		{"1767225600000.25", file.TimeEpochMillis, 1_767_225_600_000*ms + 250_000, ""},
		{"-1.5", file.TimeEpochMillis, -1_500_000, ""},
		{"0", file.TimeEpochMillis, 0, ""},
		{"1e3", file.TimeEpochMillis, 0, "not epoch milliseconds"},
		{"1.1234567", file.TimeEpochMillis, 0, "fractional digits"},
		{"99999999999999999", file.TimeEpochMillis, 0, "outside the years"},
		{"3000-01-01T00:00:00Z", file.TimeRFC3339, 0, "outside the years"},
		{"yesterday", file.TimeRFC3339, 0, "not RFC 3339"},
		{"1", "unix", 0, `time format "unix"`},
	} {
		got, err := file.ParseEventTime(tc.in, tc.f)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseEventTime(%q, %s) = %d, %v; want error %q", tc.in, tc.f, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseEventTime(%q, %s) = %d, %v; want %d", tc.in, tc.f, got, err, tc.want)
		}
	}
}

func TestLineFieldJSON(t *testing.T) {
	l := file.Line{JSON: []byte(` { "a" : "x\"y" , "n": -1.5e3, "o": {"a": [1, "}"]}, "t":true, "z": null, "e\u0041": "esc", "a2":"plain", "a": "last" } `)}
	for _, tc := range []struct {
		name, want string
		ok         bool
	}{
		{"a", "last", true}, {"n", "-1.5e3", true}, {"o", `{"a": [1, "}"]}`, true}, {"t", "true", true},
		{"z", "", false}, {"missing", "", false}, {"eA", "esc", true}, {"a2", "plain", true},
	} {
		got, ok := l.Field(tc.name)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Field(%q) = %q, %v; want %q, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
	if _, ok := (file.Line{JSON: []byte(`[1,2]`)}).Field("a"); ok {
		t.Error("Field of a non-object found something")
	}
	if got, _ := (file.Line{JSON: []byte(`{"s":"tab\tand\u00e9"}`)}).Field("s"); got != "tab\tandé" {
		t.Errorf("escaped string = %q", got)
	}
}

func TestDecodeJSON(t *testing.T) {
	d, err := file.DecodeJSON[rec]("ts", file.TimeRFC3339)
	if err != nil {
		t.Fatal(err)
	}
	v, ts, err := d(file.Line{JSON: []byte(`{"id":7,"key":"k","value":3,"ts":"2026-01-01T00:00:00.001Z"}`)})
	if err != nil || v.ID != 7 || v.Key != "k" || v.Value != 3 || ts != 1_767_225_600_001*int64(time.Millisecond) {
		t.Fatalf("DecodeJSON = %+v, %d, %v", v, ts, err)
	}
	none, err := file.DecodeJSON[rec]("", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, ts, err := none(file.Line{JSON: []byte(`{"id":1}`)}); err != nil || ts != 0 {
		t.Fatalf("without a time field: %d, %v", ts, err)
	}
	if _, err := file.DecodeJSON[rec]("ts", "unix"); err == nil {
		t.Fatal("DecodeJSON accepted an unknown time format")
	}
}

// The position is per file, and a subtask ignores entries of files it does
// not own: restoring every subtask of a new parallelism from the union of
// the old positions (what a runtime with union redistribution would do)
// reads each remaining record exactly once.
func TestSourcePositionSupportsUnionRescale(t *testing.T) {
	dir := t.TempDir()
	var all []int64
	for f := range 12 {
		var b strings.Builder
		for i := range 40 {
			id := int64(f*100 + i)
			all = append(all, id)
			b.WriteString(jsonLine(id, "k", 0, int64(i)))
		}
		writeFile(t, filepath.Join(dir, fmt.Sprintf("f%02d.jsonl", f)), b.String())
	}
	src := newSource(t, file.SourceConfig{Path: filepath.Join(dir, "*.jsonl"), StopAt: file.StopAtLatest, BatchSize: 15}, recDecoder(t))
	// Two old subtasks read a part each.
	var got []int64
	var union [][]byte
	for s := range 2 {
		st := openSource(t, src, s, 2, nil)
		for range 7 {
			st.read()
		}
		for _, v := range st.values() {
			got = append(got, v.ID)
		}
		union = append(union, st.position())
	}
	// Three new subtasks each restored from the union, as the runtime
	// restores a source that declares RescalableInline.
	for s := range 3 {
		out := &collector[rec]{}
		sub := runtime.EraseSource(src.NewSubtask())
		ctx := &runtime.Context{Task: checkpoint.TaskID{Operator: "files", Subtask: s}, Parallelism: 3, MaxParallelism: 128, Output: out, RestoredUnion: union}
		if err := sub.Open(ctx); err != nil {
			t.Fatal(err)
		}
		st := &srcTask[rec]{t: t, src: sub, out: out}
		st.drain()
		_ = sub.Close()
		for _, v := range st.values() {
			got = append(got, v.ID)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, all) {
		t.Fatalf("read %d records over the rescale, want each of %d once", len(got), len(all))
	}
}

// A position from another format version is refused with an error naming
// the source.
func TestSourceRefusesUnknownPosition(t *testing.T) {
	src := newSource(t, file.SourceConfig{Path: filepath.Join(t.TempDir(), "*.jsonl")}, recDecoder(t))
	for _, inline := range []string{`{"version":3,"files":[]}`, `not json`, `{"version":1,"listed":true,"files":[{"path":"x","offset":1}]}`} {
		st := runtime.EraseSource(src.NewSubtask())
		err := st.Open(&runtime.Context{Parallelism: 1, MaxParallelism: 128, Output: &collector[rec]{}, Restored: &checkpoint.SubtaskState{Inline: []byte(inline)}})
		if err == nil || !strings.Contains(err.Error(), "file source") || !strings.Contains(err.Error(), "position") {
			t.Errorf("restoring %s: %v", inline, err)
		}
	}
}
