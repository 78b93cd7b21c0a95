package file_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/connector/file"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/stream"
)

// This file holds the hostile cases of the file source: what a user who
// replaces, rotates, truncates or damages input files can do to it. Each test
// names the sentence of checkpointing.txt it defends and the item of issue
// #12 it comes from.

// jsonRecords returns JSON lines of the records with ids from..to-1 (event
// time = id ms). Tests use ids of one width (1000..9999), so that every line
// of every file has the same length and an old byte offset lands on a line
// boundary of a replacement: the silent case.
func jsonRecords(from, to int64) string {
	var b strings.Builder
	for id := from; id < to; id++ {
		b.WriteString(jsonLine(id, "k", id, id))
	}
	return b.String()
}

// replaceFile writes content to a hidden file beside path and renames it
// over path, as `mv new path` does: path then names another file.
func replaceFile(t *testing.T, path, content string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), ".replace.tmp")
	writeFile(t, tmp, content)
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// rename moves from to to.
func rename(t *testing.T, from, to string) {
	t.Helper()
	if err := os.Rename(from, to); err != nil {
		t.Fatal(err)
	}
}

// sortedIDs are the ids the subtasks read, sorted.
func sortedIDs(sts ...*srcTask[rec]) []int64 {
	var out []int64
	for _, st := range sts {
		for _, v := range st.values() {
			out = append(out, v.ID)
		}
	}
	slices.Sort(out)
	return out
}

// idRange is from..to-1.
func idRange(from, to int64) []int64 {
	var out []int64
	for id := from; id < to; id++ {
		out = append(out, id)
	}
	return out
}

// readErr reads until Read fails (returning the error) or reads reads
// happened (returning nil).
func readErr[T any](st *srcTask[T], reads int) error {
	for range reads {
		if _, err := st.src.Read(); err != nil {
			return err
		}
	}
	return nil
}

// follow is the config of a source following glob, polling at every Read.
func follow(glob string) file.SourceConfig {
	return file.SourceConfig{Path: glob, PollInterval: time.Nanosecond}
}

// "A restart must not lose accepted data": a file replaced under its path
// (mv of a new, larger file over it) while the source follows it is not
// read from the old file's byte offset; by default it stops the source with
// an error naming the file. #12 item 3.
func TestHostileFileReplacedWhileFollowing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.jsonl")
	writeFile(t, path, jsonRecords(1001, 1011))
	st := openSource(t, newSource(t, follow(filepath.Join(dir, "*.jsonl")), recDecoder(t)), 0, 1, nil)
	st.readUntilQuiet()
	replaceFile(t, path, jsonRecords(5000, 5100))
	err := readErr(st, 20)
	if err == nil {
		t.Fatalf("no error after %s was replaced; read %v", path, sortedIDs(st))
	}
	if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "replaced") {
		t.Fatalf("error %q does not name %s as replaced", err, path)
	}
	if got := sortedIDs(st); !slices.Equal(got, idRange(1001, 1011)) {
		t.Fatalf("read %v before the error, want only the first file's records", got)
	}
}

// "A restart must not lose accepted data": a file replaced while the job is
// stopped is found replaced on restore, with an error naming it, not read
// from the old offset. #12 item 3.
func TestHostileFileReplacedWhileStopped(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.jsonl")
	writeFile(t, path, jsonRecords(1001, 1011))
	src := newSource(t, follow(filepath.Join(dir, "*.jsonl")), recDecoder(t))
	st := openSource(t, src, 0, 1, nil)
	st.readUntilQuiet()
	pos := st.position()
	_ = st.src.Close()
	replaceFile(t, path, jsonRecords(5000, 5100))

	again, err := tryOpen(t, src, pos)
	if err == nil {
		err = readErr(again, 20)
		if err == nil {
			t.Fatalf("no error restoring after %s was replaced; read %v", path, sortedIDs(again))
		}
	}
	if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "replaced") {
		t.Fatalf("error %q does not name %s as replaced", err, path)
	}
}

// "A restart must not lose accepted data": a file rewritten in place (same
// inode: `cat new > a.jsonl`) with more bytes than were read is not read
// from the old offset: a file whose first bytes changed is not the file that
// was read. #12 item 3 (truncation is a changed identity).
func TestHostileFileRewrittenInPlace(t *testing.T) {
	for _, open := range []bool{false, true} {
		t.Run(fmt.Sprint("open ", open), func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "a.jsonl")
			writeFile(t, path, jsonRecords(1001, 1011))
			cfg := follow(filepath.Join(dir, "*.jsonl"))
			if open {
				cfg.BatchSize = 3 // the file stays open after the first read
			}
			st := openSource(t, newSource(t, cfg, recDecoder(t)), 0, 1, nil)
			if open {
				st.read()
			} else {
				st.readUntilQuiet()
			}
			writeFile(t, path, jsonRecords(5000, 5100)) // O_TRUNC, same inode
			err := readErr(st, 20)
			if err == nil {
				t.Fatalf("no error after %s was rewritten; read %v", path, sortedIDs(st))
			}
			if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "truncated") {
				t.Fatalf("error %q does not name %s as truncated or rewritten", err, path)
			}
		})
	}
}

// "A restart must not lose accepted data" and must not "repeat
// already-visible output": rename-then-create rotation to a name the glob
// also matches continues the renamed file from its offset and reads the new
// file from its start, each record once, and the watermark is not held back
// by a re-read of the old file. At parallelism 2 too: a renamed file stays
// with the subtask that read it. #12 item 3.
func TestHostileRotationWithinGlobWhileFollowing(t *testing.T) {
	for _, par := range []int{1, 2} {
		t.Run(fmt.Sprint("parallelism ", par), func(t *testing.T) {
			dir := t.TempDir()
			const files = 6
			for f := range files {
				writeFile(t, filepath.Join(dir, fmt.Sprintf("f%d.jsonl", f)), jsonRecords(int64(1000+f*100), int64(1000+f*100+10)))
			}
			cfg := follow(filepath.Join(dir, "*.jsonl"))
			cfg.BatchSize = 3
			src := newSource(t, cfg, recDecoder(t))
			var sts []*srcTask[rec]
			for sub := range par {
				sts = append(sts, openSource(t, src, sub, par, nil))
			}
			for _, st := range sts {
				st.read() // mid-file in some files
			}
			for f := range files {
				p := filepath.Join(dir, fmt.Sprintf("f%d.jsonl", f))
				appendFile(t, p, jsonRecords(int64(1000+f*100+10), int64(1000+f*100+15)))
				rename(t, p, filepath.Join(dir, fmt.Sprintf("f%d-rotated.jsonl", f)))
				writeFile(t, p, jsonRecords(int64(1000+f*100+15), int64(1000+f*100+20)))
			}
			for range 3 {
				for _, st := range sts {
					st.readUntilQuiet()
				}
			}
			var want []int64
			for f := range files {
				want = append(want, idRange(int64(1000+f*100), int64(1000+f*100+20))...)
			}
			if got := sortedIDs(sts...); !slices.Equal(got, want) {
				t.Fatalf("read %v, want each of %v once", got, want)
			}
		})
	}
}

// The same rotation while the job is stopped: the restored subtask finds
// the renamed file by its identity, continues it from the saved offset and
// reads the new file from its start. #12 item 3.
func TestHostileRotationWithinGlobWhileStopped(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.jsonl")
	writeFile(t, path, jsonRecords(1001, 1011))
	cfg := follow(filepath.Join(dir, "*.jsonl"))
	cfg.BatchSize = 4
	src := newSource(t, cfg, recDecoder(t))
	st := openSource(t, src, 0, 1, nil)
	st.read()
	pos := st.position()
	before := sortedIDs(st)
	_ = st.src.Close()
	appendFile(t, path, jsonRecords(1011, 1015))
	rename(t, path, filepath.Join(dir, "a-1.jsonl"))
	writeFile(t, path, jsonRecords(1015, 1020))

	again := openSource(t, src, 0, 1, pos)
	again.readUntilQuiet()
	got := append(before, sortedIDs(again)...)
	slices.Sort(got)
	if !slices.Equal(got, idRange(1001, 1020)) {
		t.Fatalf("read %v before and %v after the restore, want each of 1001..1019 once", before, sortedIDs(again))
	}
}

// reread is follow(glob) with on_replace: reread.
func reread(glob string) file.SourceConfig {
	cfg := follow(glob)
	cfg.OnReplace = file.ReplaceReread
	return cfg
}

// "A restart must not lose accepted data": with on_replace: reread a file
// replaced under its path is read from its start, whether the replaced file
// had been read to its end (closed) or was still being read (it is then
// read to its end through the open file first), running or stopped; a
// warning names the path. #12 item 3.
func TestHostileFileReplacedReread(t *testing.T) {
	t.Run("running, read to its end", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "a.jsonl")
		writeFile(t, path, jsonRecords(1001, 1011))
		st, logs := openLogged(t, newSource(t, reread(filepath.Join(dir, "*.jsonl")), recDecoder(t)), nil)
		st.readUntilQuiet()
		replaceFile(t, path, jsonRecords(5000, 5100))
		st.readUntilQuiet()
		st.readUntilQuiet()
		if got := sortedIDs(st); !slices.Equal(got, append(idRange(1001, 1011), idRange(5000, 5100)...)) {
			t.Fatalf("read %v, want 1001..1010 and 5000..5099 once", got)
		}
		if msg, ok := logs.find(slog.LevelWarn, "replaced"); !ok || !strings.Contains(msg, path) {
			t.Errorf("no warning naming %s as replaced (%q)", path, msg)
		}
	})
	t.Run("running, being read", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "a.jsonl")
		writeFile(t, path, jsonRecords(1001, 1011))
		cfg := reread(filepath.Join(dir, "*.jsonl"))
		cfg.BatchSize = 3
		st := openSource(t, newSource(t, cfg, recDecoder(t)), 0, 1, nil)
		st.read()
		replaceFile(t, path, jsonRecords(5000, 5100))
		st.readUntilQuiet()
		st.readUntilQuiet()
		if got := sortedIDs(st); !slices.Equal(got, append(idRange(1001, 1011), idRange(5000, 5100)...)) {
			t.Fatalf("read %v, want 1001..1010 (through the open file) and 5000..5099 once", got)
		}
	})
	t.Run("stopped", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "a.jsonl")
		writeFile(t, path, jsonRecords(1001, 1011))
		src := newSource(t, reread(filepath.Join(dir, "*.jsonl")), recDecoder(t))
		st := openSource(t, src, 0, 1, nil)
		st.readUntilQuiet()
		pos := st.position()
		_ = st.src.Close()
		replaceFile(t, path, jsonRecords(5000, 5100))
		again := openSource(t, src, 0, 1, pos)
		again.readUntilQuiet()
		if got := sortedIDs(again); !slices.Equal(got, idRange(5000, 5100)) {
			t.Fatalf("restored subtask read %v, want 5000..5099 once", got)
		}
	})
	t.Run("stopped, not read to its end", func(t *testing.T) {
		// The old file had unread records when the position was taken:
		// they cannot be read any more, and the source says so.
		dir := t.TempDir()
		path := filepath.Join(dir, "a.jsonl")
		writeFile(t, path, jsonRecords(1001, 1011))
		cfg := reread(filepath.Join(dir, "*.jsonl"))
		cfg.BatchSize = 3
		src := newSource(t, cfg, recDecoder(t))
		st := openSource(t, src, 0, 1, nil)
		st.read()
		pos := st.position()
		_ = st.src.Close()
		replaceFile(t, path, jsonRecords(5000, 5100))
		_, err := tryOpen(t, src, pos)
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "before it was read to its end") {
			t.Fatalf("error %v, want one naming %s as replaced before it was read to its end", err, path)
		}
	})
}

// "A restart must not lose accepted data": a file truncated (or rewritten in
// place) is an error by default and, with on_replace: reread, read again
// from its start. #12 item 3.
func TestHostileFileTruncated(t *testing.T) {
	for _, policy := range []file.ReplacePolicy{file.ReplaceFail, file.ReplaceReread} {
		t.Run(string(policy), func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "a.jsonl")
			writeFile(t, path, jsonRecords(1001, 1011))
			cfg := follow(filepath.Join(dir, "*.jsonl"))
			cfg.OnReplace = policy
			st := openSource(t, newSource(t, cfg, recDecoder(t)), 0, 1, nil)
			st.readUntilQuiet()
			if err := os.Truncate(path, 0); err != nil {
				t.Fatal(err)
			}
			appendFile(t, path, jsonRecords(5000, 5003))
			err := readErr(st, 20)
			if policy == file.ReplaceFail {
				if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "truncated") {
					t.Fatalf("error %v, want one naming %s as truncated", err, path)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := sortedIDs(st); !slices.Equal(got, append(idRange(1001, 1011), idRange(5000, 5003)...)) {
				t.Fatalf("read %v, want 1001..1010 and 5000..5002 once", got)
			}
		})
	}
}

// "A restart must not lose accepted data": rename-then-create rotation to
// a name the glob does not match cannot be told from a replacement when the
// source next looks: by default it stops with an error naming the file and
// the option; with on_replace: reread the new file is read from its start,
// and nothing of the old one is lost when it had been read to its end. A
// file deleted after it was read to its end while the job was stopped is
// forgotten. #12 item 3.
func TestHostileRotationOutOfGlob(t *testing.T) {
	rotate := func(t *testing.T, path string) {
		rename(t, path, path+".1") // *.jsonl does not match a.jsonl.1
		writeFile(t, path, jsonRecords(1011, 1020))
	}
	t.Run("fail", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "a.jsonl")
		writeFile(t, path, jsonRecords(1001, 1011))
		st := openSource(t, newSource(t, follow(filepath.Join(dir, "*.jsonl")), recDecoder(t)), 0, 1, nil)
		st.readUntilQuiet()
		rotate(t, path)
		err := readErr(st, 20)
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "on_replace: reread") {
			t.Fatalf("error %v, want one naming %s and on_replace: reread", err, path)
		}
	})
	for _, stopped := range []bool{false, true} {
		t.Run(fmt.Sprint("reread, stopped ", stopped), func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "a.jsonl")
			writeFile(t, path, jsonRecords(1001, 1011))
			src := newSource(t, reread(filepath.Join(dir, "*.jsonl")), recDecoder(t))
			st := openSource(t, src, 0, 1, nil)
			st.readUntilQuiet()
			if stopped {
				pos := st.position()
				_ = st.src.Close()
				rotate(t, path)
				st = openSource(t, src, 0, 1, pos)
			} else {
				rotate(t, path)
			}
			st.readUntilQuiet()
			st.readUntilQuiet()
			got := sortedIDs(st)
			want := idRange(1001, 1020)
			if stopped {
				want = idRange(1011, 1020)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("read %v, want %v once", got, want)
			}
		})
	}
	t.Run("deleted while stopped", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "a.jsonl")
		writeFile(t, path, jsonRecords(1001, 1011))
		src := newSource(t, follow(filepath.Join(dir, "*.jsonl")), recDecoder(t))
		st := openSource(t, src, 0, 1, nil)
		st.readUntilQuiet()
		pos := st.position()
		_ = st.src.Close()
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		again := openSource(t, src, 0, 1, pos)
		again.readUntilQuiet()
		if p := string(again.position()); strings.Contains(p, "a.jsonl") {
			t.Fatalf("position %s still lists the deleted file", p)
		}
	})
}

// Rotation with numbered names (a.jsonl → a.jsonl.1 → a.jsonl.2, the
// oldest deleted), all matched by the glob, running and stopped, at
// parallelism 1 and 2: every record once. #12 item 3.
func TestHostileRotationNumbered(t *testing.T) {
	for _, par := range []int{1, 2} {
		for _, stopped := range []bool{false, true} {
			t.Run(fmt.Sprintf("parallelism %d, stopped %v", par, stopped), func(t *testing.T) {
				dir := t.TempDir()
				base := filepath.Join(dir, "a.jsonl")
				cfg := follow(base + "*")
				cfg.BatchSize = 4
				src := newSource(t, cfg, recDecoder(t))
				open := func(pos [][]byte) []*srcTask[rec] {
					var sts []*srcTask[rec]
					for sub := range par {
						var inline []byte
						if pos != nil {
							inline = pos[sub]
						}
						sts = append(sts, openSource(t, src, sub, par, inline))
					}
					return sts
				}
				readAll := func(sts []*srcTask[rec]) {
					for range 3 {
						for _, st := range sts {
							st.readUntilQuiet()
						}
					}
				}
				var done []int64
				next := int64(1000)
				write := func(n int64) {
					appendFile(t, base, jsonRecords(next, next+n))
					next += n
				}
				rotate := func() {
					_ = os.Remove(base + ".2")
					if _, err := os.Stat(base + ".1"); err == nil {
						rename(t, base+".1", base+".2")
					}
					rename(t, base, base+".1")
				}
				write(10)
				sts := open(nil)
				for round := range 5 {
					readAll(sts)
					write(5)
					if stopped {
						var pos [][]byte
						for _, st := range sts {
							pos = append(pos, st.position())
							done = append(done, sortedIDs(st)...)
							_ = st.src.Close()
						}
						rotate()
						write(7)
						sts = open(pos)
					} else {
						rotate()
						write(7)
					}
					_ = round
				}
				readAll(sts)
				got := append(done, sortedIDs(sts...)...)
				slices.Sort(got)
				if want := idRange(1000, next); !slices.Equal(got, want) {
					t.Fatalf("read %v, want each of %v once", got, want)
				}
			})
		}
	}
}

// "Replayable source - The source can resume from the position saved in a
// checkpoint": a position written before files had identities (format
// version 1) is restored as it is: the file under its path is taken as the
// one read, reading resumes at its offset, the identity is recorded from
// then on (and logged), and a replacement after that is detected. #12 item 3.
func TestHostileRestoreFromVersion1Position(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.jsonl")
	writeFile(t, path, jsonRecords(1001, 1011))
	src := newSource(t, follow(filepath.Join(dir, "*.jsonl")), recDecoder(t))
	off := len(jsonRecords(1001, 1005))
	v1 := fmt.Sprintf(`{"version":1,"files":[{"path":%q,"offset":%d,"line":4,"max_time":%d}]}`, path, off, 1004*int64(time.Millisecond))
	st, logs := openLogged(t, src, []byte(v1))
	st.readUntilQuiet()
	if got := sortedIDs(st); !slices.Equal(got, idRange(1005, 1011)) {
		t.Fatalf("read %v from a version 1 position, want 1005..1010", got)
	}
	if msg, ok := logs.find(slog.LevelInfo, "earlier version"); !ok || !strings.Contains(msg, path) {
		t.Errorf("no log line naming %s restored without identity (%q)", path, msg)
	}
	pos := string(st.position())
	if !strings.Contains(pos, `"version":2`) || !strings.Contains(pos, `"ino":`) || !strings.Contains(pos, `"by_path":true`) {
		t.Fatalf("position after the restore %s: want version 2, the file's identity, and assignment by path kept", pos)
	}
	replaceFile(t, path, jsonRecords(5000, 5100))
	if err := readErr(st, 20); err == nil || !strings.Contains(err.Error(), "replaced") {
		t.Fatalf("after a replacement: %v, want an error", err)
	}
}

// stop_at latest: the files listed at the first start are identified then,
// so a file replaced before a restart is refused (or, with on_replace:
// reread, read from its start to its size then) and a file renamed within
// the glob is read to its listed end under its new name. #12 item 3.
func TestHostileStopAtLatestListing(t *testing.T) {
	setup := func(t *testing.T, policy file.ReplacePolicy) (string, *file.Source[rec], []byte, []int64) {
		dir := t.TempDir()
		path := filepath.Join(dir, "a.jsonl")
		writeFile(t, path, jsonRecords(1001, 1011))
		src := newSource(t, file.SourceConfig{Path: filepath.Join(dir, "*.jsonl"), StopAt: file.StopAtLatest, BatchSize: 3, OnReplace: policy}, recDecoder(t))
		st := openSource(t, src, 0, 1, nil)
		st.read()
		pos := st.position()
		if !strings.Contains(string(pos), `"ino":`) {
			t.Fatalf("position at the first start %s has no identity", pos)
		}
		before := sortedIDs(st)
		_ = st.src.Close()
		return path, src, pos, before
	}
	t.Run("replaced", func(t *testing.T) {
		path, src, pos, _ := setup(t, file.ReplaceFail)
		replaceFile(t, path, jsonRecords(5000, 5100))
		again, err := tryOpen(t, src, pos)
		if err == nil {
			err = readErr(again, 20)
		}
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "replaced") {
			t.Fatalf("error %v, want one naming %s as replaced", err, path)
		}
	})
	t.Run("replaced, reread", func(t *testing.T) {
		path, src, pos, _ := setup(t, file.ReplaceReread)
		replaceFile(t, path, jsonRecords(5000, 5010))
		_, err := tryOpen(t, src, pos)
		if err == nil || !strings.Contains(err.Error(), "before it was read to its end") {
			t.Fatalf("error %v, want the unread rest of the replaced file named", err)
		}
	})
	t.Run("renamed", func(t *testing.T) {
		path, src, pos, before := setup(t, file.ReplaceFail)
		appendFile(t, path, jsonRecords(1011, 1013)) // after the listing: not read
		rename(t, path, filepath.Join(filepath.Dir(path), "a-1.jsonl"))
		again := openSource(t, src, 0, 1, pos)
		again.drain()
		got := append(before, sortedIDs(again)...)
		slices.Sort(got)
		if !slices.Equal(got, idRange(1001, 1011)) {
			t.Fatalf("read %v, want 1001..1010 once", got)
		}
	})
	t.Run("renamed while running", func(t *testing.T) {
		dir := t.TempDir()
		a, b := filepath.Join(dir, "a.jsonl"), filepath.Join(dir, "b.jsonl")
		writeFile(t, a, jsonRecords(1001, 1011))
		writeFile(t, b, jsonRecords(2001, 2011))
		// One open file at a time: b is opened by path only after a is read.
		st := openSource(t, newSource(t, file.SourceConfig{Path: filepath.Join(dir, "*.jsonl"), StopAt: file.StopAtLatest, MaxOpenFiles: 1, BatchSize: 3}, recDecoder(t)), 0, 1, nil)
		st.read()
		rename(t, b, filepath.Join(dir, "b-1.jsonl"))
		st.drain()
		if got := sortedIDs(st); !slices.Equal(got, append(idRange(1001, 1011), idRange(2001, 2011)...)) {
			t.Fatalf("read %v, want 1001..1010 and 2001..2010 once", got)
		}
	})
}

// csvRecords returns CSV lines (columns id,key,value,ts) of the records
// with ids from..to-1.
func csvRecords(from, to int64) string {
	var b strings.Builder
	for id := from; id < to; id++ {
		b.WriteString(csvLine(id, "k", id, id))
	}
	return b.String()
}

// skipped returns the skipped-record count in a position.
func skipped(t *testing.T, pos []byte) int64 {
	t.Helper()
	var p struct {
		Bad *struct {
			Skipped int64 `json:"skipped"`
		} `json:"bad"`
	}
	if err := json.Unmarshal(pos, &p); err != nil {
		t.Fatal(err)
	}
	if p.Bad == nil {
		return 0
	}
	return p.Bad.Skipped
}

// "A restart must not lose accepted data": an unterminated quote in a CSV
// record does not turn the rest of the file into one bad record. A quoted
// field is bounded by max_record_bytes, and a bad record ends at the first
// line break after its start, where reading resumes: with on_error: skip
// exactly that line is skipped and every record after it read once, with
// stop_at latest and following; with on_error: fail the error names the file
// and the line. #12 item 9.
func TestHostileCSVUnterminatedQuote(t *testing.T) {
	const header = "id,key,value,ts\n"
	content := header + csvRecords(1001, 1004) + "1004,\"k,1004,1004\n" + csvRecords(1005, 1200)
	want := append(idRange(1001, 1004), idRange(1005, 1200)...)
	for _, stop := range []file.StopAt{file.StopAtLatest, file.StopNever} {
		t.Run(fmt.Sprint("stop_at ", stop), func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "a.csv"), content)
			cfg := file.SourceConfig{Path: filepath.Join(dir, "*.csv"), Format: file.FormatCSV, StopAt: stop, PollInterval: time.Nanosecond}
			st := openPolicy(t, newSource(t, cfg, recDecoder(t)), stream.BadRecordPolicy{OnError: stream.OnErrorSkip, MaxRecordBytes: 1024}, nil)
			if stop == file.StopAtLatest {
				st.drain()
			} else {
				st.readUntilQuiet()
			}
			if got := sortedIDs(st); !slices.Equal(got, want) {
				t.Fatalf("read %d records %v, want the %d records around the bad line once", len(got), got, len(want))
			}
			if n := skipped(t, st.position()); n != 1 {
				t.Fatalf("%d records skipped, want 1 (the line with the unterminated quote)", n)
			}
		})
	}
	for _, stop := range []file.StopAt{file.StopAtLatest, file.StopNever} {
		t.Run(fmt.Sprint("fail, stop_at ", stop), func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "a.csv")
			writeFile(t, path, content)
			cfg := file.SourceConfig{Path: filepath.Join(dir, "*.csv"), Format: file.FormatCSV, StopAt: stop, PollInterval: time.Nanosecond}
			st := openPolicy(t, newSource(t, cfg, recDecoder(t)), stream.BadRecordPolicy{OnError: stream.OnErrorFail, MaxRecordBytes: 1024}, nil)
			err := readErr(st, 100)
			if err == nil || !strings.Contains(err.Error(), path+":5 ") || !strings.Contains(err.Error(), "not closed") {
				t.Fatalf("error %v, want one naming %s:5 and the quote not closed", err, path)
			}
		})
	}
}

// The same across a checkpoint: a position taken while an oversized record
// (an unterminated quote on a line longer than max_record_bytes, still
// being written) is being skipped resumes at that record, which is then skipped
// once, and every record after it is read once, by the subtask that went on
// and by one restored from the position. #12 item 9.
func TestHostileCSVSkipAcrossRestore(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.csv")
	writeFile(t, path, "id,key,value,ts\n"+csvRecords(1001, 1004)+"1004,\""+strings.Repeat("x", 3000))
	cfg := file.SourceConfig{Path: filepath.Join(dir, "*.csv"), Format: file.FormatCSV, PollInterval: time.Nanosecond}
	src := newSource(t, cfg, recDecoder(t))
	policy := stream.BadRecordPolicy{OnError: stream.OnErrorSkip, MaxRecordBytes: 1024}
	st := openPolicy(t, src, policy, nil)
	st.readUntilQuiet()
	pos := st.position() // mid-skip
	if n := skipped(t, pos); n != 0 {
		t.Fatalf("%d records skipped before the bad record's end was read", n)
	}
	appendFile(t, path, strings.Repeat("y", 3000)+",1004,1004\n"+csvRecords(1005, 1100)) // the quote is never closed
	st.readUntilQuiet()
	st.readUntilQuiet()
	if got := sortedIDs(st); !slices.Equal(got, append(idRange(1001, 1004), idRange(1005, 1100)...)) {
		t.Fatalf("the subtask that went on read %v", got)
	}
	if n := skipped(t, st.position()); n != 1 {
		t.Fatalf("the subtask that went on skipped %d records, want 1", n)
	}
	again := openPolicy(t, src, policy, pos)
	again.readUntilQuiet()
	again.readUntilQuiet()
	if got := sortedIDs(again); !slices.Equal(got, idRange(1005, 1100)) {
		t.Fatalf("the restored subtask read %v, want 1005..1099 once", got)
	}
	if n := skipped(t, again.position()); n != 1 {
		t.Fatalf("the restored subtask skipped %d records, want 1", n)
	}
}

// A job restored from a version 1 position assigns files by path: a file
// rotated to a name another subtask owns by path cannot be followed (that
// subtask would read it again from its start), so the subtask that read it
// stops, naming both paths and the remedy, rather than let it be read
// twice. #12 item 3.
func TestHostileRotationAcrossSubtasksAfterVersion1Restore(t *testing.T) {
	dir := t.TempDir()
	cfg := follow(filepath.Join(dir, "*.jsonl"))
	src := newSource(t, cfg, recDecoder(t))
	openAt := func(sub int, inline string) (*srcTask[rec], error) {
		out := &collector[rec]{}
		st := runtime.EraseSource(src.NewSubtask())
		ctx := &runtime.Context{Task: checkpoint.TaskID{Operator: "files", Subtask: sub}, Parallelism: 2, MaxParallelism: 128, Output: out,
			Restored: &checkpoint.SubtaskState{Inline: []byte(inline)}}
		err := st.Open(ctx)
		t.Cleanup(func() { _ = st.Close() })
		return &srcTask[rec]{t: t, src: st, out: out}, err
	}
	// Which names does each subtask own by path? Restored from empty
	// version 1 positions, each reads the files it owns.
	for i := range 16 {
		writeFile(t, filepath.Join(dir, fmt.Sprintf("n%02d.jsonl", i)), jsonRecords(int64(1000+i), int64(1001+i)))
	}
	owner := map[int64]int{}
	for sub := range 2 {
		st, err := openAt(sub, `{"version":1,"files":[]}`)
		if err != nil {
			t.Fatal(err)
		}
		st.readUntilQuiet()
		for _, id := range sortedIDs(st) {
			owner[id] = sub
		}
	}
	from, to := "", ""
	for i := range 16 {
		switch name := filepath.Join(dir, fmt.Sprintf("n%02d.jsonl", i)); {
		case owner[int64(1000+i)] == 0 && from == "":
			from = name
		case owner[int64(1000+i)] == 1 && to == "":
			to = name
		}
	}
	if from == "" || to == "" {
		t.Fatalf("16 names do not spread over 2 subtasks: %v", owner)
	}
	for i := range 16 {
		if p := filepath.Join(dir, fmt.Sprintf("n%02d.jsonl", i)); p != from {
			_ = os.Remove(p)
		}
	}
	writeFile(t, from, jsonRecords(1001, 1011))
	st, err := openAt(0, fmt.Sprintf(`{"version":1,"files":[{"path":%q,"offset":%d,"line":4}]}`, from, len(jsonRecords(1001, 1005))))
	if err != nil {
		t.Fatal(err)
	}
	st.readUntilQuiet()
	rename(t, from, to)
	writeFile(t, from, jsonRecords(1011, 1020))
	err = readErr(st, 20)
	if err == nil || !strings.Contains(err.Error(), from) || !strings.Contains(err.Error(), to) || !strings.Contains(err.Error(), "parallelism 1") {
		t.Fatalf("error %v, want one naming %s renamed to %s, another subtask's, and the remedy", err, from, to)
	}
}

// A job that followed its files, restored with stop_at latest and
// on_replace: reread after one of them was truncated: the truncated file is
// read again from its start and the other files are listed and read too.
// #12 item 3.
func TestHostileTruncatedThenStopAtLatestReread(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.jsonl"), filepath.Join(dir, "b.jsonl")
	writeFile(t, a, jsonRecords(1001, 1011))
	st := openSource(t, newSource(t, follow(filepath.Join(dir, "*.jsonl")), recDecoder(t)), 0, 1, nil)
	st.readUntilQuiet()
	pos := st.position()
	_ = st.src.Close()
	writeFile(t, a, jsonRecords(5000, 5003)) // truncated, rewritten
	writeFile(t, b, jsonRecords(6000, 6005))
	again := openSource(t, newSource(t, file.SourceConfig{Path: filepath.Join(dir, "*.jsonl"), StopAt: file.StopAtLatest, OnReplace: file.ReplaceReread}, recDecoder(t)), 0, 1, pos)
	again.drain()
	if got := sortedIDs(again); !slices.Equal(got, append(idRange(5000, 5003), idRange(6000, 6005)...)) {
		t.Fatalf("read %v, want 5000..5002 and 6000..6004 once", got)
	}
}
