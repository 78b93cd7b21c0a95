// Package testkit holds what exactly-once tests share: the closed-form
// expected output of the datagen → tumbling window pipeline, a reader of a
// file sink's committed output, and a verifier that counts missing,
// duplicated and wrong results.
package testkit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// WindowKey identifies one window result: a key and its window start.
type WindowKey struct {
	Key   int64
	Start time.Time
}

// WindowAgg is the exact count and sum of one window.
type WindowAgg struct {
	Count, Sum int64
}

// ExpectedWindows returns the windows the datagen contract implies: record i
// has key i % keys, value i % 1000 and event time start + i*interval; windows
// are tumbling of size, aligned to the Unix epoch.
func ExpectedWindows(count, keys int64, start time.Time, interval, size time.Duration) map[WindowKey]WindowAgg {
	want := map[WindowKey]WindowAgg{}
	s0 := start.UnixNano()
	for i := int64(0); i < count; i++ {
		t := s0 + i*int64(interval)
		ws := t - mod(t, int64(size))
		k := WindowKey{Key: i % keys, Start: time.Unix(0, ws).UTC()}
		a := want[k]
		a.Count++
		a.Sum += i % 1000
		want[k] = a
	}
	return want
}

func mod(a, b int64) int64 {
	r := a % b
	if r < 0 {
		r += b
	}
	return r
}

// IsCommitted reports whether a path relative to a file sink's directory is
// committed output: no component begins with '_' or '.'.
func IsCommitted(rel string) bool {
	for _, c := range strings.Split(filepath.ToSlash(rel), "/") {
		if strings.HasPrefix(c, "_") || strings.HasPrefix(c, ".") {
			return false
		}
	}
	return true
}

// ReadCommitted returns every line of every committed file under dir, with
// the file it came from.
func ReadCommitted(dir string) ([]Line, error) {
	var lines []Line
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if rel != "." && !IsCommitted(rel) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for n := 1; sc.Scan(); n++ {
			lines = append(lines, Line{File: rel, Number: n, Text: slices.Clone(sc.Bytes())})
		}
		return sc.Err()
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return lines, err
}

// Line is one committed line and where it is.
type Line struct {
	File   string
	Number int
	Text   []byte
}

// windowLine is the window output contract.
type windowLine struct {
	Key         *int64 `json:"key"`
	WindowStart string `json:"window_start"`
	WindowEnd   string `json:"window_end"`
	Count       *int64 `json:"count"`
	Sum         *int64 `json:"sum"`
}

// Report counts how committed window output differs from the expected.
type Report struct {
	Expected, Seen                  int
	Missing, Duplicated, Unexpected int
	Wrong, Malformed                int
	Examples                        []string
}

// OK reports whether the output is exactly the expected.
func (r Report) OK() bool {
	return r.Missing == 0 && r.Duplicated == 0 && r.Unexpected == 0 && r.Wrong == 0 && r.Malformed == 0 && r.Seen == r.Expected
}

// String summarises the report with a few examples.
func (r Report) String() string {
	return fmt.Sprintf("expected %d windows, saw %d lines: %d missing, %d duplicated, %d unexpected, %d wrong, %d malformed; examples: %s",
		r.Expected, r.Seen, r.Missing, r.Duplicated, r.Unexpected, r.Wrong, r.Malformed, strings.Join(r.Examples, "; "))
}

func (r *Report) example(format string, args ...any) {
	if len(r.Examples) < 10 {
		r.Examples = append(r.Examples, fmt.Sprintf(format, args...))
	}
}

// CheckWindows compares committed window lines with want: every (key, window)
// exactly once with the exact count and sum, nothing else.
func CheckWindows(lines []Line, want map[WindowKey]WindowAgg, size time.Duration) Report {
	r := Report{Expected: len(want), Seen: len(lines)}
	seen := map[WindowKey]Line{}
	for _, l := range lines {
		var w windowLine
		if err := json.Unmarshal(l.Text, &w); err != nil || w.Key == nil || w.Count == nil || w.Sum == nil {
			r.Malformed++
			r.example("%s:%d malformed: %s", l.File, l.Number, l.Text)
			continue
		}
		start, err1 := time.Parse(time.RFC3339Nano, w.WindowStart)
		end, err2 := time.Parse(time.RFC3339Nano, w.WindowEnd)
		if err1 != nil || err2 != nil || end.Sub(start) != size {
			r.Malformed++
			r.example("%s:%d bad window bounds: %s", l.File, l.Number, l.Text)
			continue
		}
		k := WindowKey{Key: *w.Key, Start: start.UTC()}
		if prev, dup := seen[k]; dup {
			r.Duplicated++
			r.example("duplicate key %d window %s at %s:%d and %s:%d", k.Key, w.WindowStart, prev.File, prev.Number, l.File, l.Number)
			continue
		}
		seen[k] = l
		exp, ok := want[k]
		switch {
		case !ok:
			r.Unexpected++
			r.example("unexpected key %d window %s at %s:%d", k.Key, w.WindowStart, l.File, l.Number)
		case exp.Count != *w.Count || exp.Sum != *w.Sum:
			r.Wrong++
			r.example("key %d window %s: count %d sum %d, want count %d sum %d", k.Key, w.WindowStart, *w.Count, *w.Sum, exp.Count, exp.Sum)
		}
	}
	for k := range want {
		if _, ok := seen[k]; !ok {
			r.Missing++
			r.example("missing key %d window %s", k.Key, k.Start.Format(time.RFC3339))
		}
	}
	return r
}
