package config_test

import (
	"strings"
	"testing"

	"github.com/ingest-engine/ingest/config"
)

// EXPLAIN of the q4 join, and a sink whose key option names a column read
// only through a view of a source: the plans load, show the until join and
// keep the columns the sink's key names.
func TestUntilExplainAndSinkKey(t *testing.T) {
	for _, c := range []struct {
		name, script string
		want         []string
	}{
		{"explain", untilHead + `EXPLAIN CREATE SINK out AS
  SELECT A.id, B.price FROM auction AS A JOIN bid AS B ON A.id = B.auction
  WHERE A.expires >= B.date_time AND B.date_time >= A.date_time
  WITH (connector = 'file', path = 'out');
`, []string{"interval join [0s, left expires]", "nexmark table auction (id, date_time, expires)", "nexmark table bid (auction, price, date_time)"}},
		{"kafka key through a view", untilHead + `CREATE VIEW v AS SELECT A.id, A.category, B.price FROM auction AS A JOIN bid AS B ON A.id = B.auction
  WHERE B.date_time BETWEEN A.date_time AND A.expires;
CREATE SINK out FROM v WITH (connector = 'kafka', brokers = 'localhost:1', topic = 't', transactional_id_prefix = 'x', key = 'category');
`, []string{"interval join [0s, left expires]", "nexmark table auction (id, date_time, expires, category)"}},
		{"explain select", untilHead + `EXPLAIN SELECT A.id FROM auction AS A JOIN bid AS B ON A.id = B.auction
  WHERE B.date_time BETWEEN A.date_time AND A.expires;
`, []string{"interval join [0s, left expires]", "nexmark table bid (auction, date_time)"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := config.Load(writeFile(t, "q.sql", c.script))
			if err != nil {
				t.Fatal(err)
			}
			plan, err := p.Stream.Plan()
			if err != nil {
				t.Fatal(err)
			}
			d := plan.Describe()
			for _, w := range c.want {
				if !strings.Contains(d, w) {
					t.Fatalf("plan:\n%s\nwant %q", d, w)
				}
			}
		})
	}
}
