package dashboard_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"image"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

var (
	screenshotPath = flag.String("dashboard.screenshot", "",
		"TestDashboardInChromium writes a PNG of the dashboard, driven by the simulated API, to this path "+
			"(relative to the dashboard directory), e.g. ../docs/dashboard.png")
	serveAddr = flag.String("dashboard.serve", "",
		"TestServeFake serves the dashboard with the simulated API at this address until interrupted, e.g. 127.0.0.1:8090")
)

// TestDashboardInChromium opens the dashboard, served by the real Handler
// beside a simulated API, in headless Chromium through chromedriver, and
// checks what a person would look at: checkpoints appear and the count goes
// up, the graph has one box per node with its rates and backpressure, the
// charts plot the API's numbers, failed checkpoints show their reasons,
// restarts are counted, the age keeps counting when the API is unreachable,
// a checkpoint can be triggered with the token, and the page hit no error.
func TestDashboardInChromium(t *testing.T) {
	chromium, driver := browserTools(t)
	fake := newFakeAPI(time.Now)
	srv := httptest.NewServer(fake.handler())
	t.Cleanup(srv.Close)
	driverURL := startChromedriver(t, driver)
	const width = 1440
	b := newSession(t, driverURL, chromium, width, 1000)
	b.open(srv.URL + "/")

	eventually(t, 30*time.Second, "the page renders the API's data", func() (bool, string) {
		var renders int
		b.exec(&renders, "return window.__dashboard ? window.__dashboard.renders : -1")
		return renders >= 1, fmt.Sprintf("%d renders", renders)
	})

	t.Run("header", func(t *testing.T) {
		b := b.in(t)
		want := fake.pipeline(fake.simNow())
		if got := b.textOf("#pipeline-name"); got != want.Name {
			t.Errorf("#pipeline-name = %q, want %q", got, want.Name)
		}
		if got := b.textOf("#pipeline-status"); got != "running" && got != "recovering" {
			t.Errorf("#pipeline-status = %q, want running or recovering", got)
		}
		if got := b.textOf("#guarantee-level"); got != want.Guarantee.Level {
			t.Errorf("#guarantee-level = %q, want %q", got, want.Guarantee.Level)
		}
		var reasons []string
		b.exec(&reasons, "return [...document.querySelectorAll('#guarantee-reasons li')].map(li => li.textContent)")
		if !slices.Equal(reasons, want.Guarantee.Reasons) {
			t.Errorf("guarantee reasons = %q, want %q", reasons, want.Guarantee.Reasons)
		}
	})

	t.Run("checkpoint count increases", func(t *testing.T) {
		b := b.in(t)
		// The page shows what a recent poll returned (within 30 s, however
		// loaded the machine).
		before := fake.pipeline(fake.simAt(time.Now().Add(-30 * time.Second))).CommittedCheckpoints
		first := digits(t, b.textOf("#checkpoint-count"))
		after := fake.pipeline(fake.simNow()).CommittedCheckpoints
		if first < before || first > after {
			t.Fatalf("#checkpoint-count = %d; the API said %d 30 seconds ago and %d now", first, before, after)
		}
		eventually(t, 30*time.Second, "#checkpoint-count increases", func() (bool, string) {
			n := digits(t, b.textOf("#checkpoint-count"))
			return n > first, fmt.Sprintf("%d, first %d", n, first)
		})
	})

	t.Run("time since last checkpoint", func(t *testing.T) {
		b := b.in(t)
		age := b.find("#last-checkpoint-age")
		sec, err := strconv.ParseFloat(b.attr(age, "data-seconds"), 64)
		if err != nil || sec < 0 || sec > 60 {
			t.Fatalf("#last-checkpoint-age data-seconds = %q (%v), want 0..60 s", b.attr(age, "data-seconds"), err)
		}
		if text := b.text(age); !regexp.MustCompile(`^\d+ s$`).MatchString(text) {
			t.Errorf("#last-checkpoint-age text = %q, want like \"7 s\"", text)
		}
		if text := b.textOf("#last-checkpoint"); !regexp.MustCompile(`^#\d+ at .* took \d`).MatchString(text) {
			t.Errorf("#last-checkpoint = %q, want the last checkpoint's id and duration", text)
		}
	})

	t.Run("graph", func(t *testing.T) { checkGraph(b.in(t), fake) })
	t.Run("charts", func(t *testing.T) { checkCharts(b.in(t), fake) })

	t.Run("failures with reasons", func(t *testing.T) {
		b := b.in(t)
		// One script reads the rows: the table is redrawn when a failure
		// arrives, which would leave element references stale.
		var rows []struct {
			ID   int64
			Text string
		}
		b.exec(&rows, `return [...document.querySelectorAll('#failures tbody tr[data-checkpoint-id]')]
			.map(tr => ({ID: +tr.dataset.checkpointId, Text: tr.innerText}))`)
		if len(rows) == 0 || len(rows) > 10 {
			t.Fatalf("#failures has %d rows, want 1..10 (the history holds failed checkpoints)", len(rows))
		}
		for i, row := range rows {
			reason, _, _ := failure(row.ID)
			if reason == "" {
				t.Fatalf("row %d: checkpoint %d did not fail in the simulation", i, row.ID)
			}
			if !strings.Contains(row.Text, reason) {
				t.Errorf("row %d (checkpoint %d) = %q, want its reason %q", i, row.ID, row.Text, reason)
			}
		}
		if n := digits(t, b.textOf("#failure-count")); n < len(rows) {
			t.Errorf("#failure-count = %d, fewer than the %d rows of #failures", n, len(rows))
		}
	})

	t.Run("checkpoint detail", func(t *testing.T) {
		b := b.in(t)
		// Find and click in one script: the table is redrawn with every
		// poll, so a reference found by one command may be stale at the next.
		var id string
		b.exec(&id, `const btn = document.querySelector('#checkpoints tbody tr[data-status=completed] button[data-checkpoint-id]');
			btn.click(); return btn.dataset.checkpointId`)
		subtasks := 0
		for _, n := range fakeGraph {
			subtasks += n.parallelism
		}
		eventually(t, 30*time.Second, "the detail of checkpoint "+id+" lists every subtask", func() (bool, string) {
			var got struct {
				ID   string `json:"id"`
				Rows int    `json:"rows"`
			}
			b.exec(&got, `const d = document.getElementById('checkpoint-detail');
				return {id: d.dataset.checkpointId || '', rows: d.querySelectorAll('#subtasks tbody tr').length}`)
			return got.ID == id && got.Rows == subtasks, fmt.Sprintf("checkpoint %q with %d rows, want %s with %d", got.ID, got.Rows, id, subtasks)
		})
		if text := b.textOf("#subtasks tbody tr"); !strings.HasPrefix(text, "customers") {
			t.Errorf("first subtask row = %q, want operator customers first (sorted by operator)", text)
		}
	})

	t.Run("screenshot", func(t *testing.T) { takeScreenshot(b.in(t), width) })

	t.Run("restarts and recoveries", func(t *testing.T) {
		b := b.in(t)
		low, _ := fake.restartsAt(fake.simAt(time.Now().Add(-30 * time.Second)))
		shown := digits(t, b.textOf("#restarts"))
		high, _ := fake.restartsAt(fake.simNow())
		if shown < low || shown > high || shown == 0 {
			t.Fatalf("#restarts = %d; the API said %d 30 seconds ago and %d now", shown, low, high)
		}
		// The timeline is the API's: as many restarts as it counted (up to
		// the 20 shown), each naming the checkpoint it restored.
		eventually(t, 30*time.Second, "#recoveries lists the API's restarts", func() (bool, string) {
			var got []struct{ Text, Restored string }
			b.exec(&got, `return [...document.querySelectorAll('#recoveries li[data-kind=restart]')]
				.map(li => ({Text: li.textContent, Restored: li.dataset.restored}))`)
			shown := digits(t, b.textOf("#restarts"))
			ok := len(got) == min(shown, 20) && len(got) > 0
			for _, e := range got {
				ok = ok && e.Restored != "" && strings.Contains(e.Text, "restored checkpoint "+e.Restored)
			}
			return ok, fmt.Sprintf("%d restart events %q for %d restarts", len(got), got, shown)
		})
	})

	t.Run("console is clean", func(t *testing.T) {
		b := b.in(t)
		checkNoErrors(b, nil)
	})

	t.Run("trigger checkpoint", func(t *testing.T) {
		b := b.in(t)
		b.click(b.find("#trigger-checkpoint"))
		var open bool
		b.exec(&open, "return document.getElementById('trigger-dialog').open")
		if !open {
			t.Fatal("the trigger dialog did not open")
		}
		input, submit := b.find("#trigger-token"), b.find("#trigger-submit")
		b.typeInto(input, "wrong-token")
		b.click(submit)
		eventually(t, 30*time.Second, "a wrong token is reported", func() (bool, string) {
			text := b.textOf("#trigger-result")
			return strings.Contains(text, "rejected") && strings.Contains(text, "401"), fmt.Sprintf("%q", text)
		})
		if ok, rejected := fake.counts(); ok != 0 || rejected != 1 {
			t.Fatalf("after a wrong token the API saw %d accepted and %d rejected triggers, want 0 and 1", ok, rejected)
		}
		b.typeInto(input, fakeToken)
		b.click(submit)
		eventually(t, 30*time.Second, "the trigger is confirmed", func() (bool, string) {
			text := b.textOf("#trigger-result")
			return regexp.MustCompile(`^Checkpoint \d+ triggered\.$`).MatchString(text), fmt.Sprintf("%q", text)
		})
		if ok, _ := fake.counts(); ok != 1 {
			t.Fatalf("the API accepted %d triggers, want 1", ok)
		}
		b.click(b.find("#trigger-cancel"))
		b.exec(&open, "return document.getElementById('trigger-dialog').open")
		if open {
			t.Error("the trigger dialog did not close")
		}
	})

	t.Run("unreachable API", func(t *testing.T) {
		b := b.in(t)
		fake.setDown(true)
		defer fake.setDown(false)
		eventually(t, 30*time.Second, "#connection reports the API unreachable", func() (bool, string) {
			c := b.find("#connection")
			return b.attr(c, "data-state") == "error" && strings.Contains(b.text(c), "unreachable"), b.text(c)
		})
		ageAt := func() float64 {
			v, err := strconv.ParseFloat(b.attr(b.find("#last-checkpoint-age"), "data-seconds"), 64)
			if err != nil {
				t.Fatalf("#last-checkpoint-age data-seconds: %v", err)
			}
			return v
		}
		count := digits(t, b.textOf("#checkpoint-count"))
		// The page counts the age on its own while no answer comes: it
		// grows past where it was by more than a poll's worth. (How fast
		// is the browser's clock's business; a loaded machine only delays
		// it.)
		a1 := ageAt()
		eventually(t, 30*time.Second, "the age keeps counting with the API down", func() (bool, string) {
			a := ageAt()
			return a >= a1+2, fmt.Sprintf("%.1f s, was %.1f s", a, a1)
		})
		if n := digits(t, b.textOf("#checkpoint-count")); n != count {
			t.Errorf("#checkpoint-count changed from %d to %d while the API was down", count, n)
		}
		fake.setDown(false)
		eventually(t, 30*time.Second, "the page recovers when the API is back", func() (bool, string) {
			c := b.find("#connection")
			n := digits(t, b.textOf("#checkpoint-count"))
			return b.attr(c, "data-state") == "ok" && n > count, fmt.Sprintf("%s, count %d (was %d)", b.text(c), n, count)
		})
	})

	t.Run("no JavaScript errors", func(t *testing.T) {
		b := b.in(t)
		// The wrong token (401) and the outage (503) were logged by the
		// browser as failed requests; nothing else may be.
		checkNoErrors(b, regexp.MustCompile(`/api/v1/(pipeline|checkpoints)\S* - Failed to load resource: the server responded with a status of (401|503)`))
		// And the check can fail: break the page (remove a chart it draws
		// into) and its rendering error is recorded, while polling goes on.
		var polls int
		b.exec(&polls, "document.getElementById('chart-alignment').remove(); return window.__dashboard.polls")
		eventually(t, 30*time.Second, "window.__errors records a rendering error and polling goes on", func() (bool, string) {
			var got struct {
				Errors []string
				Polls  int
			}
			b.exec(&got, "return {Errors: window.__errors, Polls: window.__dashboard.polls}")
			return len(got.Errors) > 0 && strings.Contains(got.Errors[0], "Cannot read properties of null") && got.Polls > polls+1,
				fmt.Sprintf("%q after %d polls", got.Errors, got.Polls-polls)
		})
	})
}

// in returns the session reporting to the subtest t.
func (s *session) in(t *testing.T) *session {
	c := *s
	c.t = t
	return &c
}

// simAt is the simulated time at wall time w.
func (f *fakeAPI) simAt(w time.Time) time.Time {
	return f.simZero.Add(time.Duration(float64(w.Sub(f.wallZero)) * f.speed))
}

// digits parses a formatted count such as "1,234".
func digits(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, s))
	if err != nil {
		t.Fatalf("%q is not a count", s)
	}
	return n
}

// checkGraph checks one box per node in the column of its depth, with its
// rates and a backpressure bar as long as its ratio, and one labelled edge per
// input.
func checkGraph(b *session, fake *fakeAPI) {
	t := b.t
	type node struct {
		ID, Kind, Text     string
		Depth              int
		X, Y               float64
		In, Out, BP        float64
		BarWidth, BarTrack float64
	}
	var got struct {
		Nodes []node
		Edges []struct{ From, To, Part, Label string }
	}
	b.exec(&got, `
		const svg = document.getElementById('graph');
		const nodes = [...svg.querySelectorAll('[data-node-id]')].map(g => {
			const r = g.getBoundingClientRect();
			return {ID: g.dataset.nodeId, Kind: g.dataset.kind, Depth: +g.dataset.depth, Text: g.textContent, X: r.x, Y: r.y,
				In: +g.dataset.recordsInPerSecond, Out: +g.dataset.recordsOutPerSecond, BP: +g.dataset.backpressure,
				BarWidth: +g.querySelector('.bp-fill').getAttribute('width'), BarTrack: +g.querySelector('.bp-track').getAttribute('width')};
		});
		const edges = [...svg.querySelectorAll('[data-edge-from]')].map(e =>
			({From: e.dataset.edgeFrom, To: e.dataset.edgeTo, Part: e.dataset.partitioning}));
		return {Nodes: nodes, Edges: edges};`)

	// The expected columns, computed here independently: longest path from
	// a node without inputs.
	depth := map[string]int{}
	for range fakeGraph {
		for _, n := range fakeGraph {
			for _, in := range n.inputs {
				depth[n.id] = max(depth[n.id], depth[in.From]+1)
			}
		}
	}
	if len(got.Nodes) != len(fakeGraph) {
		t.Fatalf("#graph has %d nodes, want %d", len(got.Nodes), len(fakeGraph))
	}
	byID := map[string]node{}
	for _, n := range got.Nodes {
		byID[n.ID] = n
	}
	p := fake.pipeline(fake.simNow())
	for _, want := range p.Nodes {
		n, ok := byID[want.ID]
		if !ok {
			t.Errorf("node %s missing from #graph", want.ID)
			continue
		}
		if n.Kind != want.Kind || n.Depth != depth[want.ID] {
			t.Errorf("node %s: kind %s depth %d, want %s depth %d", n.ID, n.Kind, n.Depth, want.Kind, depth[want.ID])
		}
		if !strings.Contains(n.Text, "/s") || !strings.Contains(n.Text, fmt.Sprintf("×%d", want.Parallelism)) {
			t.Errorf("node %s text %q: want its rates (…/s) and its parallelism ×%d", n.ID, n.Text, want.Parallelism)
		}
		rate := n.Out
		if want.Kind == "sink" {
			rate = n.In
		}
		if rate <= 0 {
			t.Errorf("node %s shows rate %v, want > 0 (the simulation always flows)", n.ID, rate)
		}
		if n.BP < 0 || n.BP > 1 || n.BarTrack <= 0 || abs(n.BarWidth/n.BarTrack-n.BP) > 0.01 {
			t.Errorf("node %s: backpressure %.3f drawn as %.1f of %.1f px", n.ID, n.BP, n.BarWidth, n.BarTrack)
		}
	}
	// Columns left to right by depth; nodes of one column share their x.
	for _, a := range got.Nodes {
		for _, c := range got.Nodes {
			if a.Depth < c.Depth && a.X >= c.X || a.Depth == c.Depth && abs(a.X-c.X) > 0.5 {
				t.Errorf("node %s (depth %d, x %.0f) and %s (depth %d, x %.0f) are not laid out by depth", a.ID, a.Depth, a.X, c.ID, c.Depth, c.X)
			}
		}
	}
	var wantEdges, gotEdges []string
	for _, n := range fakeGraph {
		for _, in := range n.inputs {
			wantEdges = append(wantEdges, in.From+"→"+n.id+" "+in.Partitioning)
		}
	}
	for _, e := range got.Edges {
		gotEdges = append(gotEdges, e.From+"→"+e.To+" "+e.Part)
	}
	slices.Sort(wantEdges)
	slices.Sort(gotEdges)
	if !slices.Equal(gotEdges, wantEdges) {
		t.Errorf("edges %q, want %q", gotEdges, wantEdges)
	}
	var labels []string
	b.exec(&labels, "return [...document.querySelectorAll('#graph .edge-label')].map(l => l.textContent)")
	for _, want := range []string{"hash(customer_id)", "hash(region)", "forward"} {
		if !slices.Contains(labels, want) {
			t.Errorf("edge labels %q lack %q", labels, want)
		}
	}
}

// checkCharts checks that the charts plot the API's completed checkpoints in
// order, with the API's values, mark the failed ones, and take in new ones.
func checkCharts(b *session, fake *fakeAPI) {
	t := b.t
	type point struct {
		ID    int64
		X     float64
		Value float64
	}
	points := func(chart string) []point {
		var ps []point
		b.exec(&ps, `return [...document.querySelectorAll(arguments[0] + ' circle.point[data-checkpoint-id]')]
			.map(c => ({ID: +c.dataset.checkpointId, X: +c.getAttribute('cx'), Value: +c.dataset.value}))`, chart)
		return ps
	}
	dur := points("#chart-duration")
	if len(dur) == 0 || len(dur) > 60 {
		t.Fatalf("#chart-duration has %d points, want 1..60", len(dur))
	}
	now := fake.simNow()
	for i, p := range dur {
		c, ok := fake.checkpoint(p.ID, now)
		if !ok || c.Status != "completed" || abs(c.DurationMS-p.Value) > 0.001 {
			t.Fatalf("#chart-duration point %d: checkpoint %d at %.3f ms; the API has it %s at %.3f ms", i, p.ID, p.Value, c.Status, c.DurationMS)
		}
		if i > 0 && (p.ID <= dur[i-1].ID || p.X <= dur[i-1].X) {
			t.Fatalf("#chart-duration points out of order: %+v then %+v", dur[i-1], p)
		}
	}
	for chart, value := range map[string]func(apiCheckpoint) float64{
		"#chart-size":      func(c apiCheckpoint) float64 { return float64(c.StateSizeBytes) },
		"#chart-alignment": func(c apiCheckpoint) float64 { return c.AlignmentMaxMS },
	} {
		ps := points(chart)
		if len(ps) == 0 {
			t.Errorf("%s has no points", chart)
			continue
		}
		last := ps[len(ps)-1]
		if c, _ := fake.checkpoint(last.ID, now); abs(value(c)-last.Value) > 0.001 {
			t.Errorf("%s: checkpoint %d plotted at %v, the API says %v", chart, last.ID, last.Value, value(c))
		}
	}
	var axis struct{ Ticks, Failed int }
	b.exec(&axis, `return {Ticks: document.querySelectorAll('#chart-duration .axis text').length,
		Failed: document.querySelectorAll('#chart-duration .failed-mark').length}`)
	if axis.Ticks < 6 || axis.Failed == 0 {
		t.Errorf("#chart-duration has %d axis labels and %d failed marks, want ≥ 6 and ≥ 1", axis.Ticks, axis.Failed)
	}
	newest := dur[len(dur)-1].ID
	eventually(t, 30*time.Second, "#chart-duration plots a newer checkpoint", func() (bool, string) {
		ps := points("#chart-duration")
		return len(ps) > 0 && ps[len(ps)-1].ID > newest, fmt.Sprintf("%d points, newest was %d", len(ps), newest)
	})
}

// checkNoErrors fails on anything in window.__errors and on every console
// message of level SEVERE that allowed does not match.
func checkNoErrors(b *session, allowed *regexp.Regexp) {
	t := b.t
	var errs []string
	b.exec(&errs, "return window.__errors")
	if len(errs) > 0 {
		t.Errorf("window.__errors = %q", errs)
	}
	for _, e := range b.browserLog() {
		if e.Level == "SEVERE" && (allowed == nil || !allowed.MatchString(e.Message)) {
			t.Errorf("browser console: %s %s: %s", e.Level, e.Source, e.Message)
		}
	}
}

// takeScreenshot grows the window to the page's full height, captures it,
// checks that it shows something, and writes it where -dashboard.screenshot
// says.
func takeScreenshot(b *session, width int) {
	t := b.t
	var size struct{ Page, Chrome int }
	b.exec(&size, "return {Page: document.documentElement.scrollHeight, Chrome: window.outerHeight - window.innerHeight}")
	b.resize(width, size.Page+size.Chrome)
	var renders int
	b.exec(&renders, "return window.__dashboard.renders")
	eventually(t, 30*time.Second, "a render after the resize", func() (bool, string) {
		var n int
		b.exec(&n, "return window.__dashboard.renders")
		return n > renders+1, fmt.Sprintf("%d renders", n)
	})
	shot := b.screenshot()
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatalf("screenshot is not a PNG: %v", err)
	}
	if r := img.Bounds(); r.Dx() < width*9/10 || r.Dy() < 900 {
		t.Errorf("screenshot is %dx%d, want about %dx%d", r.Dx(), r.Dy(), width, size.Page)
	}
	if n := colours(img); n < 32 {
		t.Errorf("screenshot has %d colours: the page looks blank", n)
	}
	if *screenshotPath != "" {
		if err := os.WriteFile(*screenshotPath, shot, 0o644); err != nil {
			t.Fatalf("write screenshot: %v", err)
		}
		abs, _ := filepath.Abs(*screenshotPath)
		t.Logf("wrote %s (%d bytes)", abs, len(shot))
	}
}

// colours counts the distinct colours of a sample of img's pixels.
func colours(img image.Image) int {
	seen := map[[4]uint32]bool{}
	r := img.Bounds()
	for y := r.Min.Y; y < r.Max.Y; y += 3 {
		for x := r.Min.X; x < r.Max.X; x += 3 {
			cr, cg, cb, ca := img.At(x, y).RGBA()
			seen[[4]uint32{cr, cg, cb, ca}] = true
		}
	}
	return len(seen)
}

func abs(v float64) float64 {
	if v < 0 {
		return -v
	}
	return v
}

// TestServeFake serves the dashboard with the simulated API, for working on
// the page in a browser:
//
//	go test ./dashboard -run TestServeFake -timeout 0 -dashboard.serve=127.0.0.1:8090
func TestServeFake(t *testing.T) {
	if *serveAddr == "" {
		t.Skip("set -dashboard.serve=HOST:PORT to serve the dashboard with the simulated API")
	}
	fake := newFakeAPI(time.Now)
	srv := &http.Server{Addr: *serveAddr, Handler: fake.handler(), ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if deadline, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline.Add(-time.Second))
		defer cancel()
	}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	t.Logf("dashboard with the simulated API at http://%s/ (token %s); interrupt to stop", *serveAddr, fakeToken)
	if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		t.Fatal(err)
	}
}
