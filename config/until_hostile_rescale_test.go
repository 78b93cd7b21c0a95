package config_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/config"
)

// reviewNexmarkHead declares Nexmark auctions and bids, rate-limited so that
// a run can be stopped mid-way, with the given parallelism.
func reviewNexmarkHead(par int, rate string) string {
	return fmt.Sprintf(`SET checkpoint.interval = '40ms';
SET checkpoint.dir = 'ckpts';
SET parallelism = '%d';
CREATE SOURCE auction (id BIGINT, date_time TIMESTAMP, expires TIMESTAMP, category BIGINT,
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND)
  WITH (connector = 'nexmark', nexmark.table.type = 'Auction', nexmark.event.num = '20000', nexmark.split.num = '2'%s);
CREATE SOURCE bid (auction BIGINT, price BIGINT, date_time TIMESTAMP,
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND)
  WITH (connector = 'nexmark', nexmark.table.type = 'Bid', nexmark.event.num = '20000', nexmark.split.num = '2'%s);
`, par, rate, rate)
}

// stage is one run of runStages: the pipeline at parallelism par, stopped
// after stop (0: run to the end).
type stage struct {
	par  int
	stop time.Duration
}

// rescaled are the stages of a test that stops a pipeline mid-way and
// restores it at another parallelism twice (2 → 3 → 1).
func rescaled(first, second time.Duration) []stage {
	return []stage{{2, first}, {3, second}, {1, 0}}
}

// runStages runs the pipeline script(par) at path once per stage, each run
// restoring the previous one's checkpoint, and fails t unless each ends at
// its stop or, the last, at the end of its input.
func runStages(t *testing.T, path string, stages []stage, script func(par int) string) {
	t.Helper()
	for i, r := range stages {
		if err := os.WriteFile(path, []byte(script(r.par)), 0o644); err != nil {
			t.Fatal(err)
		}
		p, err := config.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		if r.stop > 0 {
			ctx, cancel = context.WithTimeout(context.Background(), r.stop)
		}
		err = p.Stream.Run(ctx, p.RunOptions())
		cancel()
		if err != nil && !(r.stop > 0 && errors.Is(err, context.DeadlineExceeded)) {
			t.Fatalf("run %d (parallelism %d): %v", i, r.par, err)
		}
		n := 0
		if _, statErr := os.Stat(filepath.Join(filepath.Dir(path), "out")); statErr == nil {
			n = len(committedLines(t, filepath.Dir(path), "out"))
		}
		t.Logf("run %d (parallelism %d): %v; %d rows committed so far", i, r.par, err, n)
	}
}

const reviewNexmarkJoin = `CREATE SINK out AS
  SELECT A.id, A.category, B.price, B.date_time FROM auction AS A JOIN bid AS B ON A.id = B.auction
  WHERE B.date_time BETWEEN A.date_time AND A.expires
  WITH (connector = 'file', path = 'out');
`

// The until join stopped mid-run and restored at another parallelism twice
// (2 → 3 → 1) commits exactly the rows of an uninterrupted run of the
// reference inner join: none lost or repeated.
func TestUntilRescaleExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("runs pipelines")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "q.sql")
	script := func(par int) string { return reviewNexmarkHead(par, ", rate = '12000'") + reviewNexmarkJoin }
	if d := planOf(t, script(2)); !strings.Contains(d, "interval join [0s, left expires]") {
		t.Fatalf("plan:\n%s", d)
	}
	runStages(t, path, rescaled(700*time.Millisecond, 600*time.Millisecond), script)
	got := committedLines(t, dir, "out")
	slices.Sort(got)
	ref := strings.Replace(reviewNexmarkHead(1, ""), "A.expires", "A.expires + INTERVAL '0' SECOND", 1) +
		strings.Replace(reviewNexmarkJoin, "A.expires", "A.expires + INTERVAL '0' SECOND", 1)
	want := runAndRead(t, writeFile(t, "ref.sql", ref))
	if !slices.Equal(got, want) {
		missing, extra := diffLines(want, got)
		t.Fatalf("committed %d rows, reference %d: missing %d %v, extra %d %v", len(got), len(want), len(missing), head(missing, 5), len(extra), head(extra, 5))
	}
	t.Logf("%d rows exactly", len(got))
}
