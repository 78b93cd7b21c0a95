// Package kafka connects pipelines to Apache Kafka.
//
// # Transactional sink
//
// NewSink writes a stream to a topic so that consumers reading committed
// records (isolation.level=read_committed) see each record exactly once, by a
// two-phase commit aligned with checkpoints (checkpointing.txt, "Conceptual
// two-phase commit"):
//
//   - Each sink subtask produces with a transactional producer. Its
//     transactional ids are <prefix>-<subtask>-<slot>, slot in [0, PoolSize):
//     stable across restarts, so a restarted job can fence and resume them.
//   - Records since the last barrier go into an open transaction. At barrier N
//     (Operator.Snapshot) the subtask writes one marker record into the same
//     transaction (topic MarkerTopic), flushes and waits until the broker
//     acknowledged every record — and does not commit. The transaction's
//     identity (transactional id, producer id, epoch, marker position) is the
//     committable of checkpoint N. The next records go into a new transaction
//     on another id of the pool.
//   - Once checkpoint N is durable, the committer (runtime.Committer) sends
//     EndTxn(commit) with the stored transactional id, producer id and epoch
//     (what Flink's KafkaSink calls resuming a transaction). That works from
//     any process: after a crash between prepare and commit, the recovery of
//     a new process commits what the dead one prepared.
//   - Committing is idempotent and tells "already committed" from "aborted":
//     a transaction ends with a control record (COMMIT or ABORT) stamped with
//     its producer id in every partition it wrote, so the committer reads the
//     marker partition from the marker on (uncommitted and control records
//     included; this does not depend on the last stable offset, which other
//     open transactions can hold back). An aborted transaction of a complete
//     checkpoint — the broker's transaction timeout expired, or something
//     initialised its id — is lost output: the commit fails with
//     ErrTransactionAborted, saying so and why, and the job stops (the error
//     wraps runtime.ErrIncompatible: restarting cannot repair it).
//   - At start, transactions an earlier run left open are aborted, so
//     read-committed consumers are not held back: the committer's Abandon
//     lists the cluster's ongoing transactions and fences each whose id the
//     prefix makes (any subtask or slot, so also after the parallelism or the
//     pool shrank), and every subtask fences its own pool when it opens
//     (InitProducerID bumps the epoch and aborts the id's open transaction).
//     Both run after the recovery published the restored checkpoint's
//     commits, so nothing they abort can still be committed, and after the
//     prefix was claimed (below), so nothing they abort is another sink's.
//
// # Ownership of the prefix
//
// Because a start aborts every ongoing transaction of the prefix, a prefix
// shared by two sinks (two pipelines configured alike, or two sinks of one)
// would let one sink's start abort the other's prepared transactions of
// complete checkpoints: output lost, reported later as ErrTransactionAborted
// or, depending on timing, not at all. So at every recovery, before it
// publishes or aborts anything, the committer claims the prefix
// (runtime.DestinationClaimer):
//
//   - Owners are recorded in the owner topic (SinkConfig.OwnerTopic, default
//     ingest-txn-owners), one for the whole cluster as transactional ids
//     are — not in the marker topic, which is per data topic. Its partition
//     0 holds owner records keyed by the prefix, naming pipeline, sink and
//     job, with a generation, written without a transaction with acks=all.
//   - The owner is the first record of the highest generation. A claimer
//     reads the partition to its end and writes generation g+1 only for a
//     prefix nobody owns; then it reads the log up to its own record. Of two
//     claimers that read at the same time, both write g+1 and the first in
//     the log wins: every reader of the log agrees, and the other claimer is
//     refused, naming the winner.
//   - A prefix owned by another pipeline or sink is refused with an error
//     wrapping runtime.ErrUnrecoverable that names the owner (pipeline, sink,
//     job, topic, since when) and the remedy: a transactional_id_prefix of
//     its own for each sink, or releasing the prefix of a sink gone for good.
//   - A prefix owned by another job of the same pipeline and sink (its
//     checkpoints were deleted, or another checkpoint storage runs the
//     pipeline) is reported to the runtime, which refuses unless that job
//     published nothing (LastCommitted) or with --allow-duplicates; a
//     takeover writes the next generation on the owner the claim read, and
//     fails if another takeover came first.
//   - A prefix the job owns already is left as it is: a start costs one
//     read of the owner topic, which holds one record per claim or takeover.
//   - A record with a null value keyed by the prefix releases it.
//   - The owner topic keeps its records: it is created with retention.ms=-1
//     and cleanup.policy=delete, and a start refuses one that deletes records
//     (finite retention, compaction: then another sink could claim a prefix
//     in use).
//
// # The pool of transactional ids
//
// An id carries one transaction at a time, and initialising an id (which
// every new transaction does) aborts whatever the id had open. So an id is
// never reused while it holds a prepared transaction a checkpoint may still
// commit. A subtask needs one id for the transaction it writes, one for the
// transaction prepared at the last barrier, and one more for each checkpoint
// that failed in a row since the last complete one (a failed checkpoint's
// transaction stays prepared and is committed with the next complete
// checkpoint), plus one per additional concurrent checkpoint: at most
// tolerable_failures + max_concurrent + 1, the default pool size 5 for the
// default checkpoint options. Transactions whose checkpoint completed do not
// count: when the committer has not committed one yet (commits lag the
// completion notice), the subtask commits it itself, idempotently, before it
// reuses the id. A subtask that finds every id busy fails with a message
// naming the ids (the job restarts from the last complete checkpoint:
// nothing is lost or repeated, but it costs a restart).
//
// # Visibility
//
// Each sink subtask's share of a checkpoint is one transaction and becomes
// visible atomically. The shares of several subtasks are committed one after
// another: Kafka cannot commit several transactional ids atomically, so with
// sink parallelism above 1 a reader can see one subtask's share of a
// checkpoint before another's (for milliseconds, or until the recovery when
// the process died between them: failpoint sink/kafka/mid-commit). Within a
// partition a read-committed reader also stops at the first open transaction
// (the last stable offset), so a committed transaction's records behind
// another subtask's still-open transaction show only once that one ends.
// With sink parallelism 1 each checkpoint's output appears all at once.
//
// # Requirements and limits
//
//   - The transaction timeout must exceed checkpoint interval + checkpoint
//     timeout + RecoveryMargin (SinkConfig.ValidateAgainst; the job's
//     checkpoint options are not visible to the sink, so the layer that
//     builds the job calls Sink.ConfigureCheckpointing). A transaction of a
//     complete checkpoint that stays prepared longer than the timeout —
//     because the job was down longer than that before its recovery, say — is
//     aborted by the broker and reported lost. At a barrier, a subtask refuses
//     to carry a prepared transaction old enough to expire before its commit:
//     it fails, and the job writes those records again from the last complete
//     checkpoint instead of losing them.
//   - The brokers' transaction.max.timeout.ms (15 minutes by default) caps the
//     timeout; a larger one is refused when a subtask opens.
//   - TransactionalIDPrefix must be unique to the sink among all jobs using
//     the cluster: a start aborts every ongoing transaction of the prefix.
//     This is checked, not only required (see Ownership of the prefix), among
//     the sinks that share an owner topic: every sink writing to the cluster
//     must use the same OwnerTopic (the default). A sink of a build without
//     the check, or with another owner topic, is not seen.
//   - The check does not fence: a job that another job of its pipeline took
//     the prefix over from (allowed when it had published nothing yet, or
//     with --allow-duplicates) learns it only when its transactions are
//     fenced. Two jobs of one pipeline must not run at once.
//   - The owner topic must keep every record (retention.ms=-1,
//     retention.bytes=-1, cleanup.policy=delete; checked when the principal
//     may read topic configurations), and an unclean leader election on it
//     can lose an acknowledged claim.
//   - The principal needs WRITE and DESCRIBE on the transactional ids, WRITE
//     on the topic, CREATE (or an existing marker topic) and READ on the
//     marker topic, READ and WRITE on the owner topic (CREATE unless it
//     exists, DESCRIBE_CONFIGS for its check); Abandon uses ListTransactions
//     (Kafka 3.0 or later).
//   - Markers must be retained longer than a recovery can take; a marker
//     deleted by retention, or a recreated marker topic, makes an outcome
//     unknowable (ErrMarkerLost) unless the coordinator still accepts the
//     commit.
//   - Records carry the encode function's key and value; the record
//     timestamp is the produce time.
//
// # What was verified against kfake, and what kfake cannot show
//
// The tests run the sink through the real franz-go client against the
// in-process fake cluster github.com/twmb/franz-go/pkg/kfake (one broker, and
// three in one test): staged records invisible to read-committed consumers
// until the commit; commit from a new process by id, producer id and epoch;
// idempotent re-commits, also after the id was initialised again (EndTxn
// refused as fenced, the marker decides); a transaction aborted by fencing and
// one aborted by the broker's transaction timeout, both reported loudly;
// lingering transactions (open, and prepared for a checkpoint that never
// completed; of an existing and of a removed subtask) aborted by Abandon and
// by a subtask's open; pool rotation, exhaustion, and reuse of an id before
// the committer committed it; CONCURRENT_TRANSACTIONS answers to EndTxn and
// InitProducerID (injected with kfake faults) retried, and bounded; a
// non-retriable EndTxn refusal on an open transaction (outcome stays
// undecided, the commit fails after CommitTimeout, a later one succeeds); a
// marker lost to a recreated topic or deleted records; the prefix's
// ownership: a second pipeline with the same prefix (same topic, and
// another topic) refused while the first's prepared transactions stay
// prepared and then commit, a new job of the pipeline on published output
// refused unless AllowDuplicates, restarts of the owning job writing
// nothing, two claims racing (the first claim's produce held by a kfake
// control function until the second's arrives) and two takeovers racing,
// releases, foreign records and owner topics that delete records; and the
// pipeline datagen → keyed running count → sink with failures before
// prepare, at prepare, after prepare before the acknowledgement, after the
// metadata before the commit, between two subtasks' commits, and hard kills
// of the job followed by a new process — exact read-committed output each time,
// with a read-committed sampler checking during the runs that no transaction
// of an incomplete checkpoint is ever visible (and, with one sink subtask,
// that each checkpoint appears whole).
//
// kfake differs from a real broker where it matters here, so these paths
// were not exercised by real broker behaviour:
//
//   - kfake ends transactions synchronously: EndTxn writes the control
//     records before it answers, and there are no PrepareCommit/PrepareAbort
//     states. On a real broker the markers are written asynchronously after
//     EndTxn returns (through WriteTxnMarkers to each partition leader), so a
//     committed transaction can read as undecided for a while, and one
//     partition can show it before another. The committer's wait for an
//     undecided outcome after a refused EndTxn ran only against an injected
//     refusal, never against markers in flight; kfake's WriteTxnMarkers
//     handler exists for admin tools, its coordinator does not use it.
//   - kfake fences by aborting at once: InitProducerID on an id with an open
//     transaction never answers CONCURRENT_TRANSACTIONS, nor does an EndTxn
//     racing a previous transition. The retries for it ran only against
//     injected faults.
//   - kfake speaks KIP-890 part 2 (EndTxn v5 bumps the epoch), so only that
//     protocol ran. Under the older one (same epoch for every transaction of
//     a producer) the design relies on a new producer per transaction, whose
//     InitProducerID bumps the epoch so a stale EndTxn cannot commit a later
//     transaction; that reasoning is not tested.
//   - Coordinator failover, leader elections during a commit or a claim
//     (the owner topic's high watermark after an acks=all write), unclean
//     truncation, quotas, authorization (ACLs on transactional ids,
//     ListTransactions) and a broker's performance were not exercised.
package kafka
