package kafka

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/internal/failpoint"
)

// txnCommitter is the sink's runtime.Committer, runtime.CommitTracker and
// runtime.DestinationClaimer (txn_claim.go). It is stateless but for the
// in-process ledger and what the last Claim read (for Reclaim): everything
// it needs is in the commit and in Kafka, so a committer of a new process
// commits what a crashed one prepared.
type txnCommitter struct{ sh *txnShared }

// Commit commits the transactions of c, one after another, each idempotently
// (see txnCommitOne). Each transaction becomes visible at once to
// read-committed consumers; the transactions of different sink subtasks
// become visible one after another, not together (Kafka cannot commit
// several transactional ids atomically). A commit interrupted between two of
// them is completed by the next Commit of the same checkpoint (the recovery
// publishes the restored checkpoint's commits again).
func (c *txnCommitter) Commit(ctx context.Context, _ string, cm checkpoint.Commit) error {
	if len(cm.Committables) == 0 {
		return nil
	}
	cfg := &c.sh.cfg
	txns := make([]txnCommittable, len(cm.Committables))
	for i, data := range cm.Committables {
		t, err := decodeTxnCommittable(data)
		if err != nil {
			return fmt.Errorf("kafka sink %s: committing checkpoint %d: %w", cfg.Topic, cm.Checkpoint, err)
		}
		txns[i] = t
	}
	cl, err := kgo.NewClient(sinkClientOpts(cfg, nil)...)
	if err != nil {
		return fmt.Errorf("kafka sink %s: committing checkpoint %d: %w", cfg.Topic, cm.Checkpoint, err)
	}
	defer cl.Close()
	for i := range txns {
		if i > 0 {
			if err := failpoint.Inject("sink/kafka/mid-commit"); err != nil {
				return fmt.Errorf("kafka sink %s: committing checkpoint %d after %d of %d transactions: %w", cfg.Topic, cm.Checkpoint, i, len(txns), err)
			}
		}
		if err := txnCommitOne(ctx, cl, cfg, &c.sh.ledger, &txns[i]); err != nil {
			return fmt.Errorf("kafka sink %s: committing checkpoint %d: %w", cfg.Topic, cm.Checkpoint, err)
		}
	}
	return nil
}

// Abandon aborts the lingering transactions of every id the sink's prefix
// makes (any subtask, any slot: also ids of a parallelism or pool size since
// reduced): it lists the cluster's ongoing transactions and fences each of
// ours. The job calls it after Claim made sure the prefix is this sink's
// (another sink's ongoing transactions are never ours to abort), after the
// recovery point's commits are published and before any subtask runs, so no
// ongoing transaction of ours can still be committed by a checkpoint. Sink subtasks fence their own pool again when
// they open. It returns how many transactions it aborted.
func (c *txnCommitter) Abandon(ctx context.Context, _ string) (int, error) {
	cfg := &c.sh.cfg
	ctx, cancel := context.WithTimeout(ctx, cfg.CommitTimeout)
	defer cancel()
	cl, err := kgo.NewClient(sinkClientOpts(cfg, nil)...)
	if err != nil {
		return 0, fmt.Errorf("kafka sink %s: %w", cfg.Topic, err)
	}
	defer cl.Close()
	listed, err := kadm.NewClient(cl).ListTransactions(ctx, nil, []string{"Ongoing"})
	if err != nil {
		return 0, fmt.Errorf("kafka sink %s: listing ongoing transactions to abort those of prefix %q left by an earlier run (the sink's principal needs DESCRIBE on its transactional ids): %w",
			cfg.Topic, cfg.TransactionalIDPrefix, err)
	}
	n := 0
	for _, t := range listed.Sorted() {
		if t.State != "Ongoing" || !txnOwnedBy(cfg.TransactionalIDPrefix, t.TxnID) {
			continue
		}
		if err := txnFence(ctx, cl, cfg, t.TxnID); err != nil {
			return n, fmt.Errorf("kafka sink %s: aborting a lingering transaction: %w", cfg.Topic, err)
		}
		n++
	}
	return n, nil
}
