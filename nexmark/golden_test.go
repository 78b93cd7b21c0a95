package nexmark_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/ingest-engine/ingest/nexmark"
)

// goldenDir is where the golden files live: ../shared/nexmark from the
// repository root (see its README.txt for how they were made).
const goldenDir = "../../shared/nexmark"

// goldenEvents is the number of events (lines) in each golden file.
const goldenEvents = 20000

// ConfigB is the README's config B: one generator, 10,000 events per second,
// so ten events share each millisecond.
func configB() nexmark.Config {
	c := nexmark.DefaultConfig()
	c.NumEventGenerators = 1
	c.FirstEventRate = 10000
	return c
}

var goldens = []struct {
	file   string
	config func() nexmark.Config
	sha256 string // of the uncompressed text, from the README
}{
	{"beam-config-a.jsonl.gz", nexmark.DefaultConfig, "b185e9b501fdb21f71b5e8402c4105677fe7b1b990a8e988d89b6abd060b3c33"},
	{"beam-config-b.jsonl.gz", configB, "d6fbf11a7b41e40a6bf3df26d32dc1ca12e2c8c1a8ec0e120dbf57749315dfd0"},
}

// generate encodes events 0..n-1 of cfg as JSON Lines.
func generate(t testing.TB, cfg nexmark.Config, n int64) []byte {
	t.Helper()
	g, err := nexmark.NewGenerator(cfg)
	if err != nil {
		t.Fatalf("NewGenerator: %v", err)
	}
	var out []byte
	for i := range n {
		out = nexmark.AppendJSON(out, g.Event(i))
		out = append(out, '\n')
	}
	return out
}

// TestGoldenSHA256 checks the generator against the README's digests; it
// needs no files, so it always runs.
func TestGoldenSHA256(t *testing.T) {
	for _, gf := range goldens {
		t.Run(gf.file, func(t *testing.T) {
			sum := sha256.Sum256(generate(t, gf.config(), goldenEvents))
			if got := hex.EncodeToString(sum[:]); got != gf.sha256 {
				t.Errorf("sha256 of events 0..%d = %s, want %s (the README's)", goldenEvents-1, got, gf.sha256)
			}
		})
	}
}

// readGolden returns the decompressed golden file, skipping the test when it
// is missing unless INGEST_REQUIRE_SERVICES=1.
func readGolden(t *testing.T, name string) []byte {
	t.Helper()
	path := filepath.Join(goldenDir, name)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		abs, _ := filepath.Abs(path)
		msg := "golden file " + abs + " is missing: the Nexmark golden files are expected in ../shared/nexmark relative to the repository root"
		if os.Getenv("INGEST_REQUIRE_SERVICES") == "1" {
			t.Fatal(msg + " (INGEST_REQUIRE_SERVICES=1)")
		}
		t.Skip(msg)
	}
	if err != nil {
		t.Fatalf("open golden file: %v", err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("gunzip %s: %v", path, err)
	}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(zr); err != nil {
		t.Fatalf("gunzip %s: %v", path, err)
	}
	return buf.Bytes()
}

// TestGoldenFiles compares the generator with Beam's output line by line and
// reports the first difference.
func TestGoldenFiles(t *testing.T) {
	for _, gf := range goldens {
		t.Run(gf.file, func(t *testing.T) {
			want := readGolden(t, gf.file)
			sum := sha256.Sum256(want)
			if got := hex.EncodeToString(sum[:]); got != gf.sha256 {
				t.Fatalf("golden file %s has sha256 %s, the README says %s", gf.file, got, gf.sha256)
			}
			got := generate(t, gf.config(), goldenEvents)
			ws, gs := bufio.NewScanner(bytes.NewReader(want)), bufio.NewScanner(bytes.NewReader(got))
			ws.Buffer(nil, 1<<20)
			gs.Buffer(nil, 1<<20)
			line := 0
			for ws.Scan() {
				if !gs.Scan() {
					t.Fatalf("line %d: generated output ended; want\n%s", line, ws.Text())
				}
				if !bytes.Equal(ws.Bytes(), gs.Bytes()) {
					t.Fatalf("line %d (event %d) differs:\n got: %s\nwant: %s", line, line, gs.Text(), ws.Text())
				}
				line++
			}
			if gs.Scan() {
				t.Fatalf("line %d: generated output goes on after the golden file: %s", line, gs.Text())
			}
			if line != goldenEvents {
				t.Fatalf("golden file has %d lines, want %d", line, goldenEvents)
			}
			if !bytes.Equal(got, want) {
				t.Fatal("outputs differ (line endings?) although every line matches")
			}
		})
	}
}
