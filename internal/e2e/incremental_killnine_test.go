package e2e

import (
	"flag"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/connector/datagen"
	"github.com/ingest-engine/ingest/internal/testkit"
	"github.com/ingest-engine/ingest/storage"
)

var incKillSeed = flag.Uint64("inckillseed", 0, "replay TestIncrementalKillNine with this seed (0: random)")

// The incremental kill test's input: few records per checkpoint interval
// over many keys, so that each checkpoint writes the key groups its records
// reached and takes the others from earlier checkpoints' files.
const (
	ikCount    = 30000
	ikRate     = 1000 // records per second: 100 per checkpoint interval, over 128 key groups
	ikKeys     = 20000
	ikInterval = 100 * time.Millisecond
)

// TestIncrementalKillNine runs datagen → 1 s tumbling window → file sink as
// a separate process whose checkpoints are incremental (each one rewrites
// only the key groups its ~100 records reached), kills it with SIGKILL at
// random moments and while a subtask's state file is written but not yet
// acknowledged, restarts it until it exits 0, and checks that the committed
// output is exactly the windows of the input and that checkpoints did build
// on earlier ones' files (so recoveries read chains).
func TestIncrementalKillNine(t *testing.T) {
	serviceKillTest(t, "inckillseed", *incKillSeed, incrementalScenario)
}

func incrementalScenario(t *testing.T, bin string, seed uint64) soakResult {
	doc := testkit.WindowPipeline{Name: "incremental-killnine", Interval: ikInterval, Retain: 2,
		Count: ikCount, Rate: ikRate, Keys: ikKeys, Parallelism: 1, WindowParallelism: 2}.YAML()
	work, yaml := scenarioDir(t, doc)
	ckpts, out := filepath.Join(work, "data", "checkpoints"), filepath.Join(work, "data", "out")
	w := knWatch(out, seed)

	// Count the complete checkpoints seen to build on earlier ones.
	var (
		mu       sync.Mutex
		building = map[int64]bool{}
		done     = make(chan struct{})
		stopped  sync.WaitGroup
	)
	stopped.Go(func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
			for id, refs := range buildingOn(ckpts) {
				if len(refs) > 0 {
					mu.Lock()
					building[id] = true
					mu.Unlock()
				}
			}
		}
	})

	var res soakResult
	res.Kills, res.Aimed = killSchedule{
		Bin: bin, YAML: yaml, Ckpts: ckpts, Seed: seed,
		Kills: 8, AimedKills: 3, Aim: "task/after-snapshot-before-ack", Pause: 300 * time.Millisecond,
		MinDelay: 600 * time.Millisecond, MaxDelay: 3 * time.Second, Budget: 30 * time.Second, FinalWait: 90 * time.Second,
	}.run(t)
	close(done)
	stopped.Wait()

	checkFileOutput(t, w, out, testkit.ExpectedWindows(ikCount, ikKeys, datagen.DefaultStartTime, time.Millisecond, time.Second), &res)
	mu.Lock()
	n := len(building)
	mu.Unlock()
	t.Logf("%d complete checkpoints seen building on earlier ones' state files", n)
	if n == 0 {
		t.Error("no complete checkpoint built on an earlier one: the checkpoints were not incremental")
	}
	return res
}

// buildingOn reads the complete checkpoints in dir and returns, for each,
// the earlier checkpoints its state builds on. Checkpoints deleted or
// written while it reads are skipped.
func buildingOn(dir string) map[int64][]int64 {
	out := map[int64][]int64{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return out
	}
	for _, e := range entries {
		id, ok := storage.ParseCheckpointDirName(e.Name())
		if !ok {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(dir, e.Name(), storage.MetadataName))
		if err != nil {
			continue
		}
		payload, err := storage.Decode(e.Name(), raw)
		if err != nil {
			continue
		}
		m, err := checkpoint.DecodeMetadata(payload)
		if err != nil {
			continue
		}
		out[id] = m.References()
	}
	return out
}
