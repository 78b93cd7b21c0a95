package metrics_test

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ingest-engine/ingest/metrics"
	"github.com/ingest-engine/ingest/runtime"
)

// A job's metrics on a Prometheus registry (the package documentation's
// snippet). (Compiled, not run.)
func ExampleNewCollector() {
	var job *runtime.Job // from stream.Pipeline.NewJob or config
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewCollector(job))
}
