package dashboard_test

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/ingest-engine/ingest/dashboard"
)

// The JSON the dashboard reads, as package httpapi serves it. These mirror
// the contract field by field; the fake below fills them.

type apiPipeline struct {
	Name                       string        `json:"name"`
	Status                     string        `json:"status"`
	StartedAt                  time.Time     `json:"started_at"`
	Restarts                   int           `json:"restarts"`
	Guarantee                  apiGuarantee  `json:"guarantee"`
	Nodes                      []apiNode     `json:"nodes"`
	LastCheckpoint             *apiLastCheck `json:"last_checkpoint"`
	SecondsSinceLastCheckpoint *float64      `json:"seconds_since_last_checkpoint"`
	CommittedCheckpoints       int           `json:"committed_checkpoints"`
	RecoveryHistory            []apiRecovery `json:"recovery_history"`
}

type apiRecovery struct {
	Time               time.Time `json:"time"`
	Attempt            int       `json:"attempt"`
	Cause              string    `json:"cause"`
	Class              string    `json:"class"`
	Failure            string    `json:"failure"`
	RestoredCheckpoint *int64    `json:"restored_checkpoint"`
}

type apiGuarantee struct {
	Level   string   `json:"level"`
	Reasons []string `json:"reasons"`
}

type apiNode struct {
	ID                  string     `json:"id"`
	Kind                string     `json:"kind"`
	Describe            string     `json:"describe"`
	Parallelism         int        `json:"parallelism"`
	Inputs              []apiInput `json:"inputs"`
	RecordsIn           int64      `json:"records_in"`
	RecordsOut          int64      `json:"records_out"`
	RecordsInPerSecond  float64    `json:"records_in_per_second"`
	RecordsOutPerSecond float64    `json:"records_out_per_second"`
	BackpressureRatio   float64    `json:"backpressure_ratio"`
	Watermark           *time.Time `json:"watermark"`
	WatermarkLagMS      *float64   `json:"watermark_lag_ms"`
}

type apiInput struct {
	From         string `json:"from"`
	Partitioning string `json:"partitioning"`
}

type apiLastCheck struct {
	ID          int64     `json:"id"`
	CompletedAt time.Time `json:"completed_at"`
	DurationMS  float64   `json:"duration_ms"`
}

type apiCheckpoint struct {
	ID             int64        `json:"id"`
	TriggerTime    time.Time    `json:"trigger_time"`
	DurationMS     float64      `json:"duration_ms"`
	SyncMS         float64      `json:"sync_ms"`
	AsyncMS        float64      `json:"async_ms"`
	AlignmentMaxMS float64      `json:"alignment_max_ms"`
	StateSizeBytes int64        `json:"state_size_bytes"`
	Status         string       `json:"status"`
	FailureReason  string       `json:"failure_reason"`
	Subtasks       []apiSubtask `json:"subtasks,omitempty"`
}

type apiSubtask struct {
	Operator       string  `json:"operator"`
	Subtask        int     `json:"subtask"`
	SyncMS         float64 `json:"sync_ms"`
	AsyncMS        float64 `json:"async_ms"`
	AlignmentMS    float64 `json:"alignment_ms"`
	StateSizeBytes int64   `json:"state_size_bytes"`
}

// fakeAPI simulates a running pipeline behind the HTTP API, for the browser
// test and for working on the page (go test ./dashboard -run TestServeFake
// -dashboard.serve=127.0.0.1:8090). Everything it answers is a pure function
// of the simulated time, which runs speed times faster than the wall clock:
// with the defaults a checkpoint is triggered every 10 simulated seconds, that
// is every 200 ms of wall time. Checkpoint k fails when k%9 == 4 (it expires)
// or k%23 == 11 (a task fails, and the pipeline restarts); the history starts
// with prefill checkpoints already taken so the charts are full at once.
type fakeAPI struct {
	token    string        // bearer token of the POST endpoints
	speed    float64       // simulated seconds per wall second
	interval time.Duration // simulated time between checkpoint triggers
	prefill  int           // checkpoints in the history when the fake starts
	wallZero time.Time     // wall time of the fake's start
	simZero  time.Time     // simulated time of the fake's start
	origin   time.Time     // simulated time before checkpoint 1: simZero - prefill*interval
	now      func() time.Time

	mu       sync.Mutex
	down     bool // answer 503 to every API request
	triggers int  // accepted POST /api/v1/checkpoints
	rejected int  // POST /api/v1/checkpoints with a wrong token
}

const (
	fakeToken      = "s3cret-token"
	fakeHistoryMax = 1000 // the API's limit on /api/v1/checkpoints
)

// fakeNode is one node of the simulated pipeline with its base rate.
type fakeNode struct {
	id, kind, describe string
	parallelism        int
	inputs             []apiInput
	bp                 float64 // mean backpressure ratio
	state              int64   // bytes of state per subtask at checkpoint 0
	growth             int64   // bytes each subtask's state grows per checkpoint
}

// fakeGraph: two sources joined, windowed, written transactionally.
var fakeGraph = []fakeNode{
	{id: "orders", kind: "source", describe: "kafka topic orders (12 partitions)", parallelism: 4, bp: 0.18, state: 600},
	{id: "customers", kind: "source", describe: "nats stream customers (JetStream)", parallelism: 1, bp: 0.02, state: 120},
	{id: "parse", kind: "operator", describe: "filter amount > 0; map to row", parallelism: 4, bp: 0.05,
		inputs: []apiInput{{From: "orders", Partitioning: "forward"}}},
	{id: "enrich", kind: "operator", describe: "join orders with customers on customer_id", parallelism: 4, bp: 0.52, state: 48 << 20, growth: 96 << 10,
		inputs: []apiInput{{From: "parse", Partitioning: "hash(customer_id)"}, {From: "customers", Partitioning: "hash(id)"}}},
	{id: "revenue", kind: "operator", describe: "tumbling 1m window: sum(amount) by region", parallelism: 2, bp: 0.14, state: 9 << 20, growth: 8 << 10,
		inputs: []apiInput{{From: "enrich", Partitioning: "hash(region)"}}},
	{id: "warehouse", kind: "sink", describe: "postgres table revenue_by_region (two-phase commit)", parallelism: 2, bp: 0.03, state: 4 << 10,
		inputs: []apiInput{{From: "revenue", Partitioning: "forward"}}},
}

// newFakeAPI returns a fake whose clock is now.
func newFakeAPI(now func() time.Time) *fakeAPI {
	wall := now()
	f := &fakeAPI{
		token:    fakeToken,
		speed:    50,
		interval: 10 * time.Second,
		prefill:  60,
		wallZero: wall,
		simZero:  wall,
		now:      now,
	}
	f.origin = f.simZero.Add(-time.Duration(f.prefill) * f.interval)
	return f
}

// handler serves the real dashboard at "/" and the simulated API beside it,
// as httpapi mounts them.
func (f *fakeAPI) handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", dashboard.Handler())
	mux.HandleFunc("GET /api/v1/pipeline", f.guard(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, f.pipeline(f.simNow()))
	}))
	mux.HandleFunc("GET /api/v1/checkpoints", f.guard(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"checkpoints": f.history(f.simNow())})
	}))
	mux.HandleFunc("GET /api/v1/checkpoints/{id}", f.guard(func(w http.ResponseWriter, r *http.Request) {
		id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
		c, ok := f.checkpoint(id, f.simNow())
		if err != nil || !ok {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": "no checkpoint " + r.PathValue("id")})
			return
		}
		writeJSON(w, http.StatusOK, c)
	}))
	mux.HandleFunc("POST /api/v1/checkpoints", f.guard(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer "+f.token {
			f.rejected++
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "missing or wrong bearer token"})
			return
		}
		f.triggers++
		writeJSON(w, http.StatusAccepted, map[string]int64{"id": f.triggered(f.simNow()) + 1})
	}))
	return mux
}

// guard answers 503 while the fake is down.
func (f *fakeAPI) guard(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		down := f.down
		f.mu.Unlock()
		if down {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "pipeline unavailable (simulated)"})
			return
		}
		next(w, r)
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// setDown makes the API unreachable (503) or reachable again.
func (f *fakeAPI) setDown(down bool) {
	f.mu.Lock()
	f.down = down
	f.mu.Unlock()
}

// counts returns the accepted and the rejected trigger requests.
func (f *fakeAPI) counts() (triggers, rejected int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.triggers, f.rejected
}

// simNow is the simulated time now.
func (f *fakeAPI) simNow() time.Time {
	wall := f.now().Sub(f.wallZero)
	return f.simZero.Add(time.Duration(float64(wall) * f.speed))
}

// triggered is the id of the newest checkpoint triggered by simulated time t.
func (f *fakeAPI) triggered(t time.Time) int64 {
	if t.Before(f.origin) {
		return 0
	}
	return int64(t.Sub(f.origin) / f.interval)
}

// noise is a deterministic pseudo-random number in [0, 1) for (k, salt).
func noise(k int64, salt string) float64 {
	h := fnv.New64a()
	_ = binary.Write(h, binary.LittleEndian, k)
	h.Write([]byte(salt))
	// FNV's high bits barely change with the last byte; mix them
	// (SplitMix64's finalizer) so "enrich0" and "enrich1" differ.
	z := h.Sum64()
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	z ^= z >> 31
	return float64(z>>11) / (1 << 53)
}

// failure says whether checkpoint k fails, why, after how long, and whether
// the failure restarts the pipeline.
func failure(k int64) (reason string, after time.Duration, restart bool) {
	switch {
	case k%23 == 11:
		return fmt.Sprintf("checkpoint %d aborted: task revenue#1 failed: sink warehouse: prepare: write tcp 10.0.4.7:5432: connection reset by peer; restarting from checkpoint %d", k, k-1),
			time.Duration(1200+noise(k, "fail")*900) * time.Millisecond, true
	case k%9 == 4:
		return fmt.Sprintf("checkpoint %d expired after 8s: subtask enrich#%d did not acknowledge (aligning, input customers had no barrier yet)", k, int(noise(k, "sub")*4)),
			8 * time.Second, false
	}
	return "", 0, false
}

// checkpoint is checkpoint k as simulated time t sees it; false when it has
// not been triggered yet or has left the history.
func (f *fakeAPI) checkpoint(k int64, t time.Time) (apiCheckpoint, bool) {
	newest := f.triggered(t)
	if k < 1 || k > newest || k <= newest-fakeHistoryMax {
		return apiCheckpoint{}, false
	}
	trigger := f.origin.Add(time.Duration(k) * f.interval)
	c := apiCheckpoint{ID: k, TriggerTime: trigger, Status: "completed", Subtasks: []apiSubtask{}}
	// A slow drift over ~40 checkpoints plus noise, so the charts have shape.
	drift := 1 + 0.45*math.Sin(float64(k)/6.5)
	for _, n := range fakeGraph {
		for i := range n.parallelism {
			salt := n.id + strconv.Itoa(i)
			st := apiSubtask{Operator: n.id, Subtask: i, SyncMS: 2 + noise(k, salt+"s")*6}
			if n.state > 0 {
				st.StateSizeBytes = n.state + n.growth*k + int64(noise(k, salt+"b")*float64(n.state)/20)
				st.SyncMS += float64(st.StateSizeBytes>>20) * 0.9
				st.AsyncMS = float64(st.StateSizeBytes>>20)*14*drift + noise(k, salt+"a")*60
			}
			if n.kind != "source" { // subtasks with input channels align barriers
				st.AlignmentMS = (20 + 260*n.bp*drift) * (0.4 + noise(k, salt+"l"))
			}
			c.Subtasks = append(c.Subtasks, st)
			c.StateSizeBytes += st.StateSizeBytes
			c.SyncMS = math.Max(c.SyncMS, st.SyncMS)
			c.AsyncMS = math.Max(c.AsyncMS, st.AsyncMS)
			c.AlignmentMaxMS = math.Max(c.AlignmentMaxMS, st.AlignmentMS)
		}
	}
	c.DurationMS = c.AlignmentMaxMS + c.SyncMS + c.AsyncMS + 40 + noise(k, "overhead")*80
	took := time.Duration(c.DurationMS * float64(time.Millisecond))
	if reason, after, _ := failure(k); reason != "" {
		c.Status, c.FailureReason, took = "failed", reason, after
		c.DurationMS = float64(after) / float64(time.Millisecond)
	}
	if t.Before(trigger.Add(took)) {
		c.Status, c.FailureReason = "in_progress", ""
		c.DurationMS = float64(t.Sub(trigger)) / float64(time.Millisecond)
	}
	return c, true
}

// history is GET /api/v1/checkpoints at t: newest first, at most 1000,
// without the per-subtask detail.
func (f *fakeAPI) history(t time.Time) []apiCheckpoint {
	out := []apiCheckpoint{}
	for k := f.triggered(t); k >= 1 && len(out) < fakeHistoryMax; k-- {
		c, _ := f.checkpoint(k, t)
		c.Subtasks = nil
		out = append(out, c)
	}
	return out
}

// restartsAt counts the restarts by simulated time t and returns when the
// newest one happened.
func (f *fakeAPI) restartsAt(t time.Time) (n int, last time.Time) {
	for k := int64(11); k <= f.triggered(t); k += 23 {
		_, after, restart := failure(k)
		at := f.origin.Add(time.Duration(k)*f.interval + after)
		if restart && !at.After(t) {
			n, last = n+1, at
		}
	}
	return n, last
}

// recoveries are the restarts by simulated time t, newest first: each
// restores the newest checkpoint that completed before the failure.
func (f *fakeAPI) recoveries(t time.Time) []apiRecovery {
	out := []apiRecovery{}
	attempt := 0
	for k := int64(11); k <= f.triggered(t); k += 23 {
		reason, after, restart := failure(k)
		at := f.origin.Add(time.Duration(k)*f.interval + after)
		if !restart || at.After(t) {
			continue
		}
		attempt++
		e := apiRecovery{Time: at, Attempt: attempt, Cause: "restart", Class: "task", Failure: reason}
		for j := k - 1; j >= 1; j-- {
			if c, ok := f.checkpoint(j, at); ok && c.Status == "completed" {
				id := j
				e.RestoredCheckpoint = &id
				break
			}
		}
		out = append([]apiRecovery{e}, out...)
	}
	return out
}

// pipeline is GET /api/v1/pipeline at simulated time t.
func (f *fakeAPI) pipeline(t time.Time) apiPipeline {
	restarts, lastRestart := f.restartsAt(t)
	status := "running"
	recovering := restarts > 0 && t.Sub(lastRestart) < 4*time.Second
	if recovering {
		status = "recovering"
	}
	started := f.origin.Add(-45 * time.Second)
	p := apiPipeline{
		Name:      "orders-revenue",
		Status:    status,
		StartedAt: started,
		Restarts:  restarts,
		Guarantee: apiGuarantee{Level: "exactly-once", Reasons: []string{
			"sources orders (kafka) and customers (nats) are replayable from checkpointed positions",
			"sink warehouse (postgres) commits with two-phase commit on checkpoint completion",
			"checkpoint mode is aligned (exactly-once)",
		}},
		Nodes:           []apiNode{},
		RecoveryHistory: f.recoveries(t),
	}
	elapsed := t.Sub(started).Seconds()
	phase := t.Sub(f.simZero).Seconds()
	ordersRate := 42000 * (1 + 0.25*math.Sin(phase/90))
	customersRate := 1800 * (1 + 0.3*math.Sin(phase/40+1))
	if recovering {
		ordersRate, customersRate = ordersRate*0.05, customersRate*0.05
	}
	parseOut := ordersRate * 0.97
	rates := map[string][2]float64{ // in, out per second
		"orders":    {0, ordersRate},
		"customers": {0, customersRate},
		"parse":     {ordersRate, parseOut},
		"enrich":    {parseOut + customersRate, parseOut},
		"revenue":   {parseOut, 12 + 4*math.Sin(phase/30)},
		"warehouse": {12 + 4*math.Sin(phase/30), 0},
	}
	for i, n := range fakeGraph {
		r := rates[n.id]
		lag := time.Duration(1500+i*400) * time.Millisecond
		wm := t.Add(-lag)
		lagMS := float64(lag) / float64(time.Millisecond)
		bp := math.Min(1, math.Max(0, n.bp*(1+0.35*math.Sin(phase/20+float64(i)))))
		p.Nodes = append(p.Nodes, apiNode{
			ID: n.id, Kind: n.kind, Describe: n.describe, Parallelism: n.parallelism, Inputs: append([]apiInput{}, n.inputs...),
			RecordsIn: int64(r[0] * elapsed), RecordsOut: int64(r[1] * elapsed),
			RecordsInPerSecond: r[0], RecordsOutPerSecond: r[1], BackpressureRatio: bp, Watermark: &wm, WatermarkLagMS: &lagMS,
		})
	}
	for k := f.triggered(t); k >= 1; k-- {
		c, _ := f.checkpoint(k, t)
		if c.Status != "completed" {
			continue
		}
		if p.LastCheckpoint == nil {
			done := c.TriggerTime.Add(time.Duration(c.DurationMS * float64(time.Millisecond)))
			p.LastCheckpoint = &apiLastCheck{ID: c.ID, CompletedAt: done, DurationMS: c.DurationMS}
			age := t.Sub(done).Seconds()
			p.SecondsSinceLastCheckpoint = &age
		}
		p.CommittedCheckpoints++
	}
	return p
}
