// Package join holds keyed two-input joins in event time:
//
//   - Interval: every left l and right r of a key with
//     r.Time ∈ [l.Time+lower, l.Time+upper] (Flink's interval join);
//   - Window and WindowCoGroup: the records of both sides of a key in one
//     tumbling event-time window, joined pair by pair or handed over as two
//     lists when the window closes (Flink's window join and coGroup);
//   - Inner: an unbounded equi-join, each record meeting every record of the
//     other side with its key, with an optional time-to-live in event time
//     that bounds its state.
//
// # Inputs, partitioning and checkpoints
//
// Both inputs are KeyedStreams with the same key type (stream.KeyBy): hash
// partitioning by key group sends both sides of a key to the same subtask,
// where the join keeps them in keyed state. A join node reads input 0 (left)
// and input 1 (right). The runtime gives it the minimum watermark of the two
// inputs and, in exactly-once mode, aligns checkpoint barriers on both: a
// snapshot holds exactly the records of both sides that came before the
// barrier, so after a recovery the replayed records find the state they met
// the first time, and no pair is emitted twice or lost.
//
// # Determinism
//
// Whether a pair is emitted depends only on the two records' keys and event
// times, never on which of them arrived first or on when a watermark arrived.
// A job that fails, restores and replays therefore commits the same output
// (as a multiset: the order of records within a checkpoint may differ) as one
// that never failed. State is cleaned by event-time timers only once the
// watermark proves that no record still to come can match it.
//
// The one exception is a late record: one whose event time is already below
// the join's watermark, which a source emits only when it breaks its own
// watermark's promise. Whether such a record is late at the join depends on
// how the two inputs' watermarks interleaved, and some of its partners may be
// gone; the joins drop it and count it (Flink does the same): each drop is
// reported to the runtime (runtime.Context.DroppedLate, which counts it per
// operator for ingest_late_records_total and warns at the first and then at
// most once a minute), and the count is logged when the subtask closes. A join that never cleans state (Inner with
// ttl 0) has no late records: it joins every record.
//
// # State and restore
//
// Records are kept in ListStates keyed by (key, time bucket) for Interval
// and Inner and by (key, window) for the window joins, with the key's hash
// cached in the state key, so every bucket of a key lives in the key group the
// partitioner routed the key to (and rescaling moves them with it). The codec
// names stored with the state encode the join's kind and parameters (bounds,
// window size, ttl, bucket width) and the record codecs, so restoring state
// written by a join with other parameters fails with state.ErrStateMismatch
// (the job stops: a restart cannot cure it) instead of misreading it.
//
// Record values are encoded with the codecs given by LeftCodec and
// RightCodec, or by default with stream.CodecFor: binary for strings,
// integers, floats and bools, JSON otherwise. JSON reflects per record: give
// explicit codecs for record types on a hot path.
package join
