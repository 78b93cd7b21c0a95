package config_test

import (
	"fmt"
	"testing"
	"time"
)

// reviewShapeData is in-order auctions and bids with the hostile values: a
// NULL expiry, an expiry before the start, an expiry equal to the start,
// two auctions with one id, bids exactly at an auction's start and expiry,
// bids of no auction.
func reviewShapeData() (auctions, bids []string) {
	for id := 1; id <= 40; id++ {
		start := time.Duration(id) * 1500 * time.Millisecond
		exp := fmt.Sprintf("%q", reviewTS(start+time.Duration(id%4+1)*2*time.Second))
		switch {
		case id%7 == 0:
			exp = "null"
		case id%5 == 0:
			exp = fmt.Sprintf("%q", reviewTS(start-time.Second))
		case id%6 == 0:
			exp = fmt.Sprintf("%q", reviewTS(start))
		}
		auctions = append(auctions, fmt.Sprintf(`{"id":%d,"date_time":%q,"expires":%s,"category":%d}`, id, reviewTS(start), exp, id%3))
		if id%8 == 0 { // a second auction with the same id, later
			auctions = append(auctions, fmt.Sprintf(`{"id":%d,"date_time":%q,"expires":%q,"category":%d}`, id-4, reviewTS(start+100*time.Millisecond), reviewTS(start+3*time.Second), 7))
		}
	}
	for i := 0; i < 7000; i++ {
		// every 10ms: hits each auction's start and expiry instants
		bids = append(bids, fmt.Sprintf(`{"auction":%d,"price":%d,"date_time":%q}`, 1+i%45, i, reviewTS(time.Duration(i)*10*time.Millisecond)))
	}
	return auctions, bids
}

// The same query planned as the until join and as the reference inner
// join commits the same rows, in every shape of the SQL the planner
// recognises (and in the shapes it leaves to the inner join).
func TestUntilShapesEqualTheInnerJoin(t *testing.T) {
	if testing.Short() {
		t.Skip("runs pipelines")
	}
	auctions, bids := reviewShapeData()
	const sink = "\n  WITH (connector = 'file', path = 'out');\n"
	for _, c := range []struct {
		name, plan string
		head       func(string) string
		query      func(upper string) string
	}{
		{"between", "interval join [0s, left expires]", fileHead, func(u string) string {
			return `CREATE SINK out AS SELECT A.id, A.category, B.price, B.date_time FROM auction AS A JOIN bid AS B ON A.id = B.auction
  WHERE B.date_time BETWEEN A.date_time AND ` + u + sink
		}},
		{"written the other way round", "interval join [0s, left expires]", fileHead, func(u string) string {
			return `CREATE SINK out AS SELECT A.id, B.price FROM auction AS A JOIN bid AS B ON A.id = B.auction
  WHERE A.date_time <= B.date_time AND ` + u + ` >= B.date_time` + sink
		}},
		{"lower bound in ON, negative", "interval join [-2s, left expires]", fileHead, func(u string) string {
			if u != "A.expires" {
				// (the old planner refuses a one-way bound in ON: the
				// reference has it in WHERE)
				return `CREATE SINK out AS SELECT A.id, B.price FROM auction AS A JOIN bid AS B
  ON A.id = B.auction WHERE B.date_time >= A.date_time - INTERVAL '2' SECOND AND B.date_time <= ` + u + sink
			}
			return `CREATE SINK out AS SELECT A.id, B.price FROM auction AS A JOIN bid AS B
  ON A.id = B.auction AND B.date_time >= A.date_time - INTERVAL '2' SECOND WHERE B.date_time <= ` + u + sink
		}},
		{"positive lower bound and an extra ON condition", "interval join [500ms, left expires]", fileHead, func(u string) string {
			return `CREATE SINK out AS SELECT A.id, B.price FROM auction AS A JOIN bid AS B
  ON A.id = B.auction AND B.price % 3 <> A.category WHERE B.date_time <= ` + u + ` AND B.date_time >= A.date_time + INTERVAL '500 milliseconds'` + sink
		}},
		{"two lower bounds", "interval join [0s, left expires]", fileHead, func(u string) string {
			return `CREATE SINK out AS SELECT A.id, B.price FROM auction AS A JOIN bid AS B ON A.id = B.auction
  WHERE B.date_time >= A.date_time AND B.date_time >= A.date_time + INTERVAL '300 milliseconds' AND B.date_time <= ` + u + sink
		}},
		{"both sides' same-named columns", "interval join [0s, left expires]", fileHead, func(u string) string {
			return `CREATE SINK out AS SELECT A.id, A.date_time AS adt, B.date_time AS bdt, ` + "A.expires AS ex" + ` FROM auction AS A JOIN bid AS B ON A.id = B.auction
  WHERE B.date_time BETWEEN A.date_time AND ` + u + sink
		}},
		{"no aliases", "interval join [0s, left expires]", fileHead, func(u string) string {
			u = map[string]string{"A.expires": "auction.expires", "A.expires + INTERVAL '0' SECOND": "auction.expires + INTERVAL '0' SECOND"}[u]
			return `CREATE SINK out AS SELECT id, price FROM auction JOIN bid ON auction.id = bid.auction
  WHERE bid.date_time BETWEEN auction.date_time AND ` + u + sink
		}},
		{"swapped sides (bid JOIN auction)", "", fileHead, func(u string) string {
			return `CREATE SINK out AS SELECT A.id, B.price FROM bid AS B JOIN auction AS A ON B.auction = A.id
  WHERE B.date_time BETWEEN A.date_time AND ` + u + sink
		}},
		{"views over views", "interval join [0s, left ends]", func(string) string {
			return reviewUntilFileHead + `CREATE VIEW a1 AS SELECT * FROM auction WHERE category <> 2;
CREATE VIEW a2 AS SELECT id, date_time, expires AS ends, category FROM a1;
CREATE VIEW b1 AS SELECT auction, price, date_time FROM bid WHERE price % 2 = 0;
`
		}, func(u string) string {
			u = map[string]string{"A.expires": "A.ends", "A.expires + INTERVAL '0' SECOND": "A.ends + INTERVAL '0' SECOND"}[u]
			return `CREATE SINK out AS SELECT A.id, B.price FROM a2 AS A JOIN b1 AS B ON A.id = B.auction
  WHERE B.date_time BETWEEN A.date_time AND ` + u + sink
		}},
		{"subquery sides", "interval join [0s, left expires]", fileHead, func(u string) string {
			return `CREATE SINK out AS SELECT A.id, B.price FROM (SELECT id, date_time, expires FROM auction WHERE id > 3) AS A
  JOIN (SELECT auction, price, date_time FROM bid) AS B ON A.id = B.auction
  WHERE B.date_time BETWEEN A.date_time AND ` + u + sink
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			reviewUntilCompare(t, auctions, bids, c.head, c.query, c.plan)
		})
	}
}
