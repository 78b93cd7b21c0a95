package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/stream"
	"github.com/ingest-engine/ingest/watermark"
)

// srcPart is the progress of one partition a subtask reads.
type srcPart struct {
	id int32
	// split is the partition's index in the watermark tracker.
	split int
	// next is the offset of the next record to emit (the replay position).
	next int64
	// end is the exclusive end offset; valid when bounded.
	end     int64
	bounded bool
	// done is set once a bounded partition reached end.
	done bool
	// maxTime is the newest event time emitted; valid when seen.
	maxTime int64
	seen    bool
}

// srcSubtask is one source subtask. Its methods run on the task goroutine;
// discovery and group commits run on goroutines of their own.
type srcSubtask[T any] struct {
	src *Source[T]
	cfg *SourceConfig
	// batches hands out the batches Read emits (runtime.BatchBuffer).
	batches runtime.BatchBuffer[T]
	log     *slog.Logger
	// subtask and parallelism decide which partitions are read (srcOwns).
	subtask, parallelism int

	cl  *kgo.Client
	adm *kadm.Client

	parts map[int32]*srcPart
	// live counts partitions not done.
	live int
	wm   *watermark.Tracker

	disc    *srcDiscovery
	commits *srcGroupCommitter
	// looks lists end offsets for idleness; nil without an idle timeout.
	looks *srcIdleLooks
	// pending are the positions of checkpoints not yet known complete, by
	// increasing id (PositionAt).
	pending []srcPending

	// setup is the bad-record policy (SetBadRecords); bad applies it.
	setup stream.BadRecordSetup
	bad   *stream.BadRecords

	// clock is the processing time the watermark tracker is given: the
	// job's clock (runtime.Context.Now), or a test's clock set before Open.
	// Only the task goroutine calls it.
	clock func() time.Time
}

// SetBadRecords sets the subtask's bad-record policy (see
// stream.OnBadRecords); without it a bad record fails the task.
func (t *srcSubtask[T]) SetBadRecords(s stream.BadRecordSetup) { t.setup = s }

// errorf names the source and topic in an error.
func (t *srcSubtask[T]) errorf(format string, args ...any) error {
	return fmt.Errorf("kafka source %s: %w", t.cfg.Topic, fmt.Errorf(format, args...))
}

// Open restores the position, lists the topic's partitions and assigns the
// subtask's partitions to the client at their exact offsets.
func (t *srcSubtask[T]) Open(ctx *runtime.Context, out runtime.Emitter[T]) error {
	t.cfg = &t.src.cfg
	cfg := t.cfg
	if t.clock == nil {
		t.clock = ctx.Now
	}
	t.batches.OpenOn(out)
	t.log = ctx.Log
	if t.log == nil {
		t.log = slog.New(slog.DiscardHandler)
	}
	t.subtask, t.parallelism = ctx.Task.Subtask, ctx.Parallelism
	if t.parallelism < 1 || t.subtask < 0 || t.subtask >= t.parallelism {
		return t.errorf("subtask %d of %d", t.subtask, t.parallelism)
	}
	var resume srcResume
	switch {
	case ctx.RestoredUnion != nil:
		// Restored at another parallelism: every old subtask's position,
		// of which this subtask takes the partitions it owns now.
		var err error
		if resume, err = srcRestore(ctx.RestoredUnion, cfg.Topic, t.subtask, t.parallelism, true); err != nil {
			return t.errorf("%w", err)
		}
	case ctx.Restored != nil && len(ctx.Restored.Inline) > 0:
		var err error
		if resume, err = srcRestore([][]byte{ctx.Restored.Inline}, cfg.Topic, t.subtask, t.parallelism, false); err != nil {
			return t.errorf("%w", err)
		}
	}
	bad, err := t.setup.Open(ctx, resume.bad)
	if err != nil {
		return t.errorf("%w", err)
	}
	t.bad = bad

	cl, err := kgo.NewClient(sourceClientOpts(cfg, t.log)...)
	if err != nil {
		return scrubBrokers(t.errorf("creating the client: %w", err), cfg.Brokers)
	}
	t.cl, t.adm = cl, kadm.NewClient(cl)

	octx, cancel := context.WithTimeout(context.Background(), cfg.RequestTimeout)
	defer cancel()
	starts, err := srcListOffsets(octx, t.adm, cfg.Topic, srcLogStart)
	if err != nil {
		return scrubBrokers(t.errorf("%w (brokers %s)", err, shownBrokers(cfg.Brokers)), cfg.Brokers)
	}
	for p := range resume.parts {
		if _, ok := starts[p]; !ok {
			return t.errorf("the checkpoint holds an offset of partition %d, which the topic does not have (%d partitions): was the topic deleted and created again?", p, len(starts))
		}
	}
	bounded := cfg.bounded()
	var ends, latest map[int32]int64
	if bounded && !(resume.restored && resume.bounded) {
		// The end offsets are fixed here, at the first start, and kept in
		// every position from now on.
		if ends, err = srcListOffsets(octx, t.adm, cfg.Topic, srcEndKind(cfg)); err != nil {
			return t.errorf("%w", err)
		}
	}
	if !resume.restored && cfg.Start == StartLatest {
		if latest = ends; latest == nil {
			if latest, err = srcListOffsets(octx, t.adm, cfg.Topic, srcEndKind(cfg)); err != nil {
				return t.errorf("%w", err)
			}
		}
	}

	now := t.clock().UnixNano()
	t.wm = watermark.NewTracker(cfg.Watermark)
	t.parts = map[int32]*srcPart{}
	assign := map[int32]kgo.Offset{}
	owned := map[int32]bool{}
	for _, p := range slices.Sorted(maps.Keys(starts)) {
		if !srcOwns(p, t.subtask, t.parallelism) {
			continue
		}
		owned[p] = true
		part := &srcPart{id: p}
		pp, had := resume.parts[p]
		switch {
		case had:
			part.next = pp.Next
			if pp.MaxTime != nil {
				part.maxTime, part.seen = *pp.MaxTime, true
			}
		case resume.restored && resume.bounded && bounded:
			// Created after the bounded source first started: not read.
			continue
		case !resume.restored && cfg.Start == StartLatest:
			part.next = latest[p]
		default:
			// Fresh start from earliest, or a partition the restored
			// position does not hold: nothing of it was read before the
			// checkpoint's cut.
			part.next = starts[p]
		}
		if bounded {
			part.bounded = true
			if had && resume.bounded {
				part.end = *pp.End
			} else {
				part.end = ends[p]
			}
		}
		if part.next < starts[p] && !(part.bounded && part.next >= part.end) {
			return t.errorf("partition %d: the checkpoint resumes at offset %d but the log starts at %d: the records in between were deleted (retention) before the job read them, so they cannot be replayed", p, part.next, starts[p])
		}
		part.split = t.wm.AddSplit(now)
		if part.seen {
			t.wm.Observe(part.split, part.maxTime)
		}
		t.parts[p] = part
		if part.bounded && part.next >= part.end {
			part.done = true
			t.wm.Finish(part.split)
			continue
		}
		t.live++
		assign[p] = kgo.NewOffset().At(part.next)
	}
	if len(assign) > 0 {
		t.cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{cfg.Topic: assign})
	}
	if !bounded && cfg.DiscoveryInterval > 0 {
		t.disc = startDiscovery(t.adm, cfg, t.subtask, t.parallelism, owned, t.log)
	}
	if cfg.Group != "" {
		t.commits = startGroupCommitter(t.adm, cfg, t.log)
	}
	if it := cfg.Watermark.IdleTimeout; it > 0 {
		t.looks = newIdleLooks(t.adm, cfg, it, t.log)
	}
	t.log.Info("kafka source opened", "topic", cfg.Topic, "partitions", len(t.parts), "restored", resume.restored, "bounded", bounded)
	return nil
}

// Read emits the records buffered by the client, at most MaxBatch, without
// waiting: when nothing is buffered it asks the runtime to come back after
// PollInterval, so barriers are never held up by a fetch.
func (t *srcSubtask[T]) Read() (runtime.ReadResult, error) {
	found, err := t.disc.take()
	if err != nil {
		return runtime.ReadResult{}, err
	}
	if len(found) > 0 {
		t.addPartitions(found)
	}
	var batch runtime.Batch[T]
	if t.live > 0 {
		//lint:ignore SA1012 franz-go's PollRecords with a nil context returns what is buffered without blocking, which Read needs
		fetches := t.cl.PollRecords(nil, t.cfg.MaxBatch)
		if err := t.fetchError(fetches); err != nil {
			return runtime.ReadResult{}, err
		}
		if n := fetches.NumRecords(); n > 0 {
			batch = t.batches.Get(n) // at most n records: some may be bad
			for it := fetches.RecordIter(); !it.Done(); {
				if batch, err = t.record(it.Next(), batch); err != nil {
					return runtime.ReadResult{}, err
				}
			}
		}
	}
	if len(batch) > 0 {
		if err := t.batches.Emit(batch); err != nil {
			return runtime.ReadResult{}, err
		}
	}
	if err := t.bad.Flush(); err != nil {
		return runtime.ReadResult{}, err
	}
	var res runtime.ReadResult
	now := t.clock()
	t.lookForIdle(now)
	res.Watermark, res.Idle = t.wm.Current(now.UnixNano())
	if len(batch) == 0 {
		res.Wait = t.cfg.PollInterval
	}
	if t.cfg.bounded() && t.live == 0 {
		res.Exhausted = true
	}
	return res, nil
}

// record handles one fetched record: it emits it into batch, or only moves
// the position past it (control records: transaction markers), or ends a
// bounded partition.
func (t *srcSubtask[T]) record(r *kgo.Record, batch runtime.Batch[T]) (runtime.Batch[T], error) {
	part := t.parts[r.Partition]
	if part == nil || part.done || r.Offset < part.next {
		// A finished partition's records still buffered, or a record
		// before the position: neither belongs to the output.
		return batch, nil
	}
	if part.bounded && r.Offset >= part.end {
		t.finish(part)
		return batch, nil
	}
	if !r.Attrs.IsControl() {
		var v T
		var ts int64
		var err error
		if limit := t.bad.MaxRecordBytes(); len(r.Value) > limit {
			err = fmt.Errorf("the value is %d bytes, longer than max_record_bytes %d", len(r.Value), limit)
		} else {
			v, ts, err = t.src.decode(Message{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset,
				Key: r.Key, Value: r.Value, Timestamp: r.Timestamp, Headers: r.Headers})
		}
		if err == nil {
			err = t.bad.CheckEventTime(ts) // before ts can move the watermark
		}
		if err != nil {
			// A bad record: it fails the task, or is skipped or
			// dead-lettered and consumed like any other.
			bad := stream.BadRecord{Partition: strconv.Itoa(int(r.Partition)), Offset: r.Offset, Raw: r.Value, Err: err}
			if err := t.bad.Reject(bad, &DecodeError{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Err: err}); err != nil {
				return batch, err
			}
		} else {
			batch = append(batch, runtime.Record[T]{Value: v, Time: ts})
			t.wm.Observe(part.split, ts)
			if !part.seen || ts > part.maxTime {
				part.maxTime, part.seen = ts, true
			}
		}
	}
	part.next = r.Offset + 1
	if part.bounded && part.next >= part.end {
		t.finish(part)
	}
	return batch, nil
}

// finish ends a bounded partition: it stops fetching it and no longer holds
// the watermark back.
func (t *srcSubtask[T]) finish(part *srcPart) {
	part.done = true
	t.live--
	t.wm.Finish(part.split)
	t.cl.RemoveConsumePartitions(map[string][]int32{t.cfg.Topic: {part.id}})
}

// addPartitions starts reading partitions found by discovery at their log
// start: they were created, or grew into this subtask's share, after the
// subtask opened, so nothing of them was read before.
func (t *srcSubtask[T]) addPartitions(found []srcFound) {
	now := t.clock().UnixNano()
	assign := map[int32]kgo.Offset{}
	for _, f := range found {
		if t.parts[f.partition] != nil {
			continue
		}
		part := &srcPart{id: f.partition, next: f.start, split: t.wm.AddSplit(now)}
		t.parts[f.partition] = part
		t.live++
		assign[f.partition] = kgo.NewOffset().At(part.next)
		t.log.Info("kafka source: reading a new partition", "topic", t.cfg.Topic, "partition", f.partition, "offset", f.start)
	}
	if len(assign) > 0 {
		t.cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{t.cfg.Topic: assign})
	}
}

// fetchError returns the first fetch error as a task failure. The client
// retries retriable errors itself; what reaches here is not retriable (an
// offset no longer in the log, authorization, a deleted topic).
func (t *srcSubtask[T]) fetchError(fetches kgo.Fetches) error {
	errs := fetches.Errors()
	if len(errs) == 0 {
		return nil
	}
	fe := errs[0] // the first is enough: the subtask fails and restarts
	var next int64 = -1
	if part := t.parts[fe.Partition]; part != nil {
		next = part.next
	}
	if errors.Is(fe.Err, kerr.OffsetOutOfRange) {
		return t.errorf("partition %d: offset %d is not in the log any more (deleted by retention, or the log was truncated), so the records from it cannot be replayed: %w", fe.Partition, next, fe.Err)
	}
	return t.errorf("fetching partition %d at offset %d: %w", fe.Partition, next, fe.Err)
}

// Position returns the next offset of every partition the subtask reads
// (and their end offsets when bounded): the records emitted so far are
// exactly those before these offsets.
func (t *srcSubtask[T]) Position() ([]byte, error) {
	pos, err := t.position().encode()
	if err != nil {
		return nil, t.errorf("encoding the position: %w", err)
	}
	return pos, nil
}

func (t *srcSubtask[T]) position() *srcPosition {
	pos := &srcPosition{Version: srcPositionVersion, Topic: t.cfg.Topic, Subtask: t.subtask, Parallelism: t.parallelism,
		Bounded: t.cfg.bounded(), Partitions: make([]srcPartitionPosition, 0, len(t.parts))}
	for _, part := range t.parts {
		pp := srcPartitionPosition{Partition: part.id, Next: part.next}
		if part.bounded {
			end := part.end
			pp.End = &end
		}
		if part.seen {
			mt := part.maxTime
			pp.MaxTime = &mt
		}
		pos.Partitions = append(pos.Partitions, pp)
	}
	if tally := t.bad.Tally(); tally != (stream.BadRecordTally{}) {
		pos.Bad = &tally
	}
	return pos
}

// PositionAt is Position for the barrier of checkpoint id; the subtask keeps
// the offsets to copy them to the consumer group once id completes
// (NotifyComplete). The runtime calls it instead of Position
// (runtime.PositionedAt).
func (t *srcSubtask[T]) PositionAt(id int64) ([]byte, error) {
	if t.commits != nil {
		offs := make(map[int32]int64, len(t.parts))
		for _, part := range t.parts {
			offs[part.id] = part.next
		}
		t.pending = append(t.pending, srcPending{id: id, offsets: offs})
		if len(t.pending) > srcMaxPendingPositions {
			t.pending = slices.Delete(t.pending, 0, len(t.pending)-srcMaxPendingPositions)
		}
	}
	return t.Position()
}

// NotifyComplete tells the subtask that checkpoint id is complete: the
// offsets of the newest checkpoint <= id are committed to the consumer group
// in the background, for monitoring. It never fails the task.
func (t *srcSubtask[T]) NotifyComplete(id int64) error {
	if t.commits == nil {
		return nil
	}
	i := 0
	for i < len(t.pending) && t.pending[i].id <= id {
		i++
	}
	if i == 0 {
		return nil
	}
	t.commits.request(t.pending[i-1])
	t.pending = slices.Delete(t.pending, 0, i)
	return nil
}

// Close stops discovery, sends the last pending group commit and closes the
// client. It is safe after a failed Open.
func (t *srcSubtask[T]) Close() error {
	t.bad.Close()
	t.disc.stop()
	t.commits.stop()
	t.looks.stop()
	if t.cl != nil {
		t.cl.Close()
	}
	t.disc, t.commits, t.looks, t.cl = nil, nil, nil, nil
	return nil
}
