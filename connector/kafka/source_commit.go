package kafka

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// srcMaxPendingPositions bounds the positions a subtask keeps for checkpoints
// not yet known complete (a run of failed checkpoints).
const srcMaxPendingPositions = 64

// srcPending is the position a subtask reported for checkpoint id.
type srcPending struct {
	id      int64
	offsets map[int32]int64
}

// srcGroupCommitter copies completed checkpoints' offsets to a consumer group
// for monitoring, on its own goroutine so the task never waits for Kafka.
// Only the newest request is kept: commits are progress reports, and a newer
// one subsumes an older one. Failures are logged, never returned: the
// checkpoint, not the group, is the source of truth.
type srcGroupCommitter struct {
	adm     *kadm.Client
	group   string
	topic   string
	timeout time.Duration
	log     *slog.Logger

	wake chan struct{}
	quit chan struct{}
	done chan struct{}

	mu   sync.Mutex
	next *srcPending // guarded by mu

	// committed is the newest checkpoint whose offsets were committed.
	committed atomic.Int64
}

func startGroupCommitter(adm *kadm.Client, cfg *SourceConfig, log *slog.Logger) *srcGroupCommitter {
	c := &srcGroupCommitter{adm: adm, group: cfg.Group, topic: cfg.Topic, timeout: cfg.RequestTimeout, log: log,
		wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	go c.run()
	return c
}

// request replaces the pending commit with p.
func (c *srcGroupCommitter) request(p srcPending) {
	c.mu.Lock()
	c.next = &p
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *srcGroupCommitter) run() {
	defer close(c.done)
	for {
		select {
		case <-c.wake:
			c.commitPending()
		case <-c.quit:
			// The last completed checkpoint's offsets still go out, bounded
			// by the request timeout.
			c.commitPending()
			return
		}
	}
}

func (c *srcGroupCommitter) commitPending() {
	c.mu.Lock()
	p := c.next
	c.next = nil
	c.mu.Unlock()
	if p == nil || len(p.offsets) == 0 {
		return
	}
	offs := kadm.Offsets{}
	meta := fmt.Sprintf("ingest checkpoint %d", p.id)
	for part, at := range p.offsets {
		offs.Add(kadm.Offset{Topic: c.topic, Partition: part, At: at, LeaderEpoch: -1, Metadata: meta})
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	if err := c.adm.CommitAllOffsets(ctx, c.group, offs); err != nil {
		c.log.Warn("kafka source: committing offsets to the consumer group for monitoring failed; the job is not affected",
			"group", c.group, "topic", c.topic, "checkpoint", p.id, "err", err)
		return
	}
	c.committed.Store(p.id)
}

// stop commits what is pending and ends the goroutine.
func (c *srcGroupCommitter) stop() {
	if c == nil {
		return
	}
	close(c.quit)
	<-c.done
}
