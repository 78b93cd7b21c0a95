package pgcdc

import (
	"testing"

	"github.com/ingest-engine/ingest/row"
)

// TestBeforeImagesRemedyStartOver follows the remedy the before_images
// error names (REPLICA IDENTITY FULL, then start over without
// checkpoints). Starting over keeps the slot, so the stream replays the
// update that stopped the first job; the new snapshot holds it, so it is
// dropped rather than refused again for its missing old row (found in
// review: the refusal came before the snapshot check).
func TestBeforeImagesRemedyStartOver(t *testing.T) {
	f := newFixture(t)
	f.items("a", 2)
	a := f.quoted("a")
	f.exec("ALTER TABLE " + a + " REPLICA IDENTITY FULL")
	cfg := f.config("a")
	cfg.BeforeImages = true
	r := f.streaming(cfg, 2)
	f.exec("ALTER TABLE " + a + " REPLICA IDENTITY DEFAULT")
	f.exec("UPDATE " + a + " SET v = 'w2' WHERE id = 1")
	r.failsAtOnce("without its whole old row", "start over without checkpoints")

	// The remedy: FULL again, a new job without the checkpoints.
	f.exec("ALTER TABLE " + a + " REPLICA IDENTITY FULL")
	r2 := start(t, newSource(t, cfg), t.TempDir())
	r2.waitFor("the new snapshot", func(recs []row.Row) bool { return len(recs) >= 2 })
	r2.waitLog(logStreaming, 1)
	f.exec("UPDATE " + a + " SET v = 'w3' WHERE id = 2")
	recs := r2.waitFor("an update after starting over", r2.has("update", "v", row.StringValue("w3")))
	if got := r2.field(recs[0], "v"); recs[0] == nil || r2.field(recs[0], "id") != row.IntValue(1) || got != row.StringValue("w2") {
		t.Errorf("the new snapshot's first row: %s, want id 1 v w2", r2.dump(recs[:1]))
	}
}
