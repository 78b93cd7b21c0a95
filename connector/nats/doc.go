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
//	events := nats.From(p, "events", src)
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
// AckPolicy none) and that stream sequences only grow; on a gap, a pull
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
// From adds it with parallelism 1 (whatever the pipeline's default), and a
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
// # Guarantee and its limits
//
// The source is exactly-once (replayable) as long as the messages from the
// checkpointed position on are still in the stream when it is restored.
// Messages removed before they were read (retention limits, purge, a
// recreated stream) make the checkpoint unreachable: Open refuses it with
// ErrPositionLost rather than silently skip. With a subject filter this check
// is conservative: it cannot tell whether removed messages matched.
package nats
