package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingest-engine/ingest/runtime"
)

// ownerValue encodes an owner record.
func ownerValue(t *testing.T, o txnOwner) []byte {
	t.Helper()
	if o.Version == 0 {
		o.Version = txnOwnerVersion
	}
	b, err := json.Marshal(&o)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The owner of a prefix is the first record of the highest generation;
// losing claims (a generation already seen), other keys, transactional
// records do not count; a null value releases the prefix; a record that is
// not an owner record leaves the owner unknown until a release; a log whose
// start was deleted starts with whatever generation survives.
func TestTxnOwnerChain(t *testing.T) {
	a := txnOwner{Pipeline: "pa", Sink: "out", Job: "ja", Claim: "a"}
	b := txnOwner{Pipeline: "pb", Sink: "out", Job: "jb", Claim: "b"}
	gen := func(o txnOwner, g int64) txnOwner { o.Gen = g; return o }
	ch := newTxnOwnerChain("p")
	step := func(offset int64, key string, value []byte, transactional bool, wantJob string, wantOffset int64, wantErr bool) {
		t.Helper()
		ch.apply("owners", offset, []byte(key), value, transactional)
		job := ""
		if ch.owner != nil {
			job = ch.owner.Job
		}
		if job != wantJob || ch.offset != wantOffset || (ch.err != nil) != wantErr {
			t.Fatalf("after offset %d: owner %q at %d, err %v; want %q at %d, err %v", offset, job, ch.offset, ch.err, wantJob, wantOffset, wantErr)
		}
	}
	if v := ch.verdict("pa", "out", "ja"); v != txnUnowned {
		t.Fatalf("empty log: verdict %d", v)
	}
	step(0, "p", ownerValue(t, gen(a, 1)), false, "ja", 0, false)
	step(1, "p", ownerValue(t, gen(b, 1)), false, "ja", 0, false) // lost the race
	step(2, "q", ownerValue(t, gen(b, 5)), false, "ja", 0, false) // another prefix
	step(3, "p", ownerValue(t, gen(b, 5)), true, "ja", 0, false)  // in a transaction
	a2 := gen(a, 2)
	a2.Job = "ja2"
	step(4, "p", ownerValue(t, a2), false, "ja2", 4, false) // a takeover by another job
	for _, c := range []struct {
		pipeline, sink, job string
		want                txnClaimVerdict
	}{
		{"pa", "out", "ja2", txnOwnedByJob},
		{"pa", "out", "ja", txnOwnedBySink},
		{"pa", "other", "ja2", txnOwnedByOther},
		{"pb", "out", "ja2", txnOwnedByOther},
	} {
		if v := ch.verdict(c.pipeline, c.sink, c.job); v != c.want {
			t.Errorf("verdict(%s, %s, %s) = %d, want %d", c.pipeline, c.sink, c.job, v, c.want)
		}
	}
	step(5, "p", nil, false, "", 5, false)                        // released
	step(6, "p", ownerValue(t, gen(b, 2)), false, "", 5, false)   // stale: generation 2 was seen
	step(7, "p", ownerValue(t, gen(b, 3)), false, "jb", 7, false) // the next claim
	step(8, "p", []byte("not json"), false, "jb", 7, true)
	if v := ch.verdict("pb", "out", "jb"); v != txnOwnedByOther {
		t.Fatalf("with a record that is no owner record: verdict %d, want txnOwnedByOther", v)
	}
	step(9, "p", ownerValue(t, gen(a, 4)), false, "ja", 9, true) // still unknown
	step(10, "p", nil, false, "", 10, false)
	step(11, "p", ownerValue(t, txnOwner{Version: 2, Pipeline: "x", Sink: "y", Job: "z", Gen: 9}), false, "", 10, true)
	step(12, "p", ownerValue(t, txnOwner{Pipeline: "x", Gen: 9}), false, "", 10, true)

	trimmed := newTxnOwnerChain("p")
	trimmed.apply("owners", 500, []byte("p"), ownerValue(t, gen(b, 7)), false)
	if trimmed.owner == nil || trimmed.owner.Job != "jb" {
		t.Fatalf("a log starting at generation 7: owner %+v", trimmed.owner)
	}
}

// claimerOf returns the runtime.DestinationClaimer of a new sink on cfg.
func claimerOf(t *testing.T, cfg SinkConfig) runtime.DestinationClaimer {
	t.Helper()
	c, ok := newTextSink(t, cfg).Committer().(runtime.DestinationClaimer)
	if !ok {
		t.Fatal("the kafka committer does not implement runtime.DestinationClaimer")
	}
	return c
}

// produceOwner writes a record to partition 0 of the owner topic, as an
// operator's tool would.
func produceOwner(t *testing.T, k *sinkTestCluster, topic, key string, value []byte) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: topic, Key: []byte(key), Value: value}).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// Another sink of the same pipeline is refused as another pipeline is; a
// record that is no owner record refuses every claimer, naming where it is;
// a null value releases the prefix for the next claimer; a Reclaim without
// a Claim that found another job of the sink is refused.
func TestTxnClaimOwnerTopic(t *testing.T) {
	k := newSinkCluster(t, 1)
	cfg := k.config("own")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if prev, err := claimerOf(t, cfg).Claim(ctx, "p", "out", "j1"); err != nil || prev != "" {
		t.Fatalf("first claim: %q, %v", prev, err)
	}
	_, err := claimerOf(t, cfg).Claim(ctx, "p", "out2", "j1")
	if !errors.Is(err, runtime.ErrUnrecoverable) {
		t.Fatalf("another sink of the pipeline: %v, want a refusal", err)
	}
	wantErrContains(t, err, `sink "out" of pipeline "p"`, `not to sink "out2" of pipeline "p"`, "release the prefix")
	if err := claimerOf(t, cfg).Reclaim(ctx, "p", "out", "j9"); err == nil {
		t.Fatal("a Reclaim without a Claim was accepted")
	}

	produceOwner(t, k, DefaultOwnerTopic, "own", []byte("garbage"))
	_, err = claimerOf(t, cfg).Claim(ctx, "p", "out", "j1")
	if !errors.Is(err, runtime.ErrUnrecoverable) {
		t.Fatalf("after a record that is no owner record: %v, want a refusal", err)
	}
	wantErrContains(t, err, DefaultOwnerTopic+" partition 0 offset 1", "garbage")

	produceOwner(t, k, DefaultOwnerTopic, "own", nil) // released
	if prev, err := claimerOf(t, cfg).Claim(ctx, "q", "out", "j5"); err != nil || prev != "" {
		t.Fatalf("claim after the release: %q, %v", prev, err)
	}
	if _, err := claimerOf(t, cfg).Claim(ctx, "p", "out", "j1"); !errors.Is(err, runtime.ErrUnrecoverable) {
		t.Fatalf("the released owner claiming again: %v, want a refusal", err)
	}
	// Other prefixes in the same topic are independent.
	if prev, err := claimerOf(t, k.config("own2")).Claim(ctx, "p", "out", "j1"); err != nil || prev != "" {
		t.Fatalf("claim of another prefix: %q, %v", prev, err)
	}
}

// An owner topic created by hand that deletes records (finite retention,
// compaction) is refused: its owner records would go, and another sink could
// then claim a prefix in use. One created by the sink keeps them.
func TestTxnClaimOwnerTopicRetention(t *testing.T) {
	k := newSinkCluster(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cases := []struct {
		topic   string
		configs map[string]string
		want    string
	}{
		{"owners-default", nil, "retention.ms=604800000"},
		{"owners-week", map[string]string{"retention.ms": "604800000"}, "retention.ms=604800000"},
		{"owners-compacted", map[string]string{"retention.ms": "-1", "cleanup.policy": "compact"}, "cleanup.policy=compact"},
		{"owners-bytes", map[string]string{"retention.ms": "-1", "retention.bytes": "1048576"}, "retention.bytes=1048576"},
	}
	for _, c := range cases {
		configs := map[string]*string{}
		for key, v := range c.configs {
			configs[key] = &v
		}
		if _, err := kadm.NewClient(k.cl).CreateTopic(ctx, 1, 1, configs, c.topic); err != nil {
			t.Fatal(err)
		}
		cfg := k.config("ret")
		cfg.OwnerTopic = c.topic
		_, err := claimerOf(t, cfg).Claim(ctx, "p", "out", "j1")
		if !errors.Is(err, runtime.ErrUnrecoverable) {
			t.Errorf("%s: %v, want a refusal wrapping runtime.ErrUnrecoverable", c.topic, err)
			continue
		}
		wantErrContains(t, err, c.topic, c.want, "retention.ms=-1")
	}
	cfg := k.config("ret")
	cfg.OwnerTopic = "owners-created"
	if _, err := claimerOf(t, cfg).Claim(ctx, "p", "out", "j1"); err != nil {
		t.Fatalf("an owner topic the sink created: %v", err)
	}
	rcs, err := kadm.NewClient(k.cl).DescribeTopicConfigs(ctx, "owners-created")
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On("owners-created", nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range rc.Configs {
		got[c.Key] = c.MaybeValue()
	}
	for key, want := range txnOwnerTopicConfig {
		if got[key] != want {
			t.Errorf("the created owner topic has %s=%q, want %q", key, got[key], want)
		}
	}
}

// A job killed after claiming the prefix but before its first transaction
// leaves an owner record and no marker: the claim itself creates the marker
// topic, so the next job learns that the owner published nothing (0) and
// takes the prefix over, instead of failing every restart on a marker topic
// that never existed.
func TestTxnClaimBeforeAnyTransaction(t *testing.T) {
	k := newSinkCluster(t, 1)
	cfg := k.config("early")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if prev, err := claimerOf(t, cfg).Claim(ctx, "p", "out", "j1"); err != nil || prev != "" {
		t.Fatalf("first claim: %q, %v", prev, err)
	}
	// j1 dies here. j2 finds it owning the prefix.
	s := newTextSink(t, cfg)
	claimer := s.Committer().(runtime.DestinationClaimer)
	prev, err := claimer.Claim(ctx, "p", "out", "j2")
	if err != nil || prev != "j1" {
		t.Fatalf("second job's claim: %q, %v; want j1", prev, err)
	}
	last, err := s.Committer().(runtime.CommitTracker).LastCommitted(ctx, prev, "out")
	if err != nil || last != 0 {
		t.Fatalf("what j1 published: %d, %v; want 0 and no error", last, err)
	}
	if err := claimer.Reclaim(ctx, "p", "out", "j2"); err != nil {
		t.Fatal(err)
	}
	// A claim against a data topic that does not exist fails naming it
	// before anything is written to the owner topic.
	bad := k.config("missing")
	bad.Topic = "no-such-topic"
	bad.MarkerTopic = ""
	_, err = claimerOf(t, bad).Claim(ctx, "p", "out", "j1")
	wantErrContains(t, err, "no-such-topic", "create it first")
}
