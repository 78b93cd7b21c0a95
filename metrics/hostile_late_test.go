package metrics_test

import (
	"testing"

	"github.com/ingest-engine/ingest/metrics"
	"github.com/ingest-engine/ingest/runtime"
)

// ingest_late_records_total{operator} is there for every operator that can
// drop late records before the job has run (at 0, so that increase() and
// absence alerts work from the start), and carries the job's live count.
//
// Defends "A restart must not lose accepted data": records dropped as late
// are never dropped silently (#12 item 4b).
func TestHostileLateRecordsExported(t *testing.T) {
	job := windowJob(t, 100, 0)
	mfs := gather(t, metrics.NewCollector(job))
	if v, ok := value(mfs, "ingest_late_records_total", "pipeline", "metrics", "operator", "per_key"); !ok || v != 0 {
		t.Fatalf("before Run: ingest_late_records_total{operator=per_key} = %v (present %v), want 0", v, ok)
	}
	if n := len(mfs["ingest_late_records_total"].GetMetric()); n != 1 {
		t.Errorf("%d samples of ingest_late_records_total, want 1 (only the window drops late records)", n)
	}

	o := runtime.Observation{Pipeline: "p", LateRecords: map[string]int64{"w": 4881, "j": 0}}
	mfs = gather(t, metrics.NewCollector(fakeJob{o}))
	for op, want := range map[string]float64{"w": 4881, "j": 0} {
		if got := must(t, mfs, "ingest_late_records_total", "operator", op); got != want {
			t.Errorf("ingest_late_records_total{operator=%s} = %v, want %v", op, got, want)
		}
	}
}
