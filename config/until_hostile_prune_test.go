package config_test

import (
	"strings"
	"testing"
)

// reviewPruneCompare runs script (whose nexmark sources the planner prunes
// to the columns it names) and the same script with a sink written
// straight from each source (which makes them generate every column), and
// compares what sink out commits.
func reviewPruneCompare(t *testing.T, script, wantDescribe string, sources ...string) {
	t.Helper()
	if d := planOf(t, script); !strings.Contains(d, wantDescribe) {
		t.Fatalf("plan:\n%s\nwant %q", d, wantDescribe)
	}
	full := script
	for _, s := range sources {
		full += "CREATE SINK all_" + s + " FROM " + s + " WITH (connector = 'blackhole');\n"
	}
	if d := planOf(t, full); strings.Contains(d, wantDescribe) {
		t.Fatalf("the reference is pruned too:\n%s", d)
	}
	got := runAndRead(t, writeFile(t, "pruned.sql", script))
	want := runAndRead(t, writeFile(t, "full.sql", full))
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		missing, extra := diffLines(want, got)
		t.Fatalf("pruned %d rows, full %d\nonly full: %v\nonly pruned: %v", len(got), len(want), head(missing, 4), head(extra, 4))
	}
	if len(got) == 0 {
		t.Fatal("no rows")
	}
	t.Logf("%d rows alike", len(got))
}

const reviewPruneHead = `SET checkpoint.interval = '50ms';
SET checkpoint.dir = 'ckpts';
CREATE SOURCE bid WITH (connector = 'nexmark', nexmark.table.type = 'Bid', nexmark.event.num = '5000');
CREATE SOURCE auction WITH (connector = 'nexmark', nexmark.table.type = 'Auction', nexmark.event.num = '5000');
CREATE SOURCE person WITH (connector = 'nexmark', nexmark.table.type = 'Person', nexmark.event.num = '5000');
`

// A pruned source's rows are the full source's, column for column: a
// bid without its extra drawn, auctions and people, through views over
// views, a join (the until join, over the pruned expires) and a window.
func TestPruneSameRows(t *testing.T) {
	if testing.Short() {
		t.Skip("runs pipelines")
	}
	for _, c := range []struct{ name, script, describe string }{
		{"bid without extra", `CREATE SINK out AS SELECT auction, bidder, price, date_time FROM bid WHERE price % 7 = 1
  WITH (connector = 'file', path = 'out');
`, "nexmark table bid (auction, bidder, price, date_time)"},
		{"bid with extra, named in a view of a view", `CREATE VIEW v1 AS SELECT auction, price, extra AS x FROM bid;
CREATE VIEW v2 AS SELECT auction, x FROM v1 WHERE price % 5 = 0;
CREATE SINK out FROM v2 WITH (connector = 'file', path = 'out');
`, "nexmark table bid (auction, price, date_time, extra)"},
		{"people", `CREATE SINK out AS SELECT id, name, city FROM person WITH (connector = 'file', path = 'out');
`, "nexmark table person (id, name, city, date_time)"},
		{"until join", `CREATE SINK out AS SELECT A.id, A.seller, B.price FROM auction AS A JOIN bid AS B ON A.id = B.auction
  WHERE B.date_time BETWEEN A.date_time AND A.expires WITH (connector = 'file', path = 'out');
`, "nexmark table auction (id, date_time, expires, seller)"},
		{"window", `CREATE SINK out AS SELECT auction, count(*) AS n, max(price) AS p, window_start FROM TUMBLE(bid, date_time, INTERVAL '2' SECOND)
  GROUP BY auction, window_start WITH (connector = 'file', path = 'out');
`, "nexmark table bid (auction, price, date_time)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			reviewPruneCompare(t, reviewPruneHead+c.script, c.describe, "bid", "auction", "person")
		})
	}
}
