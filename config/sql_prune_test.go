package config_test

import (
	"strings"
	"testing"

	"github.com/ingest-engine/ingest/config"
)

// A nexmark source generates only the columns the script names (and its
// event time); a * (but over a subquery, which reads what the subquery
// selects) or a sink written straight from the source reads them all. A column named anywhere — in a subquery's WHERE, a join's ON, a
// window function's ORDER BY, a TUMBLE's time column — is kept.
func TestSQLNexmarkSourceGeneratesTheColumnsRead(t *testing.T) {
	const bid = `CREATE SOURCE bid (auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, date_time TIMESTAMP, extra VARCHAR,
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND) WITH (connector = 'nexmark', nexmark.table.type = 'Bid', nexmark.event.num = '100');
`
	const all = "nexmark table bid (auction, bidder, price, channel, url, date_time, extra)"
	for _, c := range []struct{ name, script, want string }{
		{"a window's count", `CREATE SINK s AS SELECT auction, count(*) AS n, window_start FROM TUMBLE(bid, date_time, INTERVAL '10' SECOND)
  GROUP BY auction, window_start WITH (connector = 'stdout');`, "nexmark table bid (auction, date_time)"},
		{"star", `CREATE SINK s AS SELECT * FROM bid WITH (connector = 'stdout');`, all},
		{"a sink from the source", `CREATE SINK s FROM bid WITH (connector = 'stdout');`, all},
		{"star over a subquery reads what it selects", `CREATE SINK s AS
  SELECT auction, price FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC) AS rn FROM (SELECT auction, price FROM bid) AS b) AS t
  WHERE rn <= 1 WITH (connector = 'stdout');`, "nexmark table bid (auction, price, date_time)"},
		{"star over a subquery's star", `CREATE SINK s AS SELECT * FROM (SELECT * FROM bid) AS t WITH (connector = 'stdout');`, all},
		{"columns in a subquery's WHERE and in a window function's ORDER BY", `CREATE SINK s AS
  SELECT auction, rn FROM (SELECT auction, price, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC) AS rn FROM bid WHERE bidder > 3) AS t
  WHERE rn <= 1 WITH (connector = 'stdout');`, "nexmark table bid (auction, bidder, price, date_time)"},
		{"a join's ON", `CREATE SOURCE auction (id BIGINT, seller BIGINT, date_time TIMESTAMP, WATERMARK FOR date_time AS date_time)
  WITH (connector = 'nexmark', nexmark.table.type = 'Auction', nexmark.event.num = '100');
CREATE SINK s AS SELECT b.auction FROM bid AS b JOIN auction AS a ON a.id = b.auction AND a.seller = b.bidder
  WHERE b.date_time BETWEEN a.date_time AND a.date_time + INTERVAL '1' SECOND WITH (connector = 'stdout');`, "nexmark table bid (auction, bidder, date_time)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := config.ParseSQL("t.sql", []byte(bid+c.script))
			if err != nil {
				t.Fatal(err)
			}
			plan, err := p.Stream.Plan()
			if err != nil {
				t.Fatal(err)
			}
			if d := plan.Describe(); !strings.Contains(d, c.want+" of") {
				t.Fatalf("plan:\n%s\nwant %q", d, c.want)
			}
		})
	}
}
