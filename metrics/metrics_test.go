package metrics_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"

	"github.com/ingest-engine/ingest/config"
	"github.com/ingest-engine/ingest/internal/testkit"
	"github.com/ingest-engine/ingest/metrics"
	"github.com/ingest-engine/ingest/runtime"
)

// TestMain fails the package if any test leaves a goroutine behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// windowJob builds datagen → window → file sink from YAML in a temporary
// directory: count records (0: unbounded) at rate per second.
func windowJob(t *testing.T, count, rate int64) *runtime.Job {
	t.Helper()
	src := testkit.WindowPipeline{Name: "metrics", Interval: 20 * time.Millisecond, Count: count, Rate: rate,
		Keys: 10, Parallelism: 2}.YAML()
	p, err := config.Parse(filepath.Join(t.TempDir(), "p.yaml"), []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	job, err := p.Stream.NewJob(p.RunOptions())
	if err != nil {
		t.Fatal(err)
	}
	return job
}

// gather collects c once and returns its families by name.
func gather(t *testing.T, c prometheus.Collector) map[string]*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

// value returns the value of the sample of family name whose labels include
// want (name=value pairs), summed over all matching samples; found is false
// when none matches.
func value(mfs map[string]*dto.MetricFamily, name string, want ...string) (v float64, found bool) {
	mf := mfs[name]
	if mf == nil {
		return 0, false
	}
next:
	for _, m := range mf.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		for i := 0; i+1 < len(want); i += 2 {
			if labels[want[i]] != want[i+1] {
				continue next
			}
		}
		found = true
		switch {
		case m.Counter != nil:
			v += m.GetCounter().GetValue()
		case m.Gauge != nil:
			v += m.GetGauge().GetValue()
		case m.Histogram != nil:
			v += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return v, found
}

// must returns the value of a sample that must exist.
func must(t *testing.T, mfs map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	t.Helper()
	v, ok := value(mfs, name, labels...)
	if !ok {
		t.Fatalf("no sample %s%v", name, labels)
	}
	return v
}

// The collector's metrics follow the Prometheus naming conventions and
// report a running job: checkpoints_total grows from scrape to scrape, the
// time since the last completed checkpoint stays small, and when the job
// ends every counter agrees with the job's own statistics.
func TestCollectorOnRunningJob(t *testing.T) {
	const count = 20000
	job := windowJob(t, count, 40000)
	c := metrics.NewCollector(job)
	if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) > 0 {
		t.Fatalf("lint before Run: %v %v", err, problems)
	}
	if v := must(t, gather(t, c), "ingest_pipeline_status", "status", "starting"); v != 1 {
		t.Fatalf("status starting = %v before Run", v)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- job.Run(ctx) }()

	// Two scrapes while it runs, a completed checkpoint apart.
	var first float64
	deadline := time.Now().Add(20 * time.Second)
	for {
		mfs := gather(t, c)
		completed := must(t, mfs, "ingest_checkpoints_total", "status", "completed")
		if first == 0 && completed > 0 {
			first = completed
			if v := must(t, mfs, "ingest_pipeline_status", "status", "running"); v != 1 {
				t.Errorf("status running = %v while checkpoints complete", v)
			}
			if since := must(t, mfs, "ingest_checkpoint_seconds_since_last_completed"); since < 0 || since > 5 {
				t.Errorf("seconds since the last completed checkpoint = %v while checkpoints run every 20ms", since)
			}
			if ts := must(t, mfs, "ingest_checkpoint_last_completed_timestamp_seconds"); time.Since(time.Unix(int64(ts), 0)) > time.Minute {
				t.Errorf("last completed timestamp %v is not recent", ts)
			}
		}
		if first > 0 && completed > first {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ingest_checkpoints_total{status=completed} stayed at %v", completed)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	st := job.Stats()
	mfs := gather(t, c)
	checks := []struct {
		name   string
		labels []string
		want   float64
	}{
		{"ingest_pipeline_status", []string{"status", "finished"}, 1},
		{"ingest_checkpoints_total", []string{"status", "completed"}, float64(st.Completed)},
		{"ingest_checkpoint_duration_seconds", nil, float64(st.Completed)},
		{"ingest_checkpoint_last_completed_id", nil, float64(st.Latest)},
		{"ingest_checkpoints_committed_total", nil, float64(st.Completed)},
		{"ingest_checkpoints_pending_commit", nil, 0},
		{"ingest_checkpoint_storage_write_seconds", []string{"kind", "metadata"}, float64(st.Completed)},
		{"ingest_records_out_total", []string{"operator", "events"}, count},
		{"ingest_records_in_total", []string{"operator", "per_key"}, count},
		{"ingest_source_records_since_restore", []string{"source", "events"}, count},
		{"ingest_abandoned_staged_total", []string{"at", "recovery"}, float64(st.Abandoned)},
		{"ingest_abandoned_staged_total", []string{"at", "checkpoint"}, 0},
		{"ingest_replayed_records_total", nil, 0},
		{"ingest_retention_deleted_total", nil, float64(max(st.Completed-1, 0))}, // retain 1: every completed checkpoint but the last
		{"ingest_sink_pending_committables", []string{"sink", "out"}, 0},
	}
	for _, c := range checks {
		if got := must(t, mfs, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	// The last checkpoint is the final one, which is written in full.
	full := must(t, mfs, "ingest_checkpoint_state_size_bytes", "kind", "full")
	if inc := must(t, mfs, "ingest_checkpoint_state_size_bytes", "kind", "incremental"); full <= 0 || inc != full {
		t.Errorf("state size of the final checkpoint: full %v, incremental %v; want equal (a final checkpoint is self-contained)", full, inc)
	}
	// The window emits fewer records than it reads; the sink receives what
	// the window emitted.
	winOut := must(t, mfs, "ingest_records_out_total", "operator", "per_key")
	if sinkIn := must(t, mfs, "ingest_records_in_total", "operator", "out"); winOut == 0 || sinkIn != winOut {
		t.Errorf("window emitted %v, sink received %v: want equal and > 0", winOut, sinkIn)
	}
	if v := must(t, mfs, "ingest_checkpoint_state_size_bytes", "kind", "full"); v <= 0 {
		t.Errorf("full state size %v, want > 0 (the window holds state)", v)
	}
	for _, name := range []string{"ingest_sink_prepare_seconds", "ingest_sink_commit_seconds"} {
		if v := must(t, mfs, name, "sink", "out"); v < 1 {
			t.Errorf("%s{sink=out} has %v observations, want some", name, v)
		}
	}
	for _, name := range []string{"ingest_checkpoint_alignment_seconds", "ingest_checkpoint_sync_seconds", "ingest_checkpoint_async_seconds"} {
		if v := must(t, mfs, name, "operator", "per_key"); v < float64(st.Completed) {
			t.Errorf("%s{operator=per_key} has %v observations, want one per checkpoint (%d)", name, v, st.Completed)
		}
	}
	if _, ok := mfs["ingest_backpressure_seconds_total"]; !ok {
		t.Error("no ingest_backpressure_seconds_total")
	}
	// Every family the collector describes follows the conventions.
	if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", err, problems)
	}
	for name := range mfs {
		if !strings.HasPrefix(name, "ingest_") {
			t.Errorf("metric %s is not prefixed ingest_", name)
		}
	}
}

// fakeJob serves a fixed observation.
type fakeJob struct{ o runtime.Observation }

func (f fakeJob) Observe() runtime.Observation { return f.o }

// Recoveries are counted by cause and class, watermark lag is wall clock
// minus the source's watermark, and pending committables are reported per
// sink, 0 for a sink with none pending.
func TestCollectorFromObservation(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	o := runtime.Observation{
		Pipeline: "p", At: now, Phase: runtime.PhaseRunning, StartedAt: now.Add(-time.Hour),
		Nodes: []runtime.NodeObservation{
			{ID: "src", Kind: runtime.KindSource, Parallelism: 1, Subtasks: []runtime.SubtaskObservation{
				{Watermark: now.Add(-90 * time.Second).UnixNano(), RecordsOut: 7, RecordsIn: 7, Backpressure: 1500 * time.Millisecond}}},
			{ID: "a", Kind: runtime.KindSink, Parallelism: 1, Subtasks: []runtime.SubtaskObservation{{Watermark: runtime.MinWatermark}}},
			{ID: "b", Kind: runtime.KindSink, Parallelism: 1, Subtasks: []runtime.SubtaskObservation{{Watermark: runtime.MaxWatermark}}},
		},
		PendingCommittables: map[string]int64{"b": 3},
		Recoveries: []runtime.RecoveryCount{{Cause: "restart", Class: "task", Count: 2}, {Cause: "restart", Class: "commit", Count: 1},
			{Cause: "checkpoint", Count: 1}},
		ReplayedRecords: 42,
	}
	mfs := gather(t, metrics.NewCollector(fakeJob{o}))
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"ingest_recoveries_total", []string{"cause", "restart", "class", "task"}, 2},
		{"ingest_recoveries_total", []string{"cause", "restart"}, 3},
		{"ingest_recoveries_total", []string{"cause", "checkpoint"}, 1},
		{"ingest_replayed_records_total", nil, 42},
		{"ingest_watermark_lag_seconds", []string{"source", "src", "subtask", "0"}, 90},
		{"ingest_backpressure_seconds_total", []string{"operator", "src"}, 1.5},
		{"ingest_sink_pending_committables", []string{"sink", "a"}, 0},
		{"ingest_sink_pending_committables", []string{"sink", "b"}, 3},
		{"ingest_checkpoint_seconds_since_last_completed", nil, 3600},
		{"ingest_pipeline_status", []string{"status", "running"}, 1},
		{"ingest_pipeline_status", nil, 1},
	} {
		if got := must(t, mfs, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	// No watermark yet, or the input ended: no watermark sample.
	for _, op := range []string{"a", "b"} {
		if _, ok := value(mfs, "ingest_watermark_timestamp_seconds", "operator", op); ok {
			t.Errorf("%s has a watermark sample without a watermark", op)
		}
	}
}

// docs/metrics.md lists every metric the collector describes.
func TestDocsListEveryMetric(t *testing.T) {
	doc, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan *prometheus.Desc, 100)
	metrics.NewCollector(fakeJob{}).Describe(ch)
	close(ch)
	name := regexp.MustCompile(`fqName: "([^"]+)"`)
	n := 0
	for d := range ch {
		m := name.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("cannot read the name of %s", d)
		}
		n++
		if !strings.Contains(string(doc), "`"+m[1]+"`") {
			t.Errorf("docs/metrics.md does not list %s", m[1])
		}
	}
	if n < 25 {
		t.Fatalf("the collector describes %d metrics, want the 25+ of docs/metrics.md", n)
	}
}
