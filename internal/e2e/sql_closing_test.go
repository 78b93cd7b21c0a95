package e2e

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/clock"
	"github.com/ingest-engine/ingest/internal/testkit"
	"github.com/ingest-engine/ingest/stream"
)

// closingSQL is q4's first stage over rate-limited nexmark tables, into a
// file sink: each auction's highest bid and bid count between its start and
// its expiry. With key, the auction's id is declared unique (PRIMARY KEY
// (id) NOT ENFORCED), so the GROUP BY closes each auction's group when the
// watermark passes its expiry and writes it once; without it the result is
// an updating one, a changelog.
func closingSQL(key bool) string {
	pk := ""
	if key {
		pk = "PRIMARY KEY (id) NOT ENFORCED,"
	}
	const opts = `nexmark.event.num = '20000', nexmark.min.event.gap.in.ns = '1000000', rate = '5000'`
	return fmt.Sprintf(`SET pipeline = 'sql-closing';
SET checkpoint.interval = '50ms';
SET checkpoint.dir = 'data/checkpoints';
SET checkpoint.retain = 2;
SET checkpoint.tolerable_failures = 1000;
SET restart.delay = '5ms';
SET restart.multiplier = 1;
SET restart.max_attempts = 1000;
CREATE SOURCE auction (id BIGINT, date_time TIMESTAMP, expires TIMESTAMP, category BIGINT, %s
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND)
  WITH (connector = 'nexmark', nexmark.table.type = 'Auction', %s);
CREATE SOURCE bid (auction BIGINT, price BIGINT, date_time TIMESTAMP,
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND)
  WITH (connector = 'nexmark', nexmark.table.type = 'Bid', %s);
CREATE SINK out AS
  SELECT A.id, A.category, max(B.price) AS final, count(*) AS bids
  FROM auction AS A JOIN bid AS B ON A.id = B.auction
  WHERE B.date_time BETWEEN A.date_time AND A.expires
  GROUP BY A.id, A.category
  WITH (connector = 'file', path = 'data/out', parallelism = 2);
`, pk, opts, opts)
}

// closingReference runs closingSQL(key) without failures and returns its
// committed lines, in the order they were committed (a changelog's rows of
// one key are in order).
func closingReference(t *testing.T, key bool) []string {
	t.Helper()
	dir := t.TempDir()
	fake := clock.NewFake(time.Unix(1_800_000_000, 0))
	job := fileJob(t, filepath.Join(dir, "p.sql"), closingSQL(key), func(opts *stream.RunOptions) { opts.Clock = fake })
	runStepped(t, job, fake, 50*time.Millisecond, 2*time.Minute)
	lines, err := testkit.ReadCommitted(filepath.Join(dir, "data", "out"))
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = string(l.Text)
	}
	return out
}

// TestSQLClosingGroupsAreExactAcrossFailures checks the GROUP BY that
// closes its groups (a join whose left side is declared unique): without
// failures, it writes each auction once, with the final values of the
// updating query the same SQL is without the declaration; failed inside the
// checkpoint protocol and in the middle of a batch, it commits exactly those
// rows, none lost or repeated.
func TestSQLClosingGroupsAreExactAcrossFailures(t *testing.T) {
	if testing.Short() {
		t.Skip("runs pipelines")
	}
	want := closingReference(t, true)
	if len(want) < 100 {
		t.Fatalf("the reference committed %d rows", len(want))
	}
	slices.Sort(want)
	// Once per auction, with the values the changelog ends at.
	if a := applied(want); len(a) != len(want) {
		t.Fatalf("%d rows of %d auctions: an auction was written more than once", len(want), len(a))
	}
	compareJoin(t, want, applied(closingReference(t, false)))
	for _, c := range []injectedFailure{
		{"task/after-snapshot-before-ack", []int64{4, 13}},
		{"job/after-metadata-before-commit", []int64{2, 4}},
		{"task/process-batch", []int64{7, 19}},
	} {
		t.Run(c.point, func(t *testing.T) {
			compareJoin(t, committedSorted(t, runSQLFailing(t, closingSQL(true), 50*time.Millisecond, c)), want)
		})
	}
}

// applied returns the rows a table holds once it applied lines in order, a
// changelog keyed by its first column (rows with an _op field; rows without
// are inserts), without _op, sorted.
func applied(lines []string) []string {
	final := map[string]string{}
	for _, l := range lines {
		id := l[:strings.Index(l, ",")]
		if strings.Contains(l, `"_op":"delete"`) {
			delete(final, id)
			continue
		}
		final[id] = strings.NewReplacer(`,"_op":"insert"`, "", `,"_op":"update"`, "").Replace(l)
	}
	out := make([]string, 0, len(final))
	for _, l := range final {
		out = append(out, l)
	}
	slices.Sort(out)
	return out
}
