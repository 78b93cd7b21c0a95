package config_test

import (
	"strings"
	"testing"

	"github.com/ingest-engine/ingest/config"
)

// untilHead declares Nexmark's auctions and bids over 20,000 events.
const untilHead = `SET checkpoint.interval = '50ms';
SET checkpoint.dir = 'ckpts';
CREATE SOURCE auction (id BIGINT, date_time TIMESTAMP, expires TIMESTAMP, category BIGINT,
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND)
  WITH (connector = 'nexmark', nexmark.table.type = 'Auction', nexmark.event.num = '20000');
CREATE SOURCE bid (auction BIGINT, price BIGINT, date_time TIMESTAMP,
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND)
  WITH (connector = 'nexmark', nexmark.table.type = 'Bid', nexmark.event.num = '20000');
`

// A join whose right time is bounded above by a time column of the left
// side (q4's bids between an auction's start and its expiry) is an interval
// join whose upper bound is each left row's own: the watermark frees an
// auction at its expiry and a bid at its time, where an inner join kept
// both forever. It commits exactly the inner join's rows (the same query
// with the bound written so that the planner does not recognise it).
func TestSQLJoinUntilALeftColumn(t *testing.T) {
	if testing.Short() {
		t.Skip("runs pipelines")
	}
	query := func(upper string) string {
		return untilHead + `CREATE SINK out AS
  SELECT A.id, A.category, B.price, B.date_time
  FROM auction AS A JOIN bid AS B ON A.id = B.auction
  WHERE B.date_time BETWEEN A.date_time AND ` + upper + `
  WITH (connector = 'file', path = 'out');
`
	}
	until, inner := query("A.expires"), query("A.expires + INTERVAL '0' SECOND")
	if d := planOf(t, until); !strings.Contains(d, "interval join [0s, left expires]") {
		t.Fatalf("plan:\n%s\nwant an interval join bounded by expires", d)
	}
	if d := planOf(t, inner); !strings.Contains(d, "inner join, records kept forever") {
		t.Fatalf("the reference's plan:\n%s\nwant an inner join", d)
	}
	got := runAndRead(t, writeFile(t, "until.sql", until))
	want := runAndRead(t, writeFile(t, "inner.sql", inner))
	if len(want) < 100 || strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the interval join committed %d rows, the inner join %d:\ninterval %v\ninner    %v", len(got), len(want), first(got), first(want))
	}
	t.Logf("%d rows alike", len(got))
}

// upper: left.<field> must name a time field of the left input.
func TestJoinUpperFieldRefusals(t *testing.T) {
	head := "pipeline: j\nsources:\n  a: {type: datagen, count: 10}\n  b: {type: datagen, count: 10}\ntransforms:\n"
	for _, c := range []struct{ name, upper, want string }{
		{"no such field", "left.expires", `transforms.j.upper: "left.expires": want a duration or left.<a time field of input a>`},
		{"not a time", "left.id", `"left.id": want a duration or left.<a time field of input a>`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := config.Load(writeFile(t, "p.yaml", head+"  j: {type: join, kind: interval, left: a, right: b, on: key, lower: 0s, upper: "+c.upper+
				", select: {id: left.id}}\nsinks:\n  out: {type: stdout, input: j}\n"))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want %q", err, c.want)
			}
		})
	}
}
