package runtime

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/ingest-engine/ingest/state"
)

// DefaultBatchSize is how many records a hash-partitioned output buffers per
// consumer subtask before it sends them as one message.
const DefaultBatchSize = 1024

type partitionKind int

const (
	partitionForward partitionKind = iota
	partitionHash
	partitionRebalance
	partitionBroadcast
)

// Partitioner decides which consumer subtasks receive a producer's records.
// Create one with Forward, Rebalance, Broadcast or Hash.
type Partitioner interface {
	// String names the partitioner in plans.
	String() string
	kind() partitionKind
	newWriter(ch *channels) edgeWriter
}

// Forward sends subtask i's records to consumer subtask i; producer and
// consumer need the same parallelism. Forward edges are chained: the consumer
// runs in the producer's goroutine.
func Forward() Partitioner { return forward{} }

// Rebalance spreads batches round-robin over all consumer subtasks.
func Rebalance() Partitioner { return rebalance{} }

// Broadcast sends every record to every consumer subtask.
func Broadcast() Partitioner { return broadcast{} }

// Hash routes each record by key: hash → key group → the consumer subtask that
// owns the key group, so every record of a key reaches the subtask holding the
// key's state. keyHash must be stable across processes (state.HashKey is).
func Hash[T any](keyHash func(T) uint64) Partitioner { return hash[T]{keyHash: keyHash} }

type forward struct{}
type rebalance struct{}
type broadcast struct{}
type hash[T any] struct{ keyHash func(T) uint64 }

func (forward) String() string   { return "forward" }
func (rebalance) String() string { return "rebalance" }
func (broadcast) String() string { return "broadcast" }
func (hash[T]) String() string   { return "hash" }

func (forward) kind() partitionKind   { return partitionForward }
func (rebalance) kind() partitionKind { return partitionRebalance }
func (broadcast) kind() partitionKind { return partitionBroadcast }
func (hash[T]) kind() partitionKind   { return partitionHash }

// channels are the channels one producer subtask writes on one edge: for a
// forward edge only the consumer with its own index, otherwise one per
// consumer subtask.
type channels struct {
	ctx            context.Context
	out            []chan<- *message
	maxParallelism int
	sent           *atomic.Int64 // records sent, for metrics and tests
	// blocked sums the ns sends waited on a full channel (backpressure, for
	// Job.Observe); nil to not measure.
	blocked *atomic.Int64
}

// send puts m on channel i, waiting while it is full (backpressure) unless
// the job is cancelled.
func (c *channels) send(i int, m *message) error {
	if c.blocked != nil && len(c.out[i]) == cap(c.out[i]) {
		defer c.blockedSince(time.Now()) // observe_hooks.go
	}
	select {
	case c.out[i] <- m:
		if m.records != nil {
			c.sent.Add(int64(m.records.Len()))
		}
		return nil
	case <-c.ctx.Done():
		return context.Cause(c.ctx)
	}
}

// control sends a control message on every channel.
func (c *channels) control(m *message) error {
	for i := range c.out {
		if err := c.send(i, m); err != nil {
			return err
		}
	}
	return nil
}

// edgeWriter is one producer subtask's writer on one edge.
type edgeWriter interface {
	// emit sends records on; from, when not nil, is attached to every
	// message that carries the batch itself (see shares).
	emit(records Records, from recycler) error
	// shares returns how many consumers one emit hands the batch itself
	// to: 0 when emit copies the records into batches of its own, keeping
	// no reference to the batch it is given.
	shares() int
	flush() error
	channels() *channels
}

type batchWriter struct {
	ch   *channels
	next int
	all  bool
}

func (w *batchWriter) channels() *channels { return w.ch }

// shares: the batch itself goes to one consumer, or to all (broadcast).
func (w *batchWriter) shares() int {
	if w.all {
		return len(w.ch.out)
	}
	return 1
}

func (w *batchWriter) flush() error { return nil }

func (w *batchWriter) emit(records Records, from recycler) error {
	m := &message{kind: kindRecords, records: records, from: from}
	if w.all {
		for i := range w.ch.out {
			if err := w.ch.send(i, m); err != nil {
				return err
			}
		}
		return nil
	}
	i := w.next
	w.next = (w.next + 1) % len(w.ch.out)
	return w.ch.send(i, m)
}

func (forward) newWriter(ch *channels) edgeWriter   { return &batchWriter{ch: ch} }
func (rebalance) newWriter(ch *channels) edgeWriter { return &batchWriter{ch: ch} }
func (broadcast) newWriter(ch *channels) edgeWriter { return &batchWriter{ch: ch, all: true} }

func (h hash[T]) newWriter(ch *channels) edgeWriter {
	n := len(ch.out)
	w := &hashWriter[T]{ch: ch, keyHash: h.keyHash, bufs: make([]Batch[T], n), target: make([]int32, ch.maxParallelism),
		free: newBatchPool(n * (channelCapacity + 1))}
	for kg := range w.target {
		w.target[kg] = int32(state.SubtaskForKeyGroup(ch.maxParallelism, n, kg))
	}
	return w
}

// hashWriter buffers records per consumer subtask and sends a buffer when it
// is full or flushed.
type hashWriter[T any] struct {
	ch      *channels
	keyHash func(T) uint64
	bufs    []Batch[T]
	// target maps a key group to its consumer subtask.
	target []int32
	// free holds batches the consumers are done with, for the writer to
	// fill again: room for every batch that can be in flight, so in steady
	// state a writer allocates none.
	free *batchPool
}

func (w *hashWriter[T]) channels() *channels { return w.ch }

// shares is 0: records are appended to per-consumer buffers.
func (w *hashWriter[T]) shares() int { return 0 }

func (w *hashWriter[T]) emit(records Records, _ recycler) error {
	maxP := w.ch.maxParallelism
	in, err := BatchOf[T](records)
	if err != nil {
		return err
	}
	for _, r := range in {
		t := w.target[state.KeyGroupFor(w.keyHash(r.Value), maxP)]
		b := w.bufs[t]
		if b == nil {
			b = takeBatch[T](w.free, DefaultBatchSize)
		}
		b = append(b, r)
		if len(b) == DefaultBatchSize {
			if err := w.ch.send(int(t), &message{kind: kindRecords, records: b, from: w.free}); err != nil {
				return err
			}
			b = nil
		}
		w.bufs[t] = b
	}
	return nil
}

func (w *hashWriter[T]) flush() error {
	for t, b := range w.bufs {
		if len(b) == 0 {
			continue
		}
		if err := w.ch.send(t, &message{kind: kindRecords, records: b, from: w.free}); err != nil {
			return err
		}
		w.bufs[t] = nil
	}
	return nil
}
