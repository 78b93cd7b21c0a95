package e2e

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ingest-engine/ingest/internal/natstest"
	"github.com/ingest-engine/ingest/internal/testkit"
	"github.com/ingest-engine/ingest/storage"
)

var natsKillSeed = flag.Uint64("natskillseed", 0, "replay TestNATSKillNine with this seed (0: random)")

const (
	nkMessages   = 400_000
	nkKeys       = 20
	nkStep       = time.Millisecond // event time between consecutive messages
	nkKills      = 12               // at least this many SIGKILLs
	nkCommitKill = 2                // of them, at least this many paused in sink/file/mid-commit
	nkFailpoint  = "sink/file/mid-commit"
	nkPause      = 300 * time.Millisecond
	nkMaxRuns    = 40
	nkBudget     = 30 * time.Second // the kill phase stops drawing new runs after this

	// nkThrottle slows the runs that are killed: the source has no rate
	// option and consumes the whole stream in well under a second, less
	// than the kills cut short together. Each batch a window or sink subtask
	// processes sleeps. The final run is not throttled.
	nkThrottle = "task/process-batch=sleep(10ms)"
)

func nkYAML(stream string) string {
	return fmt.Sprintf(`pipeline: nats-killnine
checkpoint: {interval: 50ms, dir: ckpts}
sources:
  js:
    type: nats
    url: nats://127.0.0.1:4222
    stream: %s
    subject: %s.>
    stop_at: latest
    fields: {key: int, value: int, ts: time}
    event_time: {field: ts}
transforms:
  w:
    type: window
    input: js
    key: key
    size: 1s
    parallelism: 2
    aggregates: {count: count(), sum: sum(value)}
sinks:
  out:
    type: file
    input: w
    parallelism: 2
    path: out
`, stream, stream)
}

// nkPublish publishes the messages to a new stream and returns the stream's
// name and the windows they imply.
func nkPublish(t *testing.T) (string, map[testkit.WindowKey]testkit.WindowAgg) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nc, err := natsgo.Connect("nats://127.0.0.1:4222")
	nkNeedService(t, "NATS JetStream", err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(8192))
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("KILLNINE_%d", time.Now().UnixNano())
	if _, err := natstest.CreateStream(ctx, js, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}}); err != nil {
		nkNeedService(t, "NATS JetStream", err)
	}
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), name) })

	want := map[testkit.WindowKey]testkit.WindowAgg{}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const chunk = 4096
	for i := int64(0); i < nkMessages; i++ {
		ts := base.Add(time.Duration(i) * nkStep)
		key, value := i%nkKeys, i%1000
		msg := fmt.Sprintf(`{"key":%d,"value":%d,"ts":%q}`, key, value, ts.Format(time.RFC3339Nano))
		if _, err := js.PublishAsync(name+".e", []byte(msg)); err != nil {
			t.Fatalf("publishing message %d: %v", i, err)
		}
		if (i+1)%chunk == 0 || i == nkMessages-1 {
			select {
			case <-js.PublishAsyncComplete():
			case <-ctx.Done():
				t.Fatalf("publishing: %v", ctx.Err())
			}
		}
		k := testkit.WindowKey{Key: key, Start: ts.Truncate(time.Second)}
		a := want[k]
		a.Count++
		a.Sum += value
		want[k] = a
	}
	info, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if n := info.CachedInfo().State.Msgs; n != nkMessages {
		t.Fatalf("stream %s holds %d messages, want %d", name, n, nkMessages)
	}
	return name, want
}

// nkLatest returns the latest complete checkpoint's id (0: none) and whether it is final.
func nkLatest(dir string) (int64, error) {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	st, err := storage.NewLocal(dir)
	if err != nil {
		return 0, err
	}
	id, _, _, err := storage.Latest(context.Background(), st)
	if errors.Is(err, storage.ErrNotFound) {
		return 0, nil
	}
	return id, err
}

// TestNATSKillNine runs the YAML pipeline NATS JetStream → tumbling window →
// file sink as a separate process on the real NATS server, kills it with
// SIGKILL at random moments early in each run and while a commit is paused
// between moving two staged files, restarts it until it exits 0, and checks
// that the committed output is exactly the windows the published messages
// imply, while a reader checks that committed output appears atomically.
func TestNATSKillNine(t *testing.T) {
	serviceKillTest(t, "natskillseed", *natsKillSeed, natsScenario)
}

// natsScenario is one kill cycle of NATS → window → file on a new stream.
func natsScenario(t *testing.T, bin string, seed uint64) soakResult {
	began := time.Now()
	stream, want := nkPublish(t)
	t.Logf("published %d messages to %s in %v: %d windows expected", nkMessages, stream, time.Since(began).Round(time.Millisecond), len(want))

	work, yaml := scenarioDir(t, nkYAML(stream))
	ckpts, out := filepath.Join(work, "ckpts"), filepath.Join(work, "out")
	w := knWatch(out, seed)

	var res soakResult
	res.Kills, res.Aimed = killSchedule{
		Bin: bin, YAML: yaml, Ckpts: ckpts, Seed: seed,
		Kills: nkKills, AimedKills: nkCommitKill, Aim: nkFailpoint, Pause: nkPause,
		Throttle: nkThrottle, Budget: nkBudget, MaxRuns: nkMaxRuns, FinalWait: 30 * time.Second,
	}.run(t)

	checkFileOutput(t, w, out, want, &res)
	t.Logf("cycle %v", time.Since(began).Round(time.Millisecond))
	return res
}

// nkNeedService skips (or, with INGEST_REQUIRE_SERVICES=1, fails) when a
// service cannot be used.
func nkNeedService(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	msg := fmt.Sprintf("%s is not reachable (%v); start it on 127.0.0.1 to run this test", what, err)
	if os.Getenv("INGEST_REQUIRE_SERVICES") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}
