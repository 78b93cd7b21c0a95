package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ingest-engine/ingest/stream"
)

// badRecords is ingest_source_bad_records_total.
var badRecords = desc("ingest_source_bad_records_total",
	"Records a source could not decode and handled by its on_error policy: skipped, or sent to its dead-letter output.",
	"source", "action")

// BadRecordCollector is a prometheus.Collector of the bad-record counts of a
// pipeline's sources (on_error: skip | dead_letter; stream.OnBadRecords).
type BadRecordCollector struct {
	pipeline string
	counts   func() map[string]stream.BadRecordTally
}

// NewBadRecordCollector returns a collector of counts, labelled with the
// pipeline's name; counts is usually stream.Pipeline.BadRecordCounts.
func NewBadRecordCollector(pipeline string, counts func() map[string]stream.BadRecordTally) *BadRecordCollector {
	return &BadRecordCollector{pipeline: pipeline, counts: counts}
}

// Describe implements prometheus.Collector.
func (c *BadRecordCollector) Describe(ch chan<- *prometheus.Desc) { ch <- badRecords }

// Collect implements prometheus.Collector.
func (c *BadRecordCollector) Collect(ch chan<- prometheus.Metric) {
	for source, t := range c.counts() {
		ch <- prometheus.MustNewConstMetric(badRecords, prometheus.CounterValue, float64(t.Skipped), c.pipeline, source, "skipped")
		ch <- prometheus.MustNewConstMetric(badRecords, prometheus.CounterValue, float64(t.DeadLettered), c.pipeline, source, "dead_lettered")
	}
}
