// Package postgres is the exactly-once PostgreSQL sink: rows written between
// two checkpoint barriers become visible in the target table together, in
// one transaction per checkpoint, after that checkpoint is complete.
//
// # Protocol
//
// Prepare (sink subtasks, at every barrier). Each subtask registers itself at
// Open as a writer with a random id in ingest_sink_writers (pipeline, sink,
// job, subtask, staging table). It streams the rows it receives to the
// staging table (by default "<table>__ingest_staging", same schema), with
// COPY in chunks of SinkConfig.FlushRows rows on a background goroutine; each
// staged row carries the writer id and a per-writer sequence number
// (ingest_writer, ingest_seq, the staging table's primary key). At barrier N
// the subtask copies the rest and waits until every chunk is committed: the
// rows are durable before Snapshot returns and the subtask acknowledges.
// Its committable for N names the sequence range [first, end) of the rows
// written since the previous barrier, with the writer id, the subtask and N
// (PreparedAt). Staged rows are invisible to readers of the target table.
//
// Commit (the sink's single committer, after checkpoint N is durable). One
// transaction per checkpoint.Commit: it inserts the progress row
// (pipeline, sink, job, checkpoint) into ingest_sink_progress — if the row
// exists the checkpoint was published before and the transaction is rolled
// back: re-committing publishes nothing twice —, copies every staged row of
// the commit's committables into the target table (append: INSERT …
// SELECT; upsert: per key the last row in (checkpoint, subtask, sequence)
// order, INSERT … ON CONFLICT (key) DO UPDATE), deletes those staged
// rows and checks that exactly the staged number was deleted, then commits.
// A reader sees all of a checkpoint's rows or none; a crash anywhere before
// COMMIT publishes nothing and the recovery re-commits.
//
// Abandon (at recovery, after the recovery point's commits were published).
// Every staged row of this job still in the staging table belongs to a
// checkpoint that never completed (published rows were deleted by their
// commit): it is deleted, with the rows of writers no longer registered and,
// after SinkConfig.StaleAfter, of other jobs of the same pipeline that
// stopped writing.
//
// Sweep (after each completed checkpoint, while the job runs) deletes only
// the rows of other jobs' writers silent for StaleAfter; the running job's
// writers refresh active_at every minute, and fail at their next barrier if
// they find themselves unregistered. A staging table belongs to the sinks of
// one control schema: it is marked with its writers table at setup (a table
// comment), and a sink registering writers elsewhere is refused.
//
// # Tables
//
//	<staging>              ingest_writer bigint, ingest_seq bigint, the columns;
//	                       PRIMARY KEY (ingest_writer, ingest_seq). Logged: staged
//	                       rows survive a server crash.
//	ingest_sink_progress   pipeline, sink, job, checkpoint (the primary key),
//	                       target, rows (staged rows published), committed_at.
//	ingest_sink_writers    writer (the primary key), pipeline, sink, job,
//	                       subtask, staging, opened_at, active_at.
//
// A reader that wants to know how far a pipeline got reads
// ingest_sink_progress and the target in one REPEATABLE READ transaction
// (or one statement): the two are always consistent.
//
// # Connections
//
// Each sink subtask holds one connection (its copies run one at a time) and
// the committer one more, kept while the sink is in use and closed when the
// job ends.
//
// # Errors
//
// Every error is classified, as franz-go's kerr marks Kafka errors
// retriable, by what it calls for: by its SQLSTATE class (PostgreSQL manual,
// Appendix A), and by whether the sink had already set up and checked its
// tables (once per sink, at its first use).
//
//	class              SQLSTATE                                     at setup    afterwards
//	connection         08xxx, and network errors, EOF, timeouts     retry       retry
//	transaction        40001 serialization, 40P01 deadlock,         retry       retry
//	                   40003 completion unknown
//	resources          53xxx (disk full, out of memory,             retry       retry
//	                   too many connections), 55P03 lock timeout
//	shutdown           57P01 admin, 57P02 crash, 57P03 starting,    retry       retry
//	                   57P05 idle session timeout
//	schema, access     42xxx (undefined table or column, missing    stop        restart
//	                   privilege, no unique index), 28xxx
//	                   authorization, 3D000 unknown database
//	data               22xxx data exception, 23xxx and 40002        stop        stop
//	                   constraint violations
//	anything else      57014 cancelled, 57P04 database dropped,     restart     restart
//	                   58xxx, XX internal errors, …
//
// What each outcome means:
//
//   - retry: the operation (a COPY chunk, a commit, a registration) is
//     retried in place SinkConfig.CommitRetries times with backoff; then the
//     subtask fails and the job restarts.
//   - restart: the subtask fails at once, and the job restarts from its last
//     complete checkpoint with its restart strategy (runtime.RestartOptions:
//     growing pauses, a time budget), re-committing what the checkpoint
//     staged. A target table renamed for a while mid-run ends here: commits
//     and recoveries fail with undefined_table (42P01), the log says the
//     table may have been renamed or dropped, and once it is back the job
//     publishes everything exactly once. If it is not back within the
//     budget, the job stops with the error.
//   - stop: the same records fail the same way on every replay (a value the
//     column refuses, a constraint violation), or the configuration does not
//     fit the database (at setup: a table to create or a missing column or
//     privilege, a wrong password or database): the error wraps
//     runtime.ErrUnrecoverable and the job stops at once, exit code 1.
//
// A destination error never wraps runtime.ErrIncompatible: that marks a
// checkpoint that does not fit the pipeline (here only a committable that
// does not decode). Staged rows deleted outside the protocol
// (ErrStagedOutputLost) stop the job too: a restart cannot bring them back.
//
// # Failpoints
//
//	sink/postgres/prepare     at a barrier, after the subtask's rows are durable
//	                          in the staging table, before the committable is made
//	sink/postgres/mid-commit  inside the publishing transaction, after every
//	                          statement, before COMMIT
//
// # What exactly-once relies on
//
//   - PostgreSQL's transactions: COPY is atomic, and the publishing
//     transaction (progress row, insert, staged-row delete) commits or not.
//   - The staging table, ingest_sink_progress and ingest_sink_writers are
//     written only by this sink; nobody deletes staged rows or progress rows
//     of a running pipeline (a missing staged row fails the commit with
//     ErrStagedOutputLost rather than publish part of a checkpoint).
//   - A job id runs in one process at a time (the runtime's checkpoint lock).
//   - The runtime publishes a sink's commits in checkpoint order. Progress
//     rows more than SinkConfig.ProgressHistory checkpoint ids behind the
//     newest are pruned, and a commit that old is taken as published: in
//     checkpoint order it was.
//
// Atomicity is per sink: two sinks of one pipeline commit in two
// transactions.
package postgres
