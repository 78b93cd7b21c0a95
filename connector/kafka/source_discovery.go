package kafka

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// srcDiscoveryMaxFailures is how many listings in a row may fail before the
// subtask fails: discovery must not stop silently.
const srcDiscoveryMaxFailures = 10

// srcFound is a partition discovered at run time and where to start it.
type srcFound struct {
	partition int32
	// start is its log start offset when it was listed.
	start int64
}

// srcDiscovery lists the topic's partitions every interval on its own
// goroutine, so Read never waits for a metadata round trip, and hands the
// partitions that are new and owned by the subtask to Read.
type srcDiscovery struct {
	adm                  *kadm.Client
	topic                string
	subtask, parallelism int
	interval, timeout    time.Duration
	log                  *slog.Logger

	cancel context.CancelFunc
	done   chan struct{}
	// known are the owned partitions assigned at open or handed over; only
	// the discovery goroutine uses it after start.
	known map[int32]bool

	// ready is set when found or err has something for take.
	ready atomic.Bool
	mu    sync.Mutex
	found []srcFound // guarded by mu
	err   error      // guarded by mu
}

// startDiscovery starts listing; known are the partitions the subtask
// already reads.
func startDiscovery(adm *kadm.Client, cfg *SourceConfig, subtask, parallelism int, known map[int32]bool, log *slog.Logger) *srcDiscovery {
	ctx, cancel := context.WithCancel(context.Background())
	d := &srcDiscovery{adm: adm, topic: cfg.Topic, subtask: subtask, parallelism: parallelism,
		interval: cfg.DiscoveryInterval, timeout: cfg.RequestTimeout, log: log,
		cancel: cancel, done: make(chan struct{}), known: known}
	go d.run(ctx)
	return d
}

func (d *srcDiscovery) run(ctx context.Context) {
	defer close(d.done)
	tick := time.NewTicker(d.interval)
	defer tick.Stop()
	failures := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		lctx, cancel := context.WithTimeout(ctx, d.timeout)
		starts, err := srcListOffsets(lctx, d.adm, d.topic, srcLogStart)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			failures++
			d.log.Warn("kafka source: partition discovery failed", "topic", d.topic, "failures_in_a_row", failures, "err", err)
			if failures >= srcDiscoveryMaxFailures {
				d.mu.Lock()
				d.err = fmt.Errorf("kafka source: partition discovery of topic %s failed %d times in a row: %w", d.topic, failures, err)
				d.mu.Unlock()
				d.ready.Store(true)
				return
			}
			continue
		}
		failures = 0
		var found []srcFound
		for p, start := range starts {
			if srcOwns(p, d.subtask, d.parallelism) && !d.known[p] {
				d.known[p] = true
				found = append(found, srcFound{partition: p, start: start})
			}
		}
		if len(found) > 0 {
			slices.SortFunc(found, func(a, b srcFound) int { return int(a.partition - b.partition) })
			d.mu.Lock()
			d.found = append(d.found, found...)
			d.mu.Unlock()
			d.ready.Store(true)
		}
	}
}

// take returns the partitions found since the last take, or the error that
// stopped discovery. It costs an atomic load when there is nothing.
func (d *srcDiscovery) take() ([]srcFound, error) {
	if d == nil || !d.ready.Load() {
		return nil, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.ready.Store(false)
	found := d.found
	d.found = nil
	return found, d.err
}

// stop ends the goroutine and waits for it.
func (d *srcDiscovery) stop() {
	if d == nil {
		return
	}
	d.cancel()
	<-d.done
}
