// Package nats is the NATS JetStream source: it reads one JetStream stream,
// optionally filtered by a subject, as a replayable source whose position is
// the stream sequence.
//
//	src, err := nats.NewSource(nats.SourceConfig{
//		URL:     "nats://127.0.0.1:4222",
//		Stream:  "EVENTS",
//		Subject: "events.>",
//		Watermark: watermark.Strategy{MaxDelay: time.Second, IdleTimeout: 5 * time.Second},
//	}, nats.JSONWithTime[Event]("ts"))
//	events := stream.From(p, "events", src)
//
// # Replay position
//
// A JetStream stream is one ordered sequence of messages numbered 1, 2, 3, …
// (the stream sequence). The source's position is the stream sequence it
// reads next: every message before it that matches the subject filter has
// been emitted, none after it. It is stored in the checkpoint as inline JSON
// at every barrier (together with the stream name, the filter, the stop_at
// end and the newest event time, see position). After a recovery the source
// consumes from exactly that sequence, so a message is neither skipped nor
// repeated: the checkpoint, not the server, is the source of truth.
//
// # Consumer
//
// The source creates its own ephemeral pull consumer with AckPolicy none,
// DeliverByStartSequence at the position (on a fresh start: the configured
// Start policy), the subject filter, in-memory consumer state and an
// inactivity threshold after which the server deletes it. No message is ever
// acknowledged: acknowledgements would duplicate, less precisely, what the
// checkpoint records, and they would be wrong after a restore to an earlier
// checkpoint. Each Read sends one no-wait pull request for up to BatchSize
// messages (one round trip; no background goroutine, no prefetched messages
// to lose) and emits what it got as one batch; when nothing is there it asks
// the runtime to call again after PollInterval.
//
// This is what the library's "ordered consumer" does, done in the open: the
// source checks that the consumer sequences it receives are contiguous (a
// pull answered while the connection dropped can lose messages under
// AckPolicy none), that stream sequences only grow, and that the stream
// sequences it goes past held nothing it should have read (see
// Continuity); on a gap in consumer sequences, a pull
// error or a pull left unanswered (the consumer was deleted: the server
// answers nothing, and nats.go gives up after 1s) it deletes the consumer and
// creates a new one at its own position. After the connection reconnects it
// recreates the consumer at once, since a server restart drops it and the
// pulls in flight are lost either way. Recreation is retried
// with exponential backoff at most MaxRetries times in a row; then Read fails
// the task and the job restarts from its last complete checkpoint. While the
// connection is reconnecting the source waits without counting retries; the
// connection itself gives up after MaxReconnects attempts, which fails the
// task too. nats.go's OrderedConsumer was not used because its Fetch creates
// a consumer per call and its resets block for seconds with an unbounded
// number of attempts by default.
//
// # Parallelism
//
// A stream is one ordered sequence, so the source has exactly one subtask:
// its Descriptor caps it at one, so stream.From adds it with parallelism 1
// whatever the pipeline's default (and a YAML source without its own
// parallelism too); a larger explicit parallelism is a plan error, and a
// subtask opened with a parallelism above 1 fails with an error that stops
// the job. To read several subject partitions in parallel, add one source
// per subject filter and union them downstream.
//
// # Bounded reading (stop_at latest)
//
// With StopAt = StopAtLatest the source reads up to the stream's last
// sequence found when it first started, then reports Exhausted; the end is
// stored in the position, so a restore reads to the same end even if
// messages were published meanwhile.
//
// # Event time and watermarks
//
// The decode function returns each record's event time; Timestamp (the
// JetStream store time), JSON and JSONWithTime (a top-level JSON field,
// RFC 3339 or epoch milliseconds) are ready-made. The stream is one split of a
// watermark.Tracker: the watermark is the newest event time minus MaxDelay
// minus 1ns. The source is idle once it received no message for IdleTimeout
// and a pull sent after that found no message pending; it stays idle while
// its pulls (every PollInterval) keep finding none. A source that cannot
// pull (the server is down or restarting, the consumer is being recreated,
// the engine itself stalled) is never idle, however long that lasts: messages
// may be waiting, and counting it idle would let the pipeline's other inputs
// move the watermark past them.
//
// # Bad messages
//
// A message the decode function rejects, or whose payload is longer than
// MaxRecordBytes of the bad-record policy (1 MiB by default), fails the
// task by default with an error wrapping ErrBadMessage that names the
// stream, subject and sequence. stream.OnBadRecords sets another policy:
// skip it (counted, with a rate-limited warning), or send it to the
// source's dead-letter output (partition: the subject; offset: the stream
// sequence; raw: the payload). The position moves past a skipped or
// dead-lettered message, and the counts are stored with the position.
//
// # Continuity
//
// A consumer steps over removed messages without a word: after a purge, a
// retention limit (max_msgs, max_bytes, max_age) that overtook the reader,
// or DeleteMsg ahead of it, the next message it delivers simply has a
// higher stream sequence. So the source proves that every sequence it goes
// past without reading it held nothing it should have read:
//
//   - Without a subject filter (or with one that matches the whole stream:
//     a stream whose one subject is the filter, or ">"), a sequence the
//     consumer goes past is missing from the stream, and is a gap unless it
//     was already missing when the source opened. No extra request.
//   - With a filter, the sequences between two messages normally hold other
//     subjects' messages. After a batch that went past any, and before it
//     is emitted, the source asks for the stream's state (one stream info
//     request per batch, not per message or sequence): a sequence below the
//     stream's first sequence now, or among its deleted sequences, that was
//     not missing when the source opened, is a gap. The stream keeps no
//     record of a removed message's subject, so this is conservative:
//     another subject's message removed while the source crossed its
//     sequence (within that request's round trip), or ahead of it, counts
//     too.
//   - A source that finds nothing to read moves its position past other
//     subjects' messages, at most once a second (one message lookup): the
//     stream's retention does not overtake a quiet filtered source, and its
//     checkpoints are not left behind the stream's first sequence.
//   - The position stores a horizon: the stream's last sequence at the
//     source's last look, and how many sequences from the position to it
//     were missing then. A restore that finds more of them missing found
//     messages removed while the job was down. A restore whose next sequence
//     itself is gone fails with ErrPositionLost (and ErrGap).
//
// A mirror records the sequences of its origin it does not hold (filtered
// out, deleted there) as deleted ones: a source reading a mirror checks it
// as with a filter, and a sequence found missing past the last look is
// taken for such a skipped one (so a message deleted from the mirror soon
// after it arrived is not detected there). A per-message TTL that removes a
// message before the source read it is a gap like max_age.
//
// The source tracks at most 65536 deleted sequences inside the stream (the
// stream info lists them: about 0.5 MB); with more, a stream cannot be
// proven continuous and Open fails, unless OnGapSkip.
//
// A gap stops the job (OnGapFail, the default) with an error wrapping ErrGap
// and runtime.ErrIncompatible, so the job does not restart into it: a
// restart cannot bring removed messages back. It names the stream, the
// subject and the removed sequences, and says why (the stream now begins
// at N: a purge or a retention limit; deleted); nothing read after the gap
// is committed (or even emitted, unless a look at the stream failed and
// Position, which proves what is left before every checkpoint, finds it). SourceConfig.OnGap = OnGapSkip (YAML on_gap: skip)
// reads on past gaps instead: each range is logged at WARN (the first 20 per
// 10s, then counted in the next warning) and counted in the position
// (Source.SkippedGaps; with a filter the count of sequences is an upper
// bound of the filter's messages lost).
//
// # Guarantee and its limits
//
// The source is exactly-once (replayable) as long as the stream keeps the
// messages from the checkpointed position on; when it does not, the source
// stops the job rather than skip them (see Continuity), unless told to skip.
// One limit: at a restore, sequences past the checkpoint's horizon (stored
// after the source's last look before the checkpoint, within about a
// second of it) that are missing are not told apart from ones missing
// before the job began, so messages stored then and removed while the job
// was down are not detected.
package nats
