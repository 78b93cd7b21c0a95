// Package pgcdc is the PostgreSQL change-data-capture source (YAML `type:
// postgres_cdc`): it reads tables' rows, then every change committed to them,
// through logical replication with the pgoutput plugin
// (github.com/jackc/pglogrepl).
//
// A pipeline's source owns one permanent replication slot and one
// publication, created when missing. Its records are the tables' columns
// followed by _op (insert, update, delete), _table, _lsn and _commit_time:
// a changelog keyed by the primary key (after _table for several tables).
//
// Snapshot. A table is read in chunks of its primary key, each chunk one
// Read, so checkpoints pass between chunks and a crash resumes the table
// after its last checkpointed chunk. Every snapshot runs in a transaction on
// the snapshot a temporary slot exports; the permanent slot was created
// before it, so it holds every transaction after the snapshot's consistent
// point. A resumed snapshot takes a new one: the position records which key
// range each snapshot read (segments), and a streamed change is emitted
// only when its transaction committed at or after the consistent point of
// the snapshot that read its key. No change is lost between snapshot and
// stream, and none is seen twice.
//
// Stream. After the snapshot the subtask streams the slot from the
// checkpointed position. A transaction is emitted whole within one Read,
// so no barrier splits it. The position is the last emitted commit; the
// slot is confirmed to a checkpoint's position only when that checkpoint is
// complete (NotifyComplete), so the server keeps exactly what a recovery
// may need. A slot dropped, invalidated, or confirmed past the restored
// position stops the job (ErrSlotLost): it never restarts from "now".
//
// A change the records cannot express stops the job with
// runtime.ErrUnrecoverable: a TRUNCATE, a dropped column or one whose type
// changed to another kind, a value no field can hold (an infinite
// timestamp, NaN), an update whose unchanged TOASTed value was not sent, a
// table renamed or created again, a publication that stopped publishing
// some of it. A column added after the plan stops the job too
// (ErrColumnAdded): loading the pipeline again reads it, resuming before
// the transaction that added it, with NULL in it for older changes.
package pgcdc
