// Package iceberg is the Apache Iceberg sink (`type: iceberg`): it writes a
// stream's records as Parquet data files of an Iceberg table, and for a
// changelog also equality delete files by its key, and publishes each
// complete checkpoint's files in one catalog transaction whose snapshot
// summary names the pipeline, the sink, the job and the checkpoint.
//
// The sink itself (sink.go and the files beside it) is built only with the
// build tag `iceberg`: apache/iceberg-go and Apache Arrow add some 300
// modules to a build, which the core binary does without. Its YAML
// specification and its configuration (this file, spec.go, config.go) are in
// every build, so that a pipeline file is checked the same way by every
// binary, and one built without the tag says how to get one with it.
//
// # Protocol
//
// Between two barriers a sink subtask writes its records to data files
// under the table's data directory, in a directory of its own job
// (<table>/data/ingest/<pipeline>/<sink>/<job>/). At a barrier it closes
// them and offers every file it wrote since its files were last published,
// each with the checkpoint at whose barrier it was closed (its
// prepared-at), as one committable. After the checkpoint completes, the
// committer publishes the files of its committables in one catalog
// transaction: for an append-only stream one snapshot; for a changelog one
// snapshot per prepared-at, oldest first, so that each checkpoint's equality
// deletes remove the rows of the earlier ones. The transaction also sets the
// table property ingest.sink.<pipeline>.<sink> to the job and checkpoint it
// published, and the last snapshot's summary carries ingest.pipeline,
// ingest.sink, ingest.job-id and ingest.checkpoint-id.
//
// INVARIANT: once the commit of checkpoint Q is in the table, every file
// prepared at Q or earlier by this job is in it. A commit publishes every
// file its committables name whose prepared-at is above the newest
// checkpoint the table records for the job, and no other.
//
// With a commit interval longer than the checkpoint interval, a commit is
// held back until the interval has passed since the last one; its files
// stay with the subtasks, which offer them again at their next barrier,
// so a later checkpoint publishes them. A recovery's re-commit and the
// final checkpoint's commit are never held back (runtime.PublishNow).
//
// At a recovery, after the recovery point was published, every file under
// the job's directory that no snapshot of the table references is deleted:
// files of checkpoints that never completed, and those a failed commit left.
package iceberg
