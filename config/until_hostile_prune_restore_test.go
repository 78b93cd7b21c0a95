package config_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/config"
)

// A script edited between a stop and a restart: a second sink reading
// another declared column of the bid source. A nexmark source generates
// the columns the script names, so the bid rows gain a column, the join's
// record codec (which names the fields) changes, and the restart refuses
// the checkpoint, naming the fields, rather than read the old rows at the
// new fields' positions (docs/sql.md says so).
func TestPrunedSourceEditedScriptRefusesTheCheckpoint(t *testing.T) {
	if testing.Short() {
		t.Skip("runs pipelines")
	}
	head := `SET checkpoint.interval = '40ms';
SET checkpoint.dir = 'ckpts';
CREATE SOURCE auction (id BIGINT, date_time TIMESTAMP, expires TIMESTAMP, category BIGINT,
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND)
  WITH (connector = 'nexmark', nexmark.table.type = 'Auction', nexmark.event.num = '20000', rate = '12000');
CREATE SOURCE bid (auction BIGINT, bidder BIGINT, price BIGINT, date_time TIMESTAMP,
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND)
  WITH (connector = 'nexmark', nexmark.table.type = 'Bid', nexmark.event.num = '20000', rate = '12000');
CREATE SINK out AS
  SELECT A.id, B.price FROM auction AS A JOIN bid AS B ON A.id = B.auction
  WHERE B.date_time BETWEEN A.date_time AND A.date_time + INTERVAL '10' SECOND
  WITH (connector = 'file', path = 'out');
`
	second := `CREATE SINK out2 AS SELECT bidder FROM bid WHERE price > 1000000 WITH (connector = 'file', path = 'out2');
`
	dir := t.TempDir()
	path := filepath.Join(dir, "q.sql")
	for i, script := range []string{head, head + second} {
		if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
			t.Fatal(err)
		}
		p, err := config.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if i == 0 {
			// Stopped once a checkpoint completed (the run takes about
			// 1.7 s of its rate-limited events).
			ctx, cancel = context.WithCancel(context.Background())
			go func() {
				for ctx.Err() == nil {
					if m, _ := filepath.Glob(filepath.Join(dir, "ckpts", "chk-*", "_metadata")); len(m) > 0 {
						cancel()
						return
					}
					time.Sleep(10 * time.Millisecond)
				}
			}()
		}
		err = p.Stream.Run(ctx, p.RunOptions())
		cancel()
		if i == 1 {
			if err == nil || !strings.Contains(err.Error(), "checkpoint incompatible with the pipeline") ||
				!strings.Contains(err.Error(), "auction int, price int, date_time time") {
				t.Fatalf("the edited script's run: %v; want the checkpoint refused, naming the rows' fields", err)
			}
			return
		}
		if err == nil {
			t.Fatal("the first run ended before a checkpoint completed")
		}
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("run %d: %v", i, err)
		}
	}
}
