package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/internal/failpoint"
	"github.com/ingest-engine/ingest/runtime"
)

func TestSinkConfigDefaultsAndErrors(t *testing.T) {
	s, err := NewSink(SinkConfig{Brokers: []string{"b:9092"}, Topic: "t", TransactionalIDPrefix: "p"}, sinkText)
	if err != nil {
		t.Fatal(err)
	}
	c := s.Config()
	if c.TransactionTimeout != 15*time.Minute || c.PoolSize != 5 || c.MarkerTopic != "t.ingest-txn-markers" ||
		c.DeliveryTimeout != 2*time.Minute || c.CommitTimeout != time.Minute || c.RecoveryMargin != time.Minute || c.OwnerTopic != "ingest-txn-owners" {
		t.Errorf("defaults: %+v", c)
	}
	if s.Descriptor().Capabilities.SinkGuarantee() != runtime.ExactlyOnce || s.Committer() == nil || s.Descriptor().Type != "kafka" {
		t.Errorf("sink declares %v, committer %v, type %q; want exactly-once with a committer, type kafka", s.Descriptor().Capabilities.SinkGuarantee(), s.Committer(), s.Descriptor().Type)
	}
	if d := s.Describe(); !strings.Contains(d, "t") || !strings.Contains(d, "p-<subtask>-<0..4>") {
		t.Errorf("Describe = %q", d)
	}

	_, err = NewSink(SinkConfig{}, sinkText)
	wantErrContains(t, err, "kafka sink", "brokers", "topic is required", "transactional_id_prefix is required")
	_, err = NewSink(SinkConfig{Brokers: []string{"b"}, Topic: "bad topic", TransactionalIDPrefix: "p", PoolSize: 1, TransactionTimeout: 1500 * time.Microsecond}, sinkText)
	wantErrContains(t, err, `topic "bad topic" is not a valid`, "pool_size 1 must be at least 2", "transaction_timeout 1.5ms")
	_, err = NewSink(SinkConfig{Brokers: []string{"b"}, Topic: "t", MarkerTopic: "t", TransactionalIDPrefix: "p"}, sinkText)
	wantErrContains(t, err, "marker_topic must differ")
	for _, owner := range []string{"t", "t.ingest-txn-markers"} {
		_, err = NewSink(SinkConfig{Brokers: []string{"b"}, Topic: "t", OwnerTopic: owner, TransactionalIDPrefix: "p"}, sinkText)
		wantErrContains(t, err, fmt.Sprintf("owner_topic %q must differ", owner))
	}
	_, err = NewSink(SinkConfig{Brokers: []string{"b"}, Topic: "t", OwnerTopic: "bad owners", TransactionalIDPrefix: "p"}, sinkText)
	wantErrContains(t, err, `owner_topic "bad owners" is not a valid`)
	_, err = NewSink[string](SinkConfig{Brokers: []string{"b"}, Topic: "t", TransactionalIDPrefix: "p"}, nil)
	wantErrContains(t, err, "encode function is required")
}

// The start-up check of the transaction timeout against the checkpoint
// settings refuses a timeout that a complete checkpoint's transaction could
// outlive, and its message gives the numbers.
func TestValidateAgainstGivesTheNumbers(t *testing.T) {
	cfg := SinkConfig{Brokers: []string{"b"}, Topic: "orders", TransactionalIDPrefix: "p", TransactionTimeout: time.Minute}
	o := checkpoint.DefaultOptions()
	o.Interval, o.Timeout = 30*time.Second, 45*time.Second
	err := cfg.ValidateAgainst(o)
	wantErrContains(t, err, "kafka sink orders", "transaction timeout 1m0s", "checkpoint interval 30s", "checkpoint timeout 45s",
		"recovery margin 1m0s", "= 2m15s", "at least 2m15s", "lost")
	t.Logf("message: %v", err)

	cfg.TransactionTimeout = 2*time.Minute + 15*time.Second
	if err := cfg.ValidateAgainst(o); err != nil {
		t.Errorf("timeout equal to the need: %v", err)
	}
	// A min pause longer than the interval spaces the barriers instead.
	o.MinPause = time.Minute
	wantErrContains(t, cfg.ValidateAgainst(o), "checkpoint min pause 1m0s", "= 2m45s")
	o.MinPause = 0
	// The defaults fit the default checkpoint options (10s + 10m + 1m < 15m).
	cfg.TransactionTimeout = 0
	if err := cfg.ValidateAgainst(checkpoint.DefaultOptions()); err != nil {
		t.Errorf("defaults against checkpoint defaults: %v", err)
	}
	if a := cfg.PoolAdvice(checkpoint.DefaultOptions()); a != "" {
		t.Errorf("default pool against default checkpoint options: %q", a)
	}
	o = checkpoint.DefaultOptions()
	o.TolerableFailures = 10
	if a := cfg.PoolAdvice(o); !strings.Contains(a, "pool_size 5 is below tolerable_failures 10 + max_concurrent 1 + 1 = 12") {
		t.Errorf("PoolAdvice = %q", a)
	}
	// ConfigureCheckpointing applies the same check.
	s := newTextSink(t, SinkConfig{Brokers: []string{"b"}, Topic: "orders", TransactionalIDPrefix: "p", TransactionTimeout: time.Minute})
	if err := s.ConfigureCheckpointing(checkpoint.DefaultOptions()); err == nil {
		t.Error("ConfigureCheckpointing accepted a 1m timeout with 10m checkpoint timeouts")
	}
}

// Records written since the last barrier are in an open transaction:
// invisible to a read-committed consumer until the checkpoint's commit, then
// visible all at once. Prepare leaves the transaction open: a read-committed
// consumer is held at it.
func TestSinkStagedOutputInvisibleUntilCommit(t *testing.T) {
	k := newSinkCluster(t, 3)
	s := newTextSink(t, k.config("stage"))
	w := openSinkWriter(t, s, 0)
	sinkWrite(t, w, "a", "b")
	sinkWrite(t, w, "c")
	cs := sinkSnapshot(t, w, 1)
	if len(cs) != 1 || cs[0].PreparedAt != 1 {
		t.Fatalf("committables %+v, want one prepared at 1", cs)
	}
	if got := k.readTopic(t, k.topic, true); len(got) != 0 {
		t.Fatalf("after prepare a read-committed consumer sees %v", sinkValues(got))
	}
	if got := sinkValues(k.readTopic(t, k.topic, false)); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("a read-uncommitted consumer sees %v: prepare did not flush everything", got)
	}
	if !k.stuck(t, k.topic) {
		t.Fatal("the prepared transaction does not hold back the last stable offset: was it committed?")
	}
	tc := decodeAll(t, cs)[0]
	if tc.Records != 3 || tc.TxnID != "stage-0-0" || tc.MarkerTopic != k.topic+".ingest-txn-markers" {
		t.Errorf("committable %+v", tc)
	}
	if err := s.Committer().Commit(context.Background(), sinkJob, sinkCommitOf(1, cs)); err != nil {
		t.Fatal(err)
	}
	got := k.readTopic(t, k.topic, true)
	if vals := sinkValues(got); !slices.Equal(vals, []string{"a", "b", "c"}) {
		t.Fatalf("after commit a read-committed consumer sees %v, want a b c", vals)
	}
	for _, r := range got {
		if r.PID != tc.ProducerID || r.Epoch != tc.Epoch {
			t.Errorf("record %q written by producer %d epoch %d, the committable names %d/%d", r.Value, r.PID, r.Epoch, tc.ProducerID, tc.Epoch)
		}
	}
	if k.stuck(t, k.topic) {
		t.Error("a read-committed consumer is still held back after the commit")
	}
	m := k.markers(t, tc.MarkerTopic)[txnRef{tc.ProducerID, tc.Epoch}]
	if m.Checkpoint != 1 || m.Records != 3 || m.TxnID != "stage-0-0" || m.Job != sinkJob || m.Sink != "out" {
		t.Errorf("committed marker %+v", m)
	}
}

// Each barrier prepares the open transaction and the next records go into a
// new one on the next id of the pool; a barrier with nothing written since
// the last prepares nothing new. Every snapshot reports all prepared
// transactions not yet known complete.
func TestSinkSnapshotRotatesTransactions(t *testing.T) {
	k := newSinkCluster(t, 2)
	s := newTextSink(t, k.config("rot"))
	w := openSinkWriter(t, s, 1)
	sinkWrite(t, w, "x1", "x2")
	c1 := sinkSnapshot(t, w, 1)
	sinkWrite(t, w, "y1")
	c2 := sinkSnapshot(t, w, 2)
	if len(c2) != 2 {
		t.Fatalf("snapshot 2 reports %d committables, want 2 (1 is not known complete)", len(c2))
	}
	c3 := sinkSnapshot(t, w, 3)
	if len(c3) != 2 {
		t.Fatalf("an empty interval: snapshot 3 reports %d committables, want the 2 pending", len(c3))
	}
	txns := decodeAll(t, c3)
	if txns[0].TxnID != "rot-1-0" || txns[1].TxnID != "rot-1-1" || txns[0].Records != 2 || txns[1].Records != 1 {
		t.Fatalf("transactions %+v, want rot-1-0 with 2 records and rot-1-1 with 1", txns)
	}
	// The snapshot is the caller's.
	c3[0].PreparedAt = 99
	if err := w.NotifyComplete(1); err != nil {
		t.Fatal(err)
	}
	if got := sinkSnapshot(t, w, 4); len(got) != 1 || got[0].PreparedAt != 2 {
		t.Fatalf("after NotifyComplete(1): %+v, want only the one prepared at 2", got)
	}
	// A commit that carries several checkpoints' transactions publishes them
	// all.
	if err := s.Committer().Commit(context.Background(), sinkJob, sinkCommitOf(2, c1[:1], c2[1:])); err != nil {
		t.Fatal(err)
	}
	if got := sinkValues(k.readTopic(t, k.topic, true)); !slices.Equal(got, []string{"x1", "x2", "y1"}) {
		t.Fatalf("committed %v", got)
	}
}

// Committing again, by the same committer or by a new process's, publishes
// nothing twice; so does committing after the transactional id was reused
// (its epoch moved on, so EndTxn is refused and the marker decides).
func TestSinkCommitIsIdempotent(t *testing.T) {
	k := newSinkCluster(t, 3)
	s := newTextSink(t, k.config("idem"))
	w0, w1 := openSinkWriter(t, s, 0), openSinkWriter(t, s, 1)
	sinkWrite(t, w0, "p")
	sinkWrite(t, w1, "q", "r")
	c := sinkCommitOf(5, sinkSnapshot(t, w0, 5), sinkSnapshot(t, w1, 5))
	for range 3 {
		if err := s.Committer().Commit(context.Background(), sinkJob, c); err != nil {
			t.Fatal(err)
		}
	}
	fresh := newTextSink(t, k.config("idem")) // a new process: empty ledger
	if err := fresh.Committer().Commit(context.Background(), sinkJob, c); err != nil {
		t.Fatalf("re-commit by a new process: %v", err)
	}
	// The ids are re-initialised (a restarted subtask fences its pool), then
	// the old commit is published again, by a new process.
	openSinkWriter(t, newTextSink(t, k.config("idem")), 0)
	openSinkWriter(t, newTextSink(t, k.config("idem")), 1)
	if err := newTextSink(t, k.config("idem")).Committer().Commit(context.Background(), sinkJob, c); err != nil {
		t.Fatalf("re-commit after the ids were fenced: %v", err)
	}
	if got := sinkValues(k.readTopic(t, k.topic, true)); !slices.Equal(got, []string{"p", "q", "r"}) {
		t.Fatalf("committed %v, want p q r once each", got)
	}
	if err := s.Committer().Commit(context.Background(), sinkJob, checkpoint.Commit{Checkpoint: 6, Sink: "out"}); err != nil {
		t.Fatalf("empty commit: %v", err)
	}
}

// A prepared transaction outlives the process that prepared it: a committer
// of a new process commits it by transactional id, producer id and epoch
// alone (the recovery path).
func TestSinkRecoveryCommitByNewProcess(t *testing.T) {
	k := newSinkCluster(t, 3)
	cfg := k.config("recover")
	w := openSinkWriter(t, newTextSink(t, cfg), 0)
	sinkWrite(t, w, "r1", "r2", "r3")
	cs := sinkSnapshot(t, w, 7)
	sinkWrite(t, w, "after-barrier") // open transaction: belongs to no checkpoint
	sinkFlushOpen(t, w)
	// The process dies: its transactions are left as they are.
	if got := k.readTopic(t, k.topic, true); len(got) != 0 {
		t.Fatalf("before the recovery a read-committed consumer sees %v", sinkValues(got))
	}
	next := newTextSink(t, cfg)
	if err := next.Committer().Commit(context.Background(), "job1", sinkCommitOf(7, cs)); err != nil {
		t.Fatalf("recovery commit: %v", err)
	}
	n, err := next.Committer().Abandon(context.Background(), "job1")
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("Abandon aborted %d transactions, want 1 (the open one)", n)
	}
	if got := sinkValues(k.readTopic(t, k.topic, true)); !slices.Equal(got, []string{"r1", "r2", "r3"}) {
		t.Fatalf("after the recovery a read-committed consumer sees %v, want r1 r2 r3", got)
	}
	if k.stuck(t, k.topic) {
		t.Fatal("the abandoned open transaction still holds back read-committed consumers")
	}
	// The crashed process's client now is fenced: its next produce fails.
	sinkWrite(t, w, "zombie")
	if _, err := w.Snapshot(8); err == nil {
		t.Error("a fenced subtask prepared a transaction")
	}
}

// A complete checkpoint's transaction that the broker aborted (here: a new
// producer initialised its id; or it timed out) fails the commit loudly,
// saying the output is lost and why; it is not retried by restarts.
func TestSinkAbortedTransactionFailsLoudly(t *testing.T) {
	k := newSinkCluster(t, 1)
	t.Run("fenced", func(t *testing.T) {
		s := newTextSink(t, k.config("fenced"))
		w := openSinkWriter(t, s, 0)
		sinkWrite(t, w, "doomed")
		cs := sinkSnapshot(t, w, 3)
		openSinkWriter(t, s, 0) // a second subtask 0: fences and aborts the pool's transactions
		err := s.Committer().Commit(context.Background(), sinkJob, sinkCommitOf(3, cs))
		if !errors.Is(err, ErrTransactionAborted) || !errors.Is(err, runtime.ErrIncompatible) {
			t.Fatalf("Commit = %v, want ErrTransactionAborted and runtime.ErrIncompatible", err)
		}
		wantErrContains(t, err, "fenced-0-0", "checkpoint 3", "lost", "exactly-once", "transaction timeout", "transactional_id_prefix")
	})
	t.Run("timed out", func(t *testing.T) {
		cfg := k.config("expire")
		cfg.TransactionTimeout = 200 * time.Millisecond
		cfg.RecoveryMargin = time.Millisecond
		s := newTextSink(t, cfg)
		w := openSinkWriter(t, s, 0)
		sinkWrite(t, w, "late")
		cs := sinkSnapshot(t, w, 4)
		deadline := time.Now().Add(5 * time.Second)
		for k.stuck(t, k.topic) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		err := s.Committer().Commit(context.Background(), sinkJob, sinkCommitOf(4, cs))
		if !errors.Is(err, ErrTransactionAborted) {
			t.Fatalf("Commit = %v, want ErrTransactionAborted", err)
		}
		wantErrContains(t, err, "expire-0-0", "transaction timeout (200ms", "lost")
		t.Logf("message: %v", err)
	})
	if got := k.readTopic(t, k.topic, true); len(got) != 0 {
		t.Fatalf("aborted transactions are visible: %v", sinkValues(got))
	}
}

// Transactions an earlier run left open are aborted at start, so
// read-committed consumers are not blocked: by the committer's Abandon for
// every id of the prefix (also of subtasks the pipeline no longer has), and
// by each subtask's Open for its own pool.
func TestSinkLingeringTransactionsAborted(t *testing.T) {
	k := newSinkCluster(t, 2)
	cfg := k.config("linger")
	old := newTextSink(t, cfg)
	w0, w3 := openSinkWriter(t, old, 0), openSinkWriter(t, old, 3)
	sinkWrite(t, w0, "open-0") // open, never prepared
	sinkFlushOpen(t, w0)
	sinkWrite(t, w3, "prepared-3") // prepared at a checkpoint that never completed
	sinkSnapshot(t, w3, 9)
	other := newTextSink(t, k.config("x")) // another sink's transaction: not ours to abort
	wx := openSinkWriter(t, other, 0)
	sinkWrite(t, wx, "other")
	sinkFlushOpen(t, wx)
	// Meanwhile some other producer commits to the topic.
	committed := newTextSink(t, k.config("done"))
	wd := openSinkWriter(t, committed, 0)
	sinkWrite(t, wd, "visible")
	if err := committed.Committer().Commit(context.Background(), sinkJob, sinkCommitOf(1, sinkSnapshot(t, wd, 1))); err != nil {
		t.Fatal(err)
	}
	if !k.stuck(t, k.topic) {
		t.Fatal("setup: the lingering transactions do not hold back read-committed consumers")
	}

	n, err := newTextSink(t, cfg).Committer().Abandon(context.Background(), "job2")
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("Abandon aborted %d transactions, want 2 (linger-0-0 and linger-3-0)", n)
	}
	listed, err := kadm.NewClient(k.cl).ListTransactions(context.Background(), nil, []string{"Ongoing"})
	if err != nil {
		t.Fatal(err)
	}
	var ongoing []string
	for _, l := range listed.Sorted() {
		ongoing = append(ongoing, l.TxnID)
	}
	if !slices.Equal(ongoing, []string{"x-0-0"}) {
		t.Errorf("ongoing after Abandon: %v, want only the other sink's x-0-0", ongoing)
	}
	// The other sink's transaction still blocks partition reads behind it;
	// once it is fenced by its own subtask's Open, everything committed shows.
	openSinkWriter(t, newTextSink(t, k.config("x")), 0)
	if got := sinkValues(k.readTopic(t, k.topic, true)); !slices.Equal(got, []string{"visible"}) {
		t.Fatalf("read-committed consumer sees %v, want only the committed record", got)
	}
	if k.stuck(t, k.topic) {
		t.Fatal("still held back after every lingering transaction was aborted")
	}
	if n, err := newTextSink(t, cfg).Committer().Abandon(context.Background(), "job2"); err != nil || n != 0 {
		t.Errorf("second Abandon = %d, %v; want 0, nil", n, err)
	}
}

// When checkpoints fail in a row, prepared transactions accumulate (each is
// carried into the next checkpoint); a pool whose every id is busy fails the
// subtask with a message saying why and what to change.
func TestSinkPoolExhaustion(t *testing.T) {
	k := newSinkCluster(t, 1)
	cfg := k.config("pool")
	cfg.PoolSize = 3
	w := openSinkWriter(t, newTextSink(t, cfg), 0)
	for id := int64(1); id <= 3; id++ {
		sinkWrite(t, w, fmt.Sprint(id))
		sinkSnapshot(t, w, id)
	}
	err := w.Write(runtime.Batch[string]{{Value: "4"}})
	wantErrContains(t, err, "all 3 transactional ids are busy", "pool-0-0: prepared at checkpoint 1", "pool-0-2: prepared at checkpoint 3", "pool_size", "tolerable_failures")
	t.Logf("message: %v", err)
	// A completion frees them.
	if err := w.NotifyComplete(2); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(runtime.Batch[string]{{Value: "4"}}); err != nil {
		t.Fatalf("after NotifyComplete(2): %v", err)
	}
}

// Commits lag: a subtask told that a checkpoint completed may need an id
// whose transaction the committer has not committed yet. It commits the
// transaction itself before reusing the id (initialising the id would abort
// it); the committer's later commit recognises it.
func TestSinkReuseBeforeCommitterCommits(t *testing.T) {
	k := newSinkCluster(t, 2)
	cfg := k.config("lag")
	cfg.PoolSize = 2
	s := newTextSink(t, cfg)
	w := openSinkWriter(t, s, 0)
	sinkWrite(t, w, "a")
	c1 := sinkSnapshot(t, w, 1)
	if err := w.NotifyComplete(1); err != nil { // complete; the committer is slow
		t.Fatal(err)
	}
	sinkWrite(t, w, "b") // the second id
	c2 := sinkSnapshot(t, w, 2)
	if got := k.readTopic(t, k.topic, true); len(got) != 0 {
		t.Fatalf("nothing is committed yet, but a consumer sees %v", sinkValues(got))
	}
	sinkWrite(t, w, "c") // needs lag-0-0 again: checkpoint 1's transaction is committed first
	sinkFlushOpen(t, w)
	if got := sinkValues(k.readTopic(t, k.topic, false)); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("written: %v", got)
	}
	// "a" is committed; "b" (checkpoint 2 not complete) holds back what
	// follows it in its partition, so only check "a" is visible and "b" not.
	got := sinkValues(k.readTopic(t, k.topic, true))
	if !slices.Contains(got, "a") || slices.Contains(got, "b") || slices.Contains(got, "c") {
		t.Fatalf("after reusing lag-0-0 a read-committed consumer sees %v, want a (and not b, c)", got)
	}
	for _, cm := range []checkpoint.Commit{sinkCommitOf(1, c1), sinkCommitOf(2, c2)} {
		if err := s.Committer().Commit(context.Background(), sinkJob, cm); err != nil {
			t.Fatal(err)
		}
		if err := newTextSink(t, cfg).Committer().Commit(context.Background(), sinkJob, cm); err != nil {
			t.Fatalf("commit by a new process: %v", err)
		}
	}
	if err := w.NotifyComplete(2); err != nil {
		t.Fatal(err)
	}
	c3 := sinkSnapshot(t, w, 3)
	if err := s.Committer().Commit(context.Background(), sinkJob, sinkCommitOf(3, c3)); err != nil {
		t.Fatal(err)
	}
	if got := sinkValues(k.readTopic(t, k.topic, true)); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("committed %v, want a b c once each", got)
	}
}

// A broker answering CONCURRENT_TRANSACTIONS (a real coordinator still
// completing a previous transition; kfake never does on its own) is retried
// with backoff; persistent refusals fail the commit after CommitTimeout
// without touching the transaction, and a later commit succeeds.
func TestSinkCommitRetriesAndBounds(t *testing.T) {
	k := newSinkCluster(t, 1)
	cfg := k.config("retry")
	cfg.CommitTimeout = time.Second
	s := newTextSink(t, cfg)
	w := openSinkWriter(t, s, 0)

	sinkWrite(t, w, "one")
	c1 := sinkCommitOf(1, sinkSnapshot(t, w, 1))
	h := k.c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Err: kerr.ConcurrentTransactions, Count: 3})
	if err := s.Committer().Commit(context.Background(), sinkJob, c1); err != nil {
		t.Fatalf("commit through 3 CONCURRENT_TRANSACTIONS answers: %v", err)
	}
	if h.Hits() != 3 {
		t.Errorf("the fault answered %d EndTxn requests, want 3", h.Hits())
	}
	if err := w.NotifyComplete(1); err != nil {
		t.Fatal(err)
	}

	sinkWrite(t, w, "two")
	c2 := sinkCommitOf(2, sinkSnapshot(t, w, 2))
	h = k.c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Err: kerr.ConcurrentTransactions, Count: -1})
	start := time.Now()
	err := s.Committer().Commit(context.Background(), sinkJob, c2)
	wantErrContains(t, err, "retry-0-1", "CONCURRENT_TRANSACTIONS", "still failing after")
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("a persistently refused commit took %v; CommitTimeout is %v", took, cfg.CommitTimeout)
	}
	h.Remove()
	// A non-retriable refusal while the transaction is open: the log says
	// undecided until CommitTimeout, then the commit fails.
	k.c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Err: kerr.UnknownServerError, Count: 1})
	err = s.Committer().Commit(context.Background(), sinkJob, c2)
	wantErrContains(t, err, "retry-0-1", "UNKNOWN_SERVER_ERROR", "still undecided after 1s")
	if err := s.Committer().Commit(context.Background(), sinkJob, c2); err != nil {
		t.Fatalf("commit once the broker accepts: %v", err)
	}
	// Fencing at open (InitProducerID) is retried the same way: a real
	// coordinator answers CONCURRENT_TRANSACTIONS while it aborts the id's
	// ongoing transaction.
	h = k.c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.InitProducerID}, Err: kerr.ConcurrentTransactions, Count: 2})
	openSinkWriter(t, newTextSink(t, cfg), 1)
	if h.Hits() != 2 {
		t.Errorf("the fault answered %d InitProducerID requests, want 2", h.Hits())
	}
	if got := sinkValues(k.readTopic(t, k.topic, true)); !slices.Equal(got, []string{"one", "two"}) {
		t.Fatalf("committed %v", got)
	}
}

// A commit that fails between two subtasks' transactions (failpoint
// sink/kafka/mid-commit) leaves the first visible and the second prepared;
// committing again completes it without repeating the first.
func TestSinkMidCommitFailure(t *testing.T) {
	k := newSinkCluster(t, 1)
	s := newTextSink(t, k.config("mid"))
	w0, w1 := openSinkWriter(t, s, 0), openSinkWriter(t, s, 1)
	sinkWrite(t, w0, "s0")
	sinkWrite(t, w1, "s1")
	c := sinkCommitOf(2, sinkSnapshot(t, w0, 2), sinkSnapshot(t, w1, 2))
	disable := failpoint.Enable("sink/kafka/mid-commit", func() error { return failpoint.ErrInjected })
	err := s.Committer().Commit(context.Background(), sinkJob, c)
	disable()
	if !errors.Is(err, failpoint.ErrInjected) {
		t.Fatalf("Commit = %v, want the injected failure", err)
	}
	wantErrContains(t, err, "checkpoint 2", "after 1 of 2 transactions")
	if got := sinkValues(k.readTopic(t, k.topic, false)); !slices.Equal(got, []string{"s0", "s1"}) {
		t.Fatalf("written %v", got)
	}
	if got := sinkValues(k.readTopic(t, k.topic, true)); slices.Contains(got, "s1") {
		t.Fatalf("the second transaction became visible: %v", got)
	}
	if err := newTextSink(t, k.config("mid")).Committer().Commit(context.Background(), sinkJob, c); err != nil {
		t.Fatal(err)
	}
	if got := sinkValues(k.readTopic(t, k.topic, true)); !slices.Equal(got, []string{"s0", "s1"}) {
		t.Fatalf("committed %v, want s0 s1 once each", got)
	}
}

// A failure after the flush and before the committable is returned (failpoint
// sink/kafka/prepare) fails the snapshot; Close aborts the transaction, so
// nothing of it is ever visible and nothing is held back.
func TestSinkPrepareFailure(t *testing.T) {
	k := newSinkCluster(t, 2)
	s := newTextSink(t, k.config("prep"))
	w := openSinkWriter(t, s, 0)
	sinkWrite(t, w, "x", "y")
	disable := failpoint.Enable("sink/kafka/prepare", func() error { return failpoint.ErrInjected })
	_, err := w.Snapshot(1)
	disable()
	if !errors.Is(err, failpoint.ErrInjected) {
		t.Fatalf("Snapshot = %v, want the injected failure", err)
	}
	wantErrContains(t, err, "kafka sink "+k.topic, "prep-0-0", "checkpoint 1")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if k.stuck(t, k.topic) {
		t.Fatal("Close left the failed transaction open")
	}
	if got := k.readTopic(t, k.topic, true); len(got) != 0 {
		t.Fatalf("visible: %v", sinkValues(got))
	}
}

// A prepared transaction carried over failed checkpoints is refused once it
// could expire before a checkpoint commits it: the subtask fails (the job
// replays from the last complete checkpoint) instead of losing the records.
func TestSinkCarriedTransactionGuard(t *testing.T) {
	k := newSinkCluster(t, 1)
	cfg := k.config("guard")
	cfg.TransactionTimeout, cfg.RecoveryMargin = 2*time.Second, 300*time.Millisecond
	s := newTextSink(t, cfg)
	o := checkpoint.DefaultOptions()
	o.Interval, o.Timeout = 100*time.Millisecond, time.Second
	if err := s.ConfigureCheckpointing(o); err != nil {
		t.Fatal(err)
	}
	w := openSinkWriter(t, s, 0)
	sinkWrite(t, w, "old")
	sinkSnapshot(t, w, 1)
	time.Sleep(800 * time.Millisecond) // checkpoint 1 failed; more time passes
	_, err := w.Snapshot(2)
	wantErrContains(t, err, "guard-0-0", "prepared at checkpoint 1", "could outlive the transaction timeout 2s before checkpoint 2 commits it", "restarts")
	t.Logf("message: %v", err)
}

// Encoding errors and missing topics fail with messages naming the cause.
func TestSinkErrors(t *testing.T) {
	k := newSinkCluster(t, 1)
	s, err := NewSink(k.config("enc"), func(v string) ([]byte, []byte, error) {
		if v == "bad" {
			return nil, nil, errors.New("cannot encode bad")
		}
		return nil, []byte(v), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	w := openSinkWriter(t, s, 0)
	err = w.Write(runtime.Batch[string]{{Value: "ok"}, {Value: "bad", Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).UnixNano()}})
	wantErrContains(t, err, "kafka sink "+k.topic, "out[0]", "2026-01-02T03:04:05Z", "cannot encode bad")

	cfg := k.config("missing")
	cfg.Topic = "no-such-topic"
	ws := newTextSink(t, cfg).NewSubtask()
	err = ws.Open(&runtime.Context{Task: checkpoint.TaskID{Operator: "out"}, JobID: sinkJob})
	_ = ws.Close()
	wantErrContains(t, err, "no-such-topic", "create it first")

	// A transaction timeout above the brokers' maximum is refused at open.
	cfg = k.config("toolong")
	cfg.TransactionTimeout = 16 * time.Minute
	ws = newTextSink(t, cfg).NewSubtask()
	err = ws.Open(&runtime.Context{Task: checkpoint.TaskID{Operator: "out"}, JobID: sinkJob})
	_ = ws.Close()
	wantErrContains(t, err, "transaction timeout 16m0s is refused by the broker", "transaction.max.timeout.ms")

	// A produce the broker refuses fails the subtask at the barrier.
	w2 := openSinkWriter(t, newTextSink(t, k.config("refused")), 0)
	k.c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: k.topic, Err: kerr.TopicAuthorizationFailed, Count: -1})
	sinkWrite(t, w2, "x")
	_, err = w2.Snapshot(1)
	wantErrContains(t, err, "kafka sink "+k.topic, "TOPIC_AUTHORIZATION_FAILED")
}

// A marker that is no longer where its committable says (the marker topic was
// deleted and recreated) makes the outcome unknowable: the commit says so
// instead of guessing.
func TestSinkMarkerLost(t *testing.T) {
	k := newSinkCluster(t, 1)
	s := newTextSink(t, k.config("lost"))
	w := openSinkWriter(t, s, 0)
	sinkWrite(t, w, "v")
	cs := sinkSnapshot(t, w, 1)
	if err := s.Committer().Commit(context.Background(), sinkJob, sinkCommitOf(1, cs)); err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(k.cl)
	mt := s.Config().MarkerTopic
	if _, err := adm.DeleteTopics(context.Background(), mt); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		r, err := adm.CreateTopic(context.Background(), 1, -1, nil, mt)
		if err == nil && r.Err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("recreating %s: %v %v", mt, err, r.Err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The id moved on since (a restarted subtask fenced it), so the
	// coordinator cannot confirm the old commit either.
	openSinkWriter(t, newTextSink(t, k.config("lost")), 0)
	err := newTextSink(t, k.config("lost")).Committer().Commit(context.Background(), sinkJob, sinkCommitOf(1, cs))
	if !errors.Is(err, ErrMarkerLost) {
		t.Fatalf("Commit = %v, want ErrMarkerLost", err)
	}
	wantErrContains(t, err, "lost-0-0", "can no longer be told")

	// Retention removed the marker (here: records deleted up to past it).
	s2 := newTextSink(t, k.config("gone"))
	w2 := openSinkWriter(t, s2, 0)
	sinkWrite(t, w2, "v2")
	cs2 := sinkSnapshot(t, w2, 1)
	if err := s2.Committer().Commit(context.Background(), sinkJob, sinkCommitOf(1, cs2)); err != nil {
		t.Fatal(err)
	}
	openSinkWriter(t, newTextSink(t, k.config("gone")), 0)
	end := k.endOffsets(t, false, mt)[mt][0]
	dels, err := adm.DeleteRecords(context.Background(), kadm.Offsets{mt: {0: {Topic: mt, Partition: 0, At: end}}})
	if err == nil {
		err = dels.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	err = newTextSink(t, k.config("gone")).Committer().Commit(context.Background(), sinkJob, sinkCommitOf(1, cs2))
	if !errors.Is(err, ErrMarkerLost) {
		t.Fatalf("Commit after the marker was deleted = %v, want ErrMarkerLost", err)
	}
	wantErrContains(t, err, "gone-0-0", "deleted by retention")
}

// On a cluster of three brokers — the transaction coordinator, the data
// partitions' leaders and the marker partition's leader on different
// brokers — prepare, commit, recovery commit by a new process and the
// outcome check work the same.
func TestSinkMultiBroker(t *testing.T) {
	// kfake places leaders and coordinators at random: draw clusters until
	// all three brokers have a part (about one draw in eight misses one).
	var k *sinkTestCluster
	var nodes map[int32]bool
	for range 20 {
		k = newSinkCluster(t, 6, kfake.NumBrokers(3))
		nodes = map[int32]bool{k.c.CoordinatorFor("multi-0-0"): true, k.c.CoordinatorFor("multi-1-0"): true}
		for p := range int32(6) {
			nodes[k.c.LeaderFor(k.topic, p)] = true
		}
		if len(nodes) == 3 {
			break
		}
	}
	if len(nodes) < 3 {
		t.Fatalf("coordinators and leaders on brokers %v in 20 clusters: want all three used", nodes)
	}
	cfg := k.config("multi")
	s := newTextSink(t, cfg)
	w0, w1 := openSinkWriter(t, s, 0), openSinkWriter(t, s, 1)
	var want []string
	for i := range 50 {
		v := fmt.Sprintf("v%02d", i)
		want = append(want, v)
		sinkWrite(t, []*sinkWriter[string]{w0, w1}[i%2], v)
	}
	c := sinkCommitOf(1, sinkSnapshot(t, w0, 1), sinkSnapshot(t, w1, 1))
	if err := newTextSink(t, cfg).Committer().Commit(context.Background(), sinkJob, c); err != nil {
		t.Fatal(err)
	}
	openSinkWriter(t, newTextSink(t, cfg), 0) // the ids move on
	if err := newTextSink(t, cfg).Committer().Commit(context.Background(), sinkJob, c); err != nil {
		t.Fatalf("re-commit after the id moved on: %v", err)
	}
	slices.Sort(want)
	if got := sinkValues(k.readTopic(t, k.topic, true)); !slices.Equal(got, want) {
		t.Fatalf("committed %v, want %v", got, want)
	}
}

func TestTxnOwnedBy(t *testing.T) {
	for id, want := range map[string]bool{
		"p-0-0": true, "p-12-3": true, "p-0": false, "p-0-0-0": false, "pp-0-0": false, "p-a-0": false, "q-0-0": false,
	} {
		if got := txnOwnedBy("p", id); got != want {
			t.Errorf("txnOwnedBy(p, %q) = %v, want %v", id, got, want)
		}
	}
	if !txnOwnedBy("a-b", "a-b-1-2") || txnOwnedBy("a", "a-b-1-2") {
		t.Error("a prefix containing '-' is matched wrongly")
	}
}
