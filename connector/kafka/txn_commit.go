package kafka

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ingest-engine/ingest/runtime"
)

// ErrTransactionAborted marks a prepared transaction of a complete checkpoint
// that the broker aborted before it was committed: its records are lost and
// the output is no longer exactly-once. Errors wrapping it also wrap
// runtime.ErrIncompatible, so the job stops instead of restarting into the
// same failure.
var ErrTransactionAborted = errors.New("transaction aborted before its checkpoint's commit: its records are lost")

// txnLedger remembers, in one process, the transactions known committed, so a
// subtask about to reuse an id does not ask the broker again what the
// committer already confirmed. It holds one entry per transactional id.
type txnLedger struct {
	mu   sync.Mutex
	done map[string]txnRef
}

// txnRef identifies one transaction of an id.
type txnRef struct {
	pid   int64
	epoch int16
}

// record notes that c is committed.
func (l *txnLedger) record(c *txnCommittable) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done == nil {
		l.done = map[string]txnRef{}
	}
	l.done[c.TxnID] = txnRef{c.ProducerID, c.Epoch}
}

// committed reports whether c is known committed.
func (l *txnLedger) committed(c *txnCommittable) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.done[c.TxnID] == txnRef{c.ProducerID, c.Epoch}
}

// txnCommitOne commits prepared transaction c, idempotently. It first reads
// the transaction's outcome from the marker partition: committed, nothing to
// do; aborted, ErrTransactionAborted. Undecided (or the marker is gone), it
// sends EndTxn(commit) with c's transactional id, producer id and epoch —
// which works from any process, the one that produced the transaction may be
// long gone — retrying retriable errors. If the coordinator refuses (the
// id's epoch moved on: fenced, timed out, or committed and initialised
// again) or never answers, the marker partition decides, waited for until
// cfg.CommitTimeout, which bounds the whole call.
func txnCommitOne(ctx context.Context, cl *kgo.Client, cfg *SinkConfig, ledger *txnLedger, c *txnCommittable) error {
	if ledger.committed(c) {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.CommitTimeout)
	defer cancel()
	out, lost := txnStatus(ctx, cl, c)
	switch {
	case lost != nil && !errors.Is(lost, ErrMarkerLost):
		return lost
	case lost == nil && out == txnCommitted:
		ledger.record(c)
		return nil
	case lost == nil && out == txnAborted:
		return txnLossError(cfg, c, nil)
	}
	// Undecided, or the marker is gone: only the coordinator can still
	// tell, by accepting the commit.
	endErr := txnEndCommit(ctx, cl, c)
	if endErr == nil {
		ledger.record(c)
		return nil
	}
	if lost != nil {
		return fmt.Errorf("%w (EndTxn(commit) answered: %w)", lost, endErr)
	}
	if ctx.Err() != nil {
		return fmt.Errorf("committing %s: %w", c.String(), endErr)
	}
	// The coordinator refused (the id's epoch moved on: fenced, timed out,
	// or committed and reused) or never answered. The control record after
	// the marker decides; on a real broker it may still be being written.
	var statusErr error // the last failure to read the outcome, nil if it read undecided
	for backoff := 5 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
		out, err := txnStatus(ctx, cl, c)
		switch {
		case errors.Is(err, ErrMarkerLost):
			return fmt.Errorf("%w (EndTxn(commit) answered: %w)", err, endErr)
		case err == nil && out == txnCommitted:
			ledger.record(c)
			return nil
		case err == nil && out == txnAborted:
			return txnLossError(cfg, c, endErr)
		case err == nil || ctx.Err() == nil:
			statusErr = err // a read cut short by the deadline tells nothing new
		}
		select {
		case <-ctx.Done():
			if statusErr != nil {
				return fmt.Errorf("committing %s: EndTxn(commit) failed: %w; reading its outcome failed too: %w", c.String(), endErr, statusErr)
			}
			return fmt.Errorf("committing %s: EndTxn(commit) failed: %w; its outcome was still undecided after %v", c.String(), endErr, cfg.CommitTimeout)
		case <-time.After(backoff):
		}
	}
}

// txnEndCommit sends EndTxn(commit) for c, retrying retriable errors
// (CONCURRENT_TRANSACTIONS while a previous transition completes, coordinator
// loading or moving) with backoff until ctx ends.
func txnEndCommit(ctx context.Context, cl *kgo.Client, c *txnCommittable) error {
	return txnRetry(ctx, "EndTxn(commit) of "+c.TxnID, func() error {
		req := kmsg.NewPtrEndTxnRequest()
		req.TransactionalID = c.TxnID
		req.ProducerID = c.ProducerID
		req.ProducerEpoch = c.Epoch
		req.Commit = true
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		return kerr.ErrorForCode(resp.ErrorCode)
	})
}

// txnFence initialises transactional id id at the coordinator: the epoch is
// bumped, so a producer still using the id is fenced, and a transaction the
// id had open is aborted (read-committed consumers are no longer held back by
// it). It must never run on an id whose prepared transaction a checkpoint may
// still commit.
func txnFence(ctx context.Context, cl *kgo.Client, cfg *SinkConfig, id string) error {
	err := txnRetry(ctx, "InitProducerID of "+id, func() error {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID = kmsg.StringPtr(id)
		req.TransactionTimeoutMillis = int32(cfg.TransactionTimeout / time.Millisecond)
		req.ProducerID = -1
		req.ProducerEpoch = -1
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		return kerr.ErrorForCode(resp.ErrorCode)
	})
	if errors.Is(err, kerr.InvalidTransactionTimeout) {
		return fmt.Errorf("kafka sink: transaction timeout %v is refused by the broker: it exceeds the brokers' transaction.max.timeout.ms (15m by default): %w", cfg.TransactionTimeout, err)
	}
	if err != nil {
		return fmt.Errorf("kafka sink: fencing transactional id %s: %w", id, err)
	}
	return nil
}

// txnRetry runs f until it succeeds, fails with an error that is not
// retriable, or ctx ends; between tries it backs off from 10ms to 1s.
func txnRetry(ctx context.Context, what string, f func() error) error {
	var last error // the last retriable refusal
	for attempt, backoff := 1, 10*time.Millisecond; ; attempt, backoff = attempt+1, min(2*backoff, time.Second) {
		err := f()
		switch {
		case err == nil:
			return nil
		case last != nil && ctx.Err() != nil:
			// The deadline cut the last try short: report what the broker
			// kept answering.
			return fmt.Errorf("%s: still failing after %d tries: %w", what, attempt-1, last)
		case !txnRetriable(err):
			return err
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: still failing after %d tries: %w", what, attempt, err)
		case <-time.After(backoff):
		}
	}
}

// txnRetriable reports whether a transaction request that failed with err
// may succeed when sent again.
func txnRetriable(err error) bool {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Retriable || errors.Is(err, kerr.ConcurrentTransactions)
	}
	return false
}

// txnLossError is the loud failure of a committed checkpoint whose
// transaction was aborted: exactly-once is broken and no retry can repair it.
func txnLossError(cfg *SinkConfig, c *txnCommittable, endErr error) error {
	age := "unknown"
	if !c.Started.IsZero() {
		age = time.Since(c.Started).Round(time.Millisecond).String()
	}
	msg := fmt.Sprintf("kafka sink %s: %s was aborted by the broker before it could be committed, although its checkpoint is complete: its records are lost and the output is no longer exactly-once. "+
		"A broker aborts a transaction open longer than the transaction timeout (%v; this one was started %s ago) or one whose id another producer initialised; "+
		"the usual cause is a transaction timeout too small for checkpoint interval + checkpoint duration + restart and recovery time: raise transaction_timeout (and the brokers' transaction.max.timeout.ms), "+
		"and make sure no other job uses transactional_id_prefix %q",
		cfg.Topic, c.String(), cfg.TransactionTimeout, age, cfg.TransactionalIDPrefix)
	if endErr != nil {
		msg += fmt.Sprintf(" (EndTxn(commit) answered: %v)", endErr)
	}
	return fmt.Errorf("%s: %w (%w)", msg, ErrTransactionAborted, runtime.ErrIncompatible)
}
