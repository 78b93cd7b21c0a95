package metrics_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ingest-engine/ingest/metrics"
	"github.com/ingest-engine/ingest/stream"
)

func TestBadRecordCollector(t *testing.T) {
	counts := map[string]stream.BadRecordTally{"in": {Skipped: 3}, "files": {DeadLettered: 2}}
	c := metrics.NewBadRecordCollector("p", func() map[string]stream.BadRecordTally { return counts })
	want := `
# HELP ingest_source_bad_records_total Records a source could not decode and handled by its on_error policy: skipped, or sent to its dead-letter output.
# TYPE ingest_source_bad_records_total counter
ingest_source_bad_records_total{action="dead_lettered",pipeline="p",source="files"} 2
ingest_source_bad_records_total{action="dead_lettered",pipeline="p",source="in"} 0
ingest_source_bad_records_total{action="skipped",pipeline="p",source="files"} 0
ingest_source_bad_records_total{action="skipped",pipeline="p",source="in"} 3
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
	if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", problems, err)
	}
}
