package config_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/config"
)

// Every SQL example of docs/sql.md loads and runs to the end, and its sink
// commits output: the page shows what works.
func TestSQLPageExamples(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the page's pipelines")
	}
	page, err := os.ReadFile("../docs/sql.md")
	if err != nil {
		t.Fatal(err)
	}
	examples := regexp.MustCompile("(?s)```sql\n(.*?)```").FindAllStringSubmatch(string(page), -1)
	if len(examples) < 5 {
		t.Fatalf("docs/sql.md has %d sql examples, want at least 5", len(examples))
	}
	var bids strings.Builder
	for i := range 40 {
		fmt.Fprintf(&bids, `{"auction": %d, "bidder": %d, "price": %d, "ts": "%s"}`+"\n", i%4, i%7, 40+(i*13)%100,
			time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i)*500*time.Millisecond).Format(time.RFC3339Nano))
	}
	for i, ex := range examples {
		t.Run(fmt.Sprint(i+1), func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "bids.jsonl"), []byte(bids.String()), 0o644); err != nil {
				t.Fatal(err)
			}
			// The table the lookup join's example reads.
			names := `{"id": 0, "name": "zero"}` + "\n" + `{"id": 1, "name": "one"}` + "\n" + `{"id": 2, "name": "two"}` + "\n"
			if err := os.WriteFile(filepath.Join(dir, "names.jsonl"), []byte(names), 0o644); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "q.sql")
			if err := os.WriteFile(path, []byte(ex[1]), 0o644); err != nil {
				t.Fatal(err)
			}
			p, err := config.Load(path)
			if err != nil {
				t.Fatalf("%s\n%v", ex[1], err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if err := p.Stream.Run(ctx, p.RunOptions()); err != nil {
				t.Fatalf("%s\nRun: %v", ex[1], err)
			}
			committed, _ := filepath.Glob(filepath.Join(dir, "out", "ckpt-*", "*"))
			var data int64
			for _, f := range committed {
				if fi, err := os.Stat(f); err == nil && filepath.Base(f) != "_manifest.json" {
					data += fi.Size()
				}
			}
			if data == 0 {
				t.Errorf("%s\ncommitted no output under out/ (files %v)", ex[1], committed)
			}
		})
	}
}
