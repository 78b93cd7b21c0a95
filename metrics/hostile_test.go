package metrics_test

import (
	"bufio"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ingest-engine/ingest/config"
	"github.com/ingest-engine/ingest/httpapi"
	"github.com/ingest-engine/ingest/metrics"
	"github.com/ingest-engine/ingest/runtime"
)

// Hostile cases of the metrics. Each test names the sentence of
// checkpointing.txt it defends and the item of issue #12.

// series is one sample line of the text exposition: its labels.
type series map[string]string

// scrape GETs url and returns the samples of each metric name (histograms
// as name_count, name_sum and name_bucket).
func scrape(t *testing.T, url string) map[string][]series {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	out := map[string][]series{}
	label := regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest, _ := strings.Cut(line, " ")
		s := series{}
		if i := strings.IndexByte(line, '{'); i >= 0 {
			name = line[:i]
			end := strings.LastIndexByte(line, '}')
			for _, m := range label.FindAllStringSubmatch(line[i+1:end], -1) {
				v, err := strconv.Unquote(`"` + m[2] + `"`)
				if err != nil {
					t.Fatalf("label in %q: %v", line, err)
				}
				s[m[1]] = v
			}
			rest = line[end+1:]
		}
		if _, err := strconv.ParseFloat(strings.Fields(rest)[0], 64); err != nil {
			t.Fatalf("value in %q: %v", line, err)
		}
		out[name] = append(out[name], s)
	}
	return out
}

// "Monitor at least: … Checkpoint duration and failures … Recovery count
// and replay volume": an alert on increase() or absent() needs the series
// before the first event. ingest_recoveries_total and the histograms by
// operator, sink or storage kind were absent until their first increment
// (#12 item 12). A fresh job, scraped over HTTP before it runs, now exports
// every counter and histogram family docs/metrics.md lists with a series
// for every known label value, at zero.
func TestHostileFreshJobExportsEveryLabelValue(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "in"), 0o755); err != nil {
		t.Fatal(err)
	}
	p, err := config.Parse(filepath.Join(dir, "p.yaml"), []byte(`pipeline: fresh
checkpoint: {dir: ckpts}
sources:
  in:
    type: file
    path: in/*.jsonl
    fields: {key: string, ts: time}
    event_time: {field: ts}
    on_error: skip
    parallelism: 2
transforms:
  w: {type: window, input: in, key: key, size: 1s, aggregates: {n: count()}}
sinks:
  out: {type: file, input: w, path: out}
`))
	if err != nil {
		t.Fatal(err)
	}
	job, err := p.Stream.NewJob(p.RunOptions())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.New(job, httpapi.Options{
		Collectors: []prometheus.Collector{metrics.NewBadRecordCollector(p.Stream.Name(), p.Stream.BadRecordCounts)}}))
	defer srv.Close()
	got := scrape(t, srv.URL+"/metrics")

	// The known label values, from the plan.
	o := job.Observe()
	var subtasks, operators, sinks, committers []series
	for _, n := range o.Nodes {
		operators = append(operators, series{"operator": n.ID})
		for _, s := range n.Subtasks {
			subtasks = append(subtasks, series{"operator": n.ID, "subtask": strconv.Itoa(s.Task.Subtask)})
		}
		if n.Kind == runtime.KindSink {
			sinks = append(sinks, series{"sink": n.ID})
			committers = append(committers, series{"sink": n.ID}) // the file sink commits
		}
	}
	recoveries := []series{{"cause": "checkpoint", "class": ""}}
	for _, c := range runtime.RestartClasses {
		recoveries = append(recoveries, series{"cause": "restart", "class": c})
	}
	none := []series{{}}
	want := map[string][]series{
		"ingest_checkpoints_total":                {{"status": "completed"}, {"status": "failed"}},
		"ingest_checkpoints_committed_total":      none,
		"ingest_recoveries_total":                 recoveries,
		"ingest_replayed_records_total":           none,
		"ingest_replay_unmeasured_total":          none,
		"ingest_source_bad_records_total":         {{"source": "in", "action": "skipped"}, {"source": "in", "action": "dead_lettered"}},
		"ingest_abandoned_staged_total":           {{"at": "recovery"}, {"at": "checkpoint"}},
		"ingest_retention_deleted_total":          none,
		"ingest_retention_trimmed_total":          none,
		"ingest_records_in_total":                 subtasks,
		"ingest_records_out_total":                subtasks,
		"ingest_backpressure_seconds_total":       subtasks,
		"ingest_checkpoint_duration_seconds":      none,
		"ingest_checkpoint_alignment_seconds":     operators,
		"ingest_checkpoint_sync_seconds":          operators,
		"ingest_checkpoint_async_seconds":         operators,
		"ingest_checkpoint_storage_write_seconds": {{"kind": "state"}, {"kind": "metadata"}},
		"ingest_sink_prepare_seconds":             sinks,
		"ingest_sink_commit_seconds":              committers,
		"ingest_late_records_total":               {{"operator": "w"}}, // the window: the one operator that drops late records
	}

	doc, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `(ingest_[a-z_]+)` \\| (counter|histogram) \\|")
	families := row.FindAllStringSubmatch(string(doc), -1)
	if len(families) < len(want) {
		t.Fatalf("docs/metrics.md lists %d counter and histogram families, want at least the %d known here", len(families), len(want))
	}
	for _, f := range families {
		name, typ := f[1], f[2]
		sample := name
		if typ == "histogram" {
			sample = name + "_count"
		}
		have := got[sample]
		for _, s := range have {
			if s["pipeline"] != "fresh" {
				t.Errorf("%s%v: pipeline label %q", sample, s, s["pipeline"])
			}
			delete(s, "pipeline")
		}
		expected, known := want[name]
		if !known {
			// A family this test does not know yet: at least it exists.
			if len(have) == 0 {
				t.Errorf("%s (%s): no series before the first event", name, typ)
			}
			continue
		}
		for _, w := range expected {
			if !slices.ContainsFunc(have, func(s series) bool { return sameSeries(s, w) }) {
				t.Errorf("%s: no series %v before the first event (has %v)", sample, w, have)
			}
		}
	}
}

// sameSeries says whether two label sets are equal.
func sameSeries(a, b series) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
