package config_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// reviewUntilT0 is the base of the review's hand-made event times.
var reviewUntilT0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func reviewTS(d time.Duration) string { return reviewUntilT0.Add(d).Format(time.RFC3339Nano) }

// reviewUntilFiles writes auctions.jsonl and bids.jsonl into dir.
func reviewUntilFiles(t *testing.T, dir string, auctions, bids []string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "auctions.jsonl"), []byte(strings.Join(auctions, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bids.jsonl"), []byte(strings.Join(bids, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// reviewUntilFileHead declares file sources of auctions and bids.
const reviewUntilFileHead = `SET checkpoint.interval = '50ms';
SET checkpoint.dir = 'ckpts';
CREATE SOURCE auction (id BIGINT, date_time TIMESTAMP, expires TIMESTAMP, category BIGINT,
  WATERMARK FOR date_time AS date_time - INTERVAL '1' SECOND)
  WITH (connector = 'file', path = 'auctions.jsonl', stop_at = 'latest') FORMAT PLAIN ENCODE JSON;
CREATE SOURCE bid (auction BIGINT, price BIGINT, date_time TIMESTAMP,
  WATERMARK FOR date_time AS date_time - INTERVAL '1' SECOND)
  WITH (connector = 'file', path = 'bids.jsonl', stop_at = 'latest') FORMAT PLAIN ENCODE JSON;
`

// reviewUntilRun writes the data and script into a fresh directory, runs it
// and returns the committed rows (sorted).
func reviewUntilRun(t *testing.T, auctions, bids []string, script string) []string {
	t.Helper()
	dir := t.TempDir()
	reviewUntilFiles(t, dir, auctions, bids)
	path := filepath.Join(dir, "q.sql")
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	return runAndRead(t, path)
}

// reviewUntilCompare runs the until query (upper bound A.expires) and its
// reference (A.expires + INTERVAL '0' SECOND, an inner join) over the same
// files and compares the committed rows.
func reviewUntilCompare(t *testing.T, auctions, bids []string, head, query func(upper string) string, wantPlan string) {
	t.Helper()
	reviewUntilCompareLate(t, auctions, bids, head, head, query, wantPlan, nil, 0)
}

// reviewUntilCompareLate is reviewUntilCompare with the reference's own
// head, and late rows: the reference's rows for which late says true, n
// of them, are missing from the until join's (it drops records behind the
// watermark, as every interval join does; the inner join kept everything).
func reviewUntilCompareLate(t *testing.T, auctions, bids []string, head, refHead, query func(upper string) string, wantPlan string, late func(string) bool, n int) {
	t.Helper()
	until, ref := head("")+query("A.expires"), refHead("")+query("A.expires + INTERVAL '0' SECOND")
	if wantPlan != "" {
		if d := planOf(t, until); !strings.Contains(d, wantPlan) {
			t.Fatalf("until plan:\n%s\nwant %q", d, wantPlan)
		}
	}
	if d := planOf(t, ref); !strings.Contains(d, "inner join") {
		t.Fatalf("reference plan:\n%s\nwant an inner join", d)
	}
	got := reviewUntilRun(t, auctions, bids, until)
	want := reviewUntilRun(t, auctions, bids, ref)
	if late != nil {
		var kept []string
		for _, l := range want {
			if !late(l) {
				kept = append(kept, l)
			}
		}
		if len(want)-len(kept) != n {
			t.Fatalf("the reference has %d late rows, want %d", len(want)-len(kept), n)
		}
		want = kept
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		missing, extra := diffLines(want, got)
		t.Fatalf("until plan committed %d rows, reference %d\nonly in reference (%d): %v\nonly in until (%d): %v",
			len(got), len(want), len(missing), head2(missing, 6), len(extra), head2(extra, 6))
	}
	if len(got) == 0 && n == 0 {
		t.Fatal("no rows: proves nothing")
	}
	t.Logf("%d rows alike", len(got))
}

func head2(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

func fileHead(string) string { return reviewUntilFileHead }

// A bid that arrives after the watermark passed it (out of order by more
// than the declared delay) is joined by the inner join the planner made
// before (ttl 0: it never drops anything, and keeps everything), and
// dropped as late by the interval join, as every interval join drops it:
// exactly its row is missing.
func TestUntilJoinDropsALateBid(t *testing.T) {
	if testing.Short() {
		t.Skip("runs pipelines")
	}
	var auctions, bids []string
	for id := 1; id <= 50; id++ {
		at := time.Duration(id) * time.Second
		auctions = append(auctions, fmt.Sprintf(`{"id":%d,"date_time":%q,"expires":%q,"category":%d}`, id, reviewTS(at), reviewTS(at+30*time.Second), id%3))
	}
	// Far ahead: the auctions' watermark does not hold the join back.
	auctions = append(auctions, fmt.Sprintf(`{"id":9999,"date_time":%q,"expires":%q,"category":0}`, reviewTS(time.Hour), reviewTS(time.Hour)))
	for i := 0; i < 20000; i++ {
		bids = append(bids, fmt.Sprintf(`{"auction":%d,"price":%d,"date_time":%q}`, 1+i%50, i, reviewTS(time.Duration(i)*5*time.Millisecond)))
	}
	// The late bid: auction 49 runs [49s, 79s]; the bids' watermark is at
	// ~99s when it comes.
	bids = append(bids, fmt.Sprintf(`{"auction":49,"price":777777,"date_time":%q}`, reviewTS(50*time.Second)))
	query := func(upper string) string {
		return `CREATE SINK out AS
  SELECT A.id, B.price, B.date_time FROM auction AS A JOIN bid AS B ON A.id = B.auction
  WHERE B.date_time BETWEEN A.date_time AND ` + upper + `
  WITH (connector = 'file', path = 'out');
`
	}
	reviewUntilCompareLate(t, auctions, bids, fileHead, fileHead, query, "interval join [0s, left expires]",
		func(l string) bool { return strings.Contains(l, `"price":777777`) }, 1)
}

// SET join.ttl bounds an inner join's state (a pair joins when |l.t - r.t|
// < ttl), not an interval join's, which its bounds bound: with a ttl
// shorter than an auction's life the query commits the pairs SQL means,
// those of the inner join without a ttl (the inner join with the ttl, the
// plan before, left out the pairs 3 s apart or more).
func TestUntilJoinIgnoresJoinTTL(t *testing.T) {
	if testing.Short() {
		t.Skip("runs pipelines")
	}
	auctions, bids := reviewShapeData()
	head := func(string) string { return "SET join.ttl = '3s';\n" + reviewUntilFileHead }
	query := func(upper string) string {
		return `CREATE SINK out AS SELECT A.id, B.price FROM auction AS A JOIN bid AS B ON A.id = B.auction
  WHERE B.date_time BETWEEN A.date_time AND ` + upper + "\n  WITH (connector = 'file', path = 'out');\n"
	}
	if d := planOf(t, head("")+query("A.expires + INTERVAL '0' SECOND")); !strings.Contains(d, "state ttl 3s") {
		t.Fatalf("the ttl'd inner join's plan:\n%s", d)
	}
	reviewUntilCompareLate(t, auctions, bids, head, fileHead, query, "interval join [0s, left expires]", nil, 0)
}

// An auction that arrives after the watermark passed its start (out of
// order by more than the declared delay) is joined with its bids by the
// inner join, and dropped as late by the interval join: its 700 rows are
// missing, the others alike.
func TestUntilJoinDropsALateAuction(t *testing.T) {
	if testing.Short() {
		t.Skip("runs pipelines")
	}
	var auctions, bids []string
	// 20,000 auctions over [0s, 60s) (ids 1000 on, none with bids), then
	// auction 30, started at 30s and open for an hour: the auctions'
	// watermark is at ~59s when it comes.
	for i := 0; i < 20000; i++ {
		at := time.Duration(i) * 3 * time.Millisecond
		auctions = append(auctions, fmt.Sprintf(`{"id":%d,"date_time":%q,"expires":%q,"category":1}`, 1000+i, reviewTS(at), reviewTS(at+time.Second)))
	}
	auctions = append(auctions, fmt.Sprintf(`{"id":30,"date_time":%q,"expires":%q,"category":0}`, reviewTS(30*time.Second), reviewTS(30*time.Second+time.Hour)))
	// Bids of auction 30 over [30s, 100s): the bids end early, and those
	// after the auctions' watermark wait in the join for auction 30.
	for i := 0; i < 700; i++ {
		bids = append(bids, fmt.Sprintf(`{"auction":30,"price":%d,"date_time":%q}`, i, reviewTS(30*time.Second+time.Duration(i)*100*time.Millisecond)))
	}
	query := func(upper string) string {
		return `CREATE SINK out AS
  SELECT A.id, B.price FROM auction AS A JOIN bid AS B ON A.id = B.auction
  WHERE B.date_time BETWEEN A.date_time AND ` + upper + `
  WITH (connector = 'file', path = 'out');
`
	}
	reviewUntilCompareLate(t, auctions, bids, fileHead, fileHead, query, "interval join [0s, left expires]",
		func(l string) bool { return strings.Contains(l, `"id":30,`) }, 700)
}

// Out of order within the declared delay (1s) on both sides: nothing is
// late, and the until join commits the reference's rows.
func TestUntilOutOfOrderWithinDelay(t *testing.T) {
	if testing.Short() {
		t.Skip("runs pipelines")
	}
	auctions, bids := reviewShapeData()
	// Swap neighbours in blocks: each record moves by less than 1s.
	for i := 0; i+1 < len(bids); i += 2 {
		if i%6 == 0 {
			bids[i], bids[i+1] = bids[i+1], bids[i]
		}
	}
	for i := 0; i+1 < len(bids); i += 40 {
		bids[i], bids[min(i+37, len(bids)-1)] = bids[min(i+37, len(bids)-1)], bids[i]
	}
	for i := 0; i+1 < len(auctions); i += 3 {
		// neighbouring auctions are 1.5s apart: keep within 1s by swapping
		// only the same-id pairs' extra auctions (100ms apart)
		_ = i
	}
	query := func(upper string) string {
		return `CREATE SINK out AS
  SELECT A.id, A.category, B.price FROM auction AS A JOIN bid AS B ON A.id = B.auction
  WHERE B.date_time BETWEEN A.date_time AND ` + upper + `
  WITH (connector = 'file', path = 'out');
`
	}
	reviewUntilCompare(t, auctions, bids, fileHead, query, "interval join [0s, left expires]")
}
