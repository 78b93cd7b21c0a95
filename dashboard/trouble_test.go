package dashboard_test

import (
	"flag"
	"fmt"
	"math"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/dashboard"
	"github.com/ingest-engine/ingest/httpapi"
	"github.com/ingest-engine/ingest/httpapi/httpapitest"
	"github.com/ingest-engine/ingest/runtime"
)

var failingShot = flag.String("dashboard.failingshot", "",
	"TestDashboardShowsTrouble writes a PNG of the page in the failing state to this path (relative to the dashboard directory), "+
		"e.g. ../docs/dashboard-failing.png")

// The scripted job of TestDashboardShowsTrouble: two source subtasks that
// read 3000 and 1000 records/s (skew), an operator whose name is too long for
// its box, and a committing sink; every time is relative to the moment the
// API is asked (httpapitest.State.Clock), so ages and lags stay as set.
const (
	longName = "customer_orders_enriched_with_region_and_segment"
	interval = 10 * time.Second
)

// at0 is the scripted observation time; the Clock moves it to the present.
var at0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func task(op string, i int) checkpoint.TaskID { return checkpoint.TaskID{Operator: op, Subtask: i} }

// baseState is the pipeline with no checkpoint history yet.
func baseState() httpapitest.State {
	wm := func(behind time.Duration) int64 { return at0.Add(-behind).UnixNano() }
	sub := func(op string, i int, behind time.Duration) runtime.SubtaskObservation {
		return runtime.SubtaskObservation{Task: task(op, i), Watermark: wm(behind)}
	}
	o := runtime.Observation{
		Pipeline: "orders-to-warehouse", At: at0, Phase: runtime.PhaseRunning, StartedAt: at0.Add(-10 * time.Minute),
		Delivery: runtime.Delivery{Level: runtime.DeliveryExactlyOnce},
		Nodes: []runtime.NodeObservation{
			{ID: "orders", Kind: runtime.KindSource, Describe: "kafka topic orders", Parallelism: 2,
				Subtasks: []runtime.SubtaskObservation{sub("orders", 0, 90*time.Second), sub("orders", 1, 60*time.Second)}},
			{ID: longName, Kind: runtime.KindOperator, Describe: "join with customers, then with regions and market segments", Parallelism: 2,
				Inputs:   []runtime.InputObservation{{From: "orders", Partitioning: "hash(customer_id, region_code)"}},
				Subtasks: []runtime.SubtaskObservation{sub(longName, 0, 90*time.Second), sub(longName, 1, 90*time.Second)}},
			{ID: "warehouse", Kind: runtime.KindSink, Describe: "postgres table revenue (two-phase commit)", Parallelism: 1,
				Inputs:   []runtime.InputObservation{{From: longName, Partitioning: "hash"}},
				Subtasks: []runtime.SubtaskObservation{sub("warehouse", 0, 91*time.Second)}},
		},
		SinkCommit:          map[string]runtime.Histogram{"warehouse": {Count: 300, Sum: 4.5}},
		SinkPrepare:         map[string]runtime.Histogram{"warehouse": {Count: 300, Sum: 0.6}},
		PendingCommittables: map[string]int64{},
	}
	return httpapitest.State{
		Observation: o,
		Options:     checkpoint.Options{Interval: interval, Timeout: time.Second, TolerableFailures: 2},
		Clock:       time.Now,
		Rates: map[checkpoint.TaskID]httpapitest.Rate{
			task("orders", 0): {In: 3000, Out: 3000, Backpressure: 0.2}, task("orders", 1): {In: 1000, Out: 1000},
			task(longName, 0): {In: 2000, Out: 2000}, task(longName, 1): {In: 2000, Out: 2000},
			task("warehouse", 0): {In: 4000},
		},
	}
}

// completedRecords are checkpoints from-to (increasing ids), completed
// every interval, the newest newestAgo before at0, each committed 12 ms
// after it completed.
func completedRecords(from, to int64, newestAgo time.Duration) []runtime.CheckpointRecord {
	var out []runtime.CheckpointRecord
	for id := to; id >= from; id-- {
		end := at0.Add(-newestAgo - time.Duration(to-id)*interval)
		out = append(out, runtime.CheckpointRecord{ID: id, Status: runtime.CheckpointCompleted, Attempt: 0,
			TriggeredAt: end.Add(-50 * time.Millisecond), EndedAt: end, Duration: 50 * time.Millisecond, Tasks: 5,
			SyncMax: 6 * time.Millisecond, AsyncMax: 30 * time.Millisecond, AlignmentMax: 4 * time.Millisecond, StateSizeFull: 48 << 20,
			Subtasks: []runtime.SubtaskCheckpoint{{Task: task("orders", 0)}, {Task: task("orders", 1)}, {Task: task(longName, 0)},
				{Task: task(longName, 1)}, {Task: task("warehouse", 0)}},
			Committed: true, CommittedAt: end.Add(12 * time.Millisecond)})
	}
	return out
}

// healthy: running for ten minutes, 300 checkpoints committed, the newest a
// second ago.
func healthy() httpapitest.State {
	s := baseState()
	s.History = completedRecords(271, 300, time.Second)
	lc := s.History[0]
	s.Observation.Checkpoints = runtime.CheckpointSummary{Triggered: 300, Completed: 300, Committed: 300,
		LastCompleted: &runtime.CompletedCheckpoint{ID: lc.ID, TriggeredAt: lc.TriggeredAt, CompletedAt: lc.EndedAt, Duration: lc.Duration}}
	return s
}

// failing is the state the issue reported: checkpoints forced to time out,
// none completed in the 40 s since the start, 15 failed, 5 restarts, each of
// which started over because there was no checkpoint to restore. Each
// checkpoint was acknowledged by the sources and the operator's subtask 0
// only.
func failing() httpapitest.State {
	s := baseState()
	s.Observation.StartedAt = at0.Add(-40 * time.Second)
	for id := int64(15); id >= 1; id-- {
		end := at0.Add(-time.Duration(16-id) * 2 * time.Second)
		s.History = append(s.History, runtime.CheckpointRecord{ID: id, Status: runtime.CheckpointFailed, Attempt: int(id-1) / 3,
			FailureReason: fmt.Sprintf("checkpoint %d: timed out after 1s with 3 of 5 acknowledgements", id),
			TriggeredAt:   end.Add(-time.Second), EndedAt: end, Duration: time.Second, Tasks: 5,
			Subtasks: []runtime.SubtaskCheckpoint{{Task: task("orders", 0)}, {Task: task("orders", 1)}, {Task: task(longName, 0)}}})
	}
	s.Observation.Checkpoints = runtime.CheckpointSummary{Triggered: 15, Failed: 15}
	s.Observation.Stats.Restarts = 5
	s.Observation.LastFailure = &runtime.Failure{At: at0.Add(-7 * time.Second), Class: "checkpoint",
		Err: "checkpoint 12: 3 consecutive checkpoint failures, more than the 2 tolerated"}
	for n := 5; n >= 1; n-- {
		s.Recoveries = append(s.Recoveries, runtime.RecoveryEvent{At: at0.Add(-time.Duration(36-6*n) * time.Second), Attempt: n,
			Cause: "restart", Class: "checkpoint", Failure: "3 consecutive checkpoint failures, more than the 2 tolerated",
			FailedAt: at0.Add(-time.Duration(37-6*n) * time.Second)})
	}
	return s
}

// restarting: a task failed two seconds ago and the job is recovering for
// its second restart; the first restart restored checkpoint 41.
func restarting() httpapitest.State {
	s := baseState()
	s.History = completedRecords(20, 41, 3*time.Second)
	lc := s.History[0]
	s.Observation.Phase = runtime.PhaseRecovering
	s.Observation.Stats.Restarts = 2
	s.Observation.Checkpoints = runtime.CheckpointSummary{Triggered: 41, Completed: 41, Committed: 41,
		LastCompleted: &runtime.CompletedCheckpoint{ID: lc.ID, TriggeredAt: lc.TriggeredAt, CompletedAt: lc.EndedAt, Duration: lc.Duration}}
	s.Observation.LastFailure = &runtime.Failure{At: at0.Add(-2 * time.Second), Class: "task",
		Err: "task " + longName + "#1: lookup regions: connection reset by peer"}
	s.Recoveries = []runtime.RecoveryEvent{{At: at0.Add(-5 * time.Minute), Attempt: 1, Cause: "restart", Class: "task",
		Failure: "task warehouse#0: prepare: deadlock detected", FailedAt: at0.Add(-301 * time.Second), Restored: 41}}
	return s
}

// TestDashboardShowsTrouble drives the page, served by the real API over a
// scripted job, into each state (healthy, failing, restarting) and checks
// what it shows: the badge and the banner say the job's health in the right
// colour with the last failure's reason and time; failed checkpoints are
// drawn and name the subtasks that never acknowledged them; the watermark
// has its date and lag, the sink its commit latency and pending commits,
// every subtask its rate; the recoveries come from the API, so a reload
// shows them; the trigger button is disabled with the API's reason when
// POST cannot act; sync and async bars differ in colour; no name runs under
// its label. Each state is set before the page is asked to show it; the test
// waits for the page with a generous deadline, then checks exactly.
func TestDashboardShowsTrouble(t *testing.T) {
	chromium, driver := browserTools(t)
	job := httpapitest.NewJob(healthy())
	srv := httptest.NewServer(httpapi.New(job, httpapi.Options{Token: "tok", Dashboard: dashboard.Handler()}))
	t.Cleanup(srv.Close)
	const width = 1440
	b := newSession(t, startChromedriver(t, driver), chromium, width, 1000)
	b.open(srv.URL + "/")
	const deadline = 30 * time.Second

	// set changes the job's state and waits until the page shows a poll
	// that began after the change: two renders later.
	set := func(t *testing.T, s httpapitest.State) {
		t.Helper()
		job.Set(func(st *httpapitest.State) { *st = s })
		var first int
		b.exec(&first, "return window.__dashboard.renders")
		eventually(t, deadline, "two renders after the change", func() (bool, string) {
			var n int
			b.exec(&n, "return window.__dashboard.renders")
			return n >= first+2, fmt.Sprintf("%d renders, %d before", n, first)
		})
	}
	badge := func(b *session, text, level string) {
		b.t.Helper()
		eventually(b.t, deadline, "the badge says "+text, func() (bool, string) {
			e := b.find("#pipeline-status")
			got, health := b.text(e), b.attr(e, "data-health")
			return got == text && health == level, fmt.Sprintf("%q (%s)", got, health)
		})
	}

	t.Run("healthy", func(t *testing.T) {
		b := b.in(t)
		set(t, healthy())
		badge(b, "running", "ok")
		if !hidden(b, "#health") {
			t.Errorf("#health is shown for a healthy job that never failed: %q", b.textOf("#health"))
		}
		if got := b.attr(b.find("#stat-age"), "data-stale"); got != "false" {
			t.Errorf("#stat-age data-stale = %q, want false", got)
		}
		if got := b.textOf("#checkpoint-count"); got != "300" {
			t.Errorf("#checkpoint-count = %q, want 300", got)
		}
		if got := b.textOf("#checkpoint-interval"); got != "interval 10 s · 300 of 300 triggered completed" {
			t.Errorf("#checkpoint-interval = %q", got)
		}
		// The sink's watermark is 91 s behind, with its date.
		if got := b.textOf("#watermark-lag"); got != "1 min 31 s" {
			t.Errorf("#watermark-lag = %q, want 1 min 31 s", got)
		}
		if got := b.textOf("#watermark-at"); !regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d at warehouse$`).MatchString(got) {
			t.Errorf("#watermark-at = %q, want the date and time of the sink's watermark", got)
		}
		if got := b.textOf("#commit-latency"); got != "12 ms" {
			t.Errorf("#commit-latency = %q, want 12 ms", got)
		}
		if got := b.textOf("#commit-sub"); got != "after checkpoint 300 completed · 0 pending" {
			t.Errorf("#commit-sub = %q", got)
		}
		checkSubtaskRates(b)
		checkNodeTexts(b)
		checkBarColours(b)
		checkTrigger(b, true, "")
	})

	t.Run("failing", func(t *testing.T) {
		b := b.in(t)
		set(t, failing())
		badge(b, "checkpoints failing", "critical")
		checkFailing(b)
		if *failingShot != "" {
			writeShot(b, width, *failingShot)
		}
		// A reload shows the same recoveries: they are the API's.
		b.open(srv.URL + "/")
		badge(b, "checkpoints failing", "critical")
		checkRecoveriesStartedOver(b)
	})

	t.Run("restarting", func(t *testing.T) {
		b := b.in(t)
		set(t, restarting())
		badge(b, "restarting", "warning")
		if got := b.attr(b.find("#health"), "data-level"); got != "warning" || hidden(b, "#health") {
			t.Errorf("#health level %q (hidden %v), want a warning shown", got, hidden(b, "#health"))
		}
		want := "Restarting recovering after restart 2 (task): task " + longName + "#1: lookup regions: connection reset by peer (since "
		if got := b.textOf("#health .health-head"); !strings.HasPrefix(got, want) {
			t.Errorf("#health head = %q, want it to start %q", got, want)
		}
		if got := b.textOf("#last-failure"); !regexp.MustCompile(`^Last job failure \d\d:\d\d:\d\d \(task\): task ` + longName +
			`#1: lookup regions: connection reset by peer$`).MatchString(got) {
			t.Errorf("#last-failure = %q", got)
		}
		var events []string
		b.exec(&events, "return [...document.querySelectorAll('#recoveries li[data-kind=restart]')].map(li => li.textContent)")
		if len(events) != 1 || !strings.HasSuffix(events[0], "restart (attempt 1): restored checkpoint 41 after a failure (task): task warehouse#0: prepare: deadlock detected") {
			t.Errorf("#recoveries = %q, want the first restart, which restored checkpoint 41", events)
		}
		checkTrigger(b, false, "the job is recovering: a checkpoint can be triggered only while it runs")
	})

	t.Run("POST disabled", func(t *testing.T) {
		b := b.in(t)
		job.Set(func(st *httpapitest.State) { *st = healthy() })
		open := httptest.NewServer(httpapi.New(job, httpapi.Options{Dashboard: dashboard.Handler()}))
		defer open.Close()
		b.open(open.URL + "/")
		badge(b, "running", "ok")
		checkTrigger(b, false, "POST endpoints are disabled because no token is configured: set http.token in the pipeline file or the "+
			httpapi.TokenEnv+" environment variable, restart, and send Authorization: Bearer <token>")
	})

	t.Run("console is clean", func(t *testing.T) { checkNoErrors(b.in(t), nil) })
}

// hidden says whether the element matching css is not displayed.
func hidden(b *session, css string) bool {
	b.t.Helper()
	var h bool
	b.exec(&h, "const e = document.querySelector(arguments[0]); return !e || e.hidden || e.offsetParent === null", css)
	return h
}

// checkFailing checks the page in the failing state.
func checkFailing(b *session) {
	t := b.t
	if got := b.attr(b.find("#health"), "data-level"); got != "critical" || hidden(b, "#health") {
		t.Errorf("#health level %q (hidden %v), want critical and shown", got, hidden(b, "#health"))
	}
	head := b.textOf("#health .health-head")
	for _, want := range []string{"Checkpoints failing", "the last 15 checkpoints failed", "more than 2 in a row restart the job",
		"none has completed, so there is no recovery point", "checkpoint 15: timed out after 1s with 3 of 5 acknowledgements"} {
		if !strings.Contains(head, want) {
			t.Errorf("#health head %q lacks %q", head, want)
		}
	}
	var problems []string
	b.exec(&problems, "return [...document.querySelectorAll('#health-problems li')].map(li => li.dataset.state + ': ' + li.textContent)")
	if len(problems) != 2 || !strings.HasPrefix(problems[0], "restarting: Restarting: restarted 5 times and has not completed a checkpoint since the last restart, which started over") ||
		!strings.HasPrefix(problems[1], "checkpoints_stale: Checkpoints stale: no checkpoint completed for 40s since the job started") {
		t.Errorf("#health-problems = %q, want restarting then stale", problems)
	}
	if got := b.textOf("#last-failure"); !regexp.MustCompile(`^Last job failure \d\d:\d\d:\d\d \(checkpoint\): checkpoint 12: 3 consecutive checkpoint failures, more than the 2 tolerated$`).MatchString(got) {
		t.Errorf("#last-failure = %q, want the failure with its time and class", got)
	}
	missing := longName + "#1, warehouse#0"
	if got := b.textOf("#last-failed-checkpoint"); !regexp.MustCompile(`^Last failed checkpoint 15 \d\d:\d\d:\d\d: checkpoint 15: timed out after 1s with 3 of 5 acknowledgements · not acknowledged by ` +
		regexp.QuoteMeta(missing) + `$`).MatchString(got) {
		t.Errorf("#last-failed-checkpoint = %q, want its time, reason and the subtasks that never acknowledged", got)
	}
	age := b.find("#stat-age")
	if got := b.attr(age, "data-stale"); got != "true" {
		t.Errorf("#stat-age data-stale = %q, want true: none completed in 40 s with a 10 s interval", got)
	}
	if got := b.textOf("#last-checkpoint-age"); got != "none yet" {
		t.Errorf("#last-checkpoint-age = %q", got)
	}
	if got := b.textOf("#last-checkpoint"); !regexp.MustCompile(`^none completed in the \d+ s since the start$`).MatchString(got) {
		t.Errorf("#last-checkpoint = %q", got)
	}
	var colour struct{ Age, Count string }
	b.exec(&colour, `return {Age: getComputedStyle(document.querySelector('#stat-age .value')).color,
		Count: getComputedStyle(document.getElementById('checkpoint-count')).color}`)
	if !amberOrRed(colour.Age) || !amberOrRed(colour.Count) {
		t.Errorf("the age is %s and the committed count %s: want both amber or red", colour.Age, colour.Count)
	}
	if got := b.textOf("#checkpoint-interval"); got != "interval 10 s · 0 of 15 triggered completed" {
		t.Errorf("#checkpoint-interval = %q", got)
	}
	if got := b.textOf("#failure-window"); got != "15 in a row · of the last 15 checkpoints" {
		t.Errorf("#failure-window = %q", got)
	}

	// The duration chart draws every failed checkpoint, none completed.
	var chart struct {
		Marks, Bars, Points int
		Values              []float64
		Label, Tip          string
	}
	b.exec(&chart, `const c = document.getElementById('chart-duration');
		return {Marks: c.querySelectorAll('.failed-mark').length, Bars: c.querySelectorAll('.bar.failed').length,
			Points: c.querySelectorAll('circle.point').length, Label: c.getAttribute('aria-label'),
			Values: [...c.querySelectorAll('.bar.failed')].map(r => +r.dataset.value),
			Tip: c.querySelector('.failed-mark[data-checkpoint-id="15"] title').textContent}`)
	if chart.Marks != 15 || chart.Bars != 15 || chart.Points != 0 || chart.Label != "Checkpoint duration: no completed checkpoint; 15 failed" {
		t.Errorf("#chart-duration: %d marks, %d failed bars, %d points, label %q; want 15, 15, 0", chart.Marks, chart.Bars, chart.Points, chart.Label)
	}
	for _, v := range chart.Values {
		if v != 1000 {
			t.Errorf("failed bar at %v ms, want 1000 (the time until the timeout)", v)
		}
	}
	if want := "checkpoint 15 failed after 1 s: checkpoint 15: timed out after 1s with 3 of 5 acknowledgements; not acknowledged by " + missing; chart.Tip != want {
		t.Errorf("failed mark title %q, want %q", chart.Tip, want)
	}
	var rows []string
	b.exec(&rows, "return [...document.querySelectorAll('#failures tbody tr')].map(tr => tr.cells[3].textContent)")
	if len(rows) != 10 {
		t.Errorf("#failures has %d rows, want 10", len(rows))
	}
	for i, r := range rows {
		if r != missing {
			t.Errorf("#failures row %d: not acknowledged by %q, want %q", i, r, missing)
		}
	}
	if got := b.textOf("#restarts"); got != "5" {
		t.Errorf("#restarts = %q", got)
	}
	checkRecoveriesStartedOver(b)
}

// checkRecoveriesStartedOver checks that the five restarts of the failing
// state say they started over, and claim no restored checkpoint.
func checkRecoveriesStartedOver(b *session) {
	t := b.t
	var events []struct{ Text, Restored string }
	eventually(t, 30*time.Second, "#recoveries lists five restarts", func() (bool, string) {
		b.exec(&events, "return [...document.querySelectorAll('#recoveries li[data-kind=restart]')].map(li => ({Text: li.textContent, Restored: li.dataset.restored}))")
		return len(events) == 5, fmt.Sprintf("%q", events)
	})
	for i, e := range events {
		want := fmt.Sprintf("restart (attempt %d): started over from the beginning: no complete checkpoint existed after a failure (checkpoint): "+
			"3 consecutive checkpoint failures, more than the 2 tolerated", 5-i)
		if e.Restored != "" || !regexp.MustCompile(`^\d\d:\d\d:\d\d `+regexp.QuoteMeta(want)+`$`).MatchString(e.Text) {
			t.Errorf("#recoveries %d = %q (restored %q), want %q", i, e.Text, e.Restored, want)
		}
		if strings.Contains(e.Text, "recovered from the last complete checkpoint") {
			t.Errorf("#recoveries %d claims a checkpoint that did not exist: %q", i, e.Text)
		}
	}
}

// checkSubtaskRates checks that each node draws a bar per subtask as tall as
// its rate against the busiest sibling's, and names the skew.
func checkSubtaskRates(b *session) {
	t := b.t
	var nodes []struct {
		ID, Skew, Lag string
		Rates         []float64
		Heights       []float64
	}
	eventually(t, 30*time.Second, "the subtasks' rates are drawn", func() (bool, string) {
		b.exec(&nodes, `return [...document.querySelectorAll('#graph [data-node-id]')].map(g => ({ID: g.dataset.nodeId,
			Skew: g.querySelector('.node-skew').textContent, Lag: g.querySelector('.node-lag').textContent,
			Rates: [...g.querySelectorAll('.skew-bar')].map(r => +r.dataset.rate),
			Heights: [...g.querySelectorAll('.skew-bar')].map(r => +r.getAttribute('height'))}))`)
		return len(nodes) == 3 && len(nodes[0].Rates) == 2 && nodes[0].Rates[0] > 0, fmt.Sprintf("%+v", nodes)
	})
	// Counts are whole records: a rate over a second or more is off by at
	// most one record per second.
	want := map[string]struct {
		skew, lag string
		rates     []float64
	}{
		"orders":    {"skew 1.5×", "lag 1 min 30 s", []float64{3000, 1000}},
		longName:    {"skew 1.0×", "lag 1 min 30 s", []float64{2000, 2000}},
		"warehouse": {"", "lag 1 min 31 s", []float64{4000}},
	}
	for _, n := range nodes {
		w := want[n.ID]
		close := len(n.Rates) == len(w.rates)
		for i := range n.Rates {
			close = close && math.Abs(n.Rates[i]-w.rates[i]) <= 1
		}
		if n.Skew != w.skew || n.Lag != w.lag || !close {
			t.Errorf("node %s: %q, %q, rates %v; want %q, %q, %v", n.ID, n.Skew, n.Lag, n.Rates, w.skew, w.lag, w.rates)
			continue
		}
		peak := 0.0
		for _, r := range n.Rates {
			peak = math.Max(peak, r)
		}
		for i, h := range n.Heights {
			if want := 12 * n.Rates[i] / peak; math.Abs(h-want) > 0.06 {
				t.Errorf("node %s subtask %d: bar %.2f px high, want %.2f (its rate against the busiest)", n.ID, i, h, want)
			}
		}
	}
}

// checkNodeTexts checks that no text of a node's box runs under another or
// out of the box, that a name too long is shortened with an ellipsis and
// kept whole in the title, and that edge labels stay clear of the boxes.
func checkNodeTexts(b *session) {
	t := b.t
	type rect struct{ L, T, R, B float64 }
	var got struct {
		Nodes []struct {
			ID, Name, Title string
			Box             rect
			Texts           []struct {
				Class, Text string
				R           rect
			}
		}
		Labels []struct {
			Text string
			R    rect
		}
	}
	b.exec(&got, `const r = (e) => { const b = e.getBoundingClientRect(); return {L: b.left, T: b.top, R: b.right, B: b.bottom}; };
		return {Nodes: [...document.querySelectorAll('#graph [data-node-id]')].map(g => ({ID: g.dataset.nodeId,
			Name: g.querySelector('.node-id').textContent, Title: g.querySelector('title').textContent, Box: r(g.querySelector('.node-box')),
			Texts: [...g.querySelectorAll('text')].filter(x => x.textContent).map(x => ({Class: x.getAttribute('class'), Text: x.textContent, R: r(x)}))})),
		Labels: [...document.querySelectorAll('#graph .edge-label')].map(l => ({Text: l.textContent, R: r(l)}))}`)
	overlap := func(a, c rect) bool { return a.L < c.R && c.L < a.R && a.T < c.B && c.T < a.B }
	for _, n := range got.Nodes {
		for i, a := range n.Texts {
			if a.R.L < n.Box.L || a.R.R > n.Box.R {
				t.Errorf("node %s: %q (%s) runs out of its box: %+v in %+v", n.ID, a.Text, a.Class, a.R, n.Box)
			}
			for _, c := range n.Texts[i+1:] {
				if overlap(a.R, c.R) {
					t.Errorf("node %s: %q (%s) overlaps %q (%s)", n.ID, a.Text, a.Class, c.Text, c.Class)
				}
			}
		}
		if n.ID == longName && (!strings.HasSuffix(n.Name, "…") || !strings.HasPrefix(longName, strings.TrimSuffix(n.Name, "…")) ||
			!strings.HasPrefix(n.Title, longName+" ")) {
			t.Errorf("node %s shows %q titled %q: want it shortened with an ellipsis, whole in the title", n.ID, n.Name, n.Title)
		}
	}
	if len(got.Labels) != 2 {
		t.Errorf("%d edge labels, want 2", len(got.Labels))
	}
	for _, l := range got.Labels {
		for _, n := range got.Nodes {
			if overlap(l.R, n.Box) {
				t.Errorf("edge label %q overlaps node %s", l.Text, n.ID)
			}
		}
	}
}

// checkBarColours checks that the duration chart's sync and async bars
// differ in hue from each other and from the total line.
func checkBarColours(b *session) {
	t := b.t
	var c struct{ Sync, Async, Line string }
	b.exec(&c, `const f = (sel, prop) => { const e = document.querySelector('#chart-duration ' + sel); return e ? getComputedStyle(e)[prop] : ''; };
		return {Sync: f('.bar.sync', 'fill'), Async: f('.bar.async', 'fill'), Line: f('.line', 'stroke')}`)
	hs, ha, hl := hue(t, c.Sync), hue(t, c.Async), hue(t, c.Line)
	if d := hueDistance(hs, ha); d < 60 {
		t.Errorf("sync bars %s and async bars %s are %.0f° of hue apart, want ≥ 60", c.Sync, c.Async, d)
	}
	if hueDistance(hs, hl) < 30 || hueDistance(ha, hl) < 30 {
		t.Errorf("sync %s or async %s is too close to the total line %s", c.Sync, c.Async, c.Line)
	}
}

// checkTrigger checks the trigger button: enabled without a note, or
// disabled with the API's reason beside it.
func checkTrigger(b *session, enabled bool, reason string) {
	t := b.t
	var got struct {
		Disabled     bool
		Title, Note  string
		NoteDisplays bool
	}
	eventually(t, 30*time.Second, "the trigger button follows the API", func() (bool, string) {
		b.exec(&got, `const btn = document.getElementById('trigger-checkpoint'), note = document.getElementById('trigger-reason');
			return {Disabled: btn.disabled, Title: btn.title, Note: note.textContent, NoteDisplays: !note.hidden && note.offsetParent !== null}`)
		return got.Disabled == !enabled && got.Note == reason, fmt.Sprintf("%+v", got)
	})
	if !enabled && (!got.NoteDisplays || got.Title != reason) {
		t.Errorf("disabled trigger: note shown %v, title %q; want the reason in view and in the title", got.NoteDisplays, got.Title)
	}
	if enabled && got.NoteDisplays {
		t.Errorf("enabled trigger with a note %q", got.Note)
	}
}

// amberOrRed says whether a CSS colour "rgb(r, g, b)" is amber or red: red
// dominant, blue weak.
func amberOrRed(css string) bool {
	var r, g, bl int
	if _, err := fmt.Sscanf(css, "rgb(%d, %d, %d)", &r, &g, &bl); err != nil {
		return false
	}
	return r > 150 && r > g && bl < 100
}

// hue is the hue in degrees of a CSS colour "rgb(r, g, b)".
func hue(t *testing.T, css string) float64 {
	t.Helper()
	var r, g, b float64
	if _, err := fmt.Sscanf(css, "rgb(%g, %g, %g)", &r, &g, &b); err != nil {
		t.Fatalf("colour %q: %v", css, err)
	}
	mx, mn := math.Max(r, math.Max(g, b)), math.Min(r, math.Min(g, b))
	if mx == mn {
		return 0
	}
	var h float64
	switch mx {
	case r:
		h = math.Mod((g-b)/(mx-mn), 6)
	case g:
		h = (b-r)/(mx-mn) + 2
	default:
		h = (r-g)/(mx-mn) + 4
	}
	return math.Mod(h*60+360, 360)
}

func hueDistance(a, b float64) float64 {
	d := math.Abs(a - b)
	return math.Min(d, 360-d)
}

// writeShot writes a PNG of the whole page to path.
func writeShot(b *session, width int, path string) {
	t := b.t
	var size struct{ Page, Chrome int }
	b.exec(&size, "return {Page: document.documentElement.scrollHeight, Chrome: window.outerHeight - window.innerHeight}")
	b.resize(width, size.Page+size.Chrome)
	var renders int
	b.exec(&renders, "return window.__dashboard.renders")
	eventually(t, 30*time.Second, "a render after the resize", func() (bool, string) {
		var n int
		b.exec(&n, "return window.__dashboard.renders")
		return n > renders+1, strconv.Itoa(n) + " renders"
	})
	shot := b.screenshot()
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatalf("write screenshot: %v", err)
	}
	abs, _ := filepath.Abs(path)
	t.Logf("wrote %s (%d bytes)", abs, len(shot))
	b.resize(width, 1000)
}
