package config_test

import (
	"strings"
	"testing"

	"github.com/ingest-engine/ingest/config"
)

// shapes the rewrite must leave to the join (or to its
// refusal): HOP and SESSION aggregates, a processing-time TUMBLE, an
// aggregate over the unfiltered source joined to a filtered view of it, a
// window whose size is not the bound's, a NOT BETWEEN, an OR, a bound on
// another column, a count, a max of another column than the one matched.
func TestWindowTopShapesLeftToTheJoin(t *testing.T) {
	head := `CREATE SOURCE events (id BIGINT, key BIGINT, value BIGINT, pt TIMESTAMP AS PROCTIME()) WITH (connector = 'datagen', count = 100, keys = 7);
CREATE VIEW odd AS SELECT id, key, value FROM events WHERE id % 2 = 1;
`
	b := " WHERE c.event_time BETWEEN w.e - INTERVAL '30 milliseconds' AND w.e"
	for _, c := range []struct{ name, q string }{
		{"hop", "SELECT c.id FROM events AS c JOIN (SELECT max(key) AS m, window_end AS e FROM HOP(events, event_time, INTERVAL '10 milliseconds', INTERVAL '30 milliseconds') GROUP BY window_end) AS w ON c.key = w.m" + b},
		{"session", "SELECT c.id FROM events AS c JOIN (SELECT max(key) AS m, window_end AS e FROM SESSION(events, event_time, INTERVAL '30 milliseconds') GROUP BY window_end) AS w ON c.key = w.m" + b},
		{"processing time", "SELECT c.id FROM events AS c JOIN (SELECT max(key) AS m, window_end AS e FROM TUMBLE(events, pt, INTERVAL '30 milliseconds') GROUP BY window_end) AS w ON c.key = w.m" + b},
		{"filtered side", "SELECT c.id FROM odd AS c JOIN (SELECT max(key) AS m, window_end AS e FROM TUMBLE(events, event_time, INTERVAL '30 milliseconds') GROUP BY window_end) AS w ON c.key = w.m" + b},
		{"other size", "SELECT c.id FROM events AS c JOIN (SELECT max(key) AS m, window_end AS e FROM TUMBLE(events, event_time, INTERVAL '20 milliseconds') GROUP BY window_end) AS w ON c.key = w.m" + b},
		{"not between", "SELECT c.id FROM events AS c JOIN (SELECT max(key) AS m, window_end AS e FROM TUMBLE(events, event_time, INTERVAL '30 milliseconds') GROUP BY window_end) AS w ON c.key = w.m WHERE c.event_time NOT BETWEEN w.e - INTERVAL '30 milliseconds' AND w.e"},
		{"or", "SELECT c.id FROM events AS c JOIN (SELECT max(key) AS m, window_end AS e FROM TUMBLE(events, event_time, INTERVAL '30 milliseconds') GROUP BY window_end) AS w ON c.key = w.m OR c.value = w.m" + b},
		{"max of another column", "SELECT c.id FROM events AS c JOIN (SELECT max(value) AS m, window_end AS e FROM TUMBLE(events, event_time, INTERVAL '30 milliseconds') GROUP BY window_end) AS w ON c.key = w.m" + b},
		{"no lower bound", "SELECT c.id FROM events AS c JOIN (SELECT max(key) AS m, window_end AS e FROM TUMBLE(events, event_time, INTERVAL '30 milliseconds') GROUP BY window_end) AS w ON c.key = w.m WHERE c.event_time <= w.e"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := config.Load(writeFile(t, "q.sql", head+"CREATE SINK out AS "+c.q+"\n  WITH (connector = 'file', path = 'out');\n"))
			if err != nil {
				if strings.Contains(err.Error(), "window_top") {
					t.Fatalf("refused by window_top: %v", err)
				}
				t.Logf("refused (as a join): %v", err)
				return
			}
			plan, err := p.Stream.Plan()
			if err != nil {
				t.Fatal(err)
			}
			if d := plan.Describe(); strings.Contains(d, "rows at the") {
				t.Fatalf("planned as window_top:\n%s", d)
			}
		})
	}
}
