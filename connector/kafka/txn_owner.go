package kafka

import (
	"encoding/json"
	"fmt"
	"time"
)

// txnOwnerVersion is the format version of an owner record; a claimer
// refuses versions it does not know rather than guess who owns a prefix.
const txnOwnerVersion = 1

// txnOwner is the value of an owner record: sink Sink of pipeline Pipeline,
// run by job Job, owns the transactional-id prefix that is the record's key.
// Owner records live in partition 0 of the owner topic (SinkConfig.OwnerTopic),
// written without a transaction.
type txnOwner struct {
	Version  int    `json:"v"`
	Pipeline string `json:"pipeline"`
	Sink     string `json:"sink"`
	Job      string `json:"job"`
	// Gen numbers the prefix's owners: a claim is written with one more than
	// the generation its writer read last (see txnOwnerChain).
	Gen int64 `json:"gen"`
	// Claim is a random id of the write, so that a writer recognises its
	// own record also when a retry wrote it twice.
	Claim string `json:"claim"`
	// Topic is the sink's topic and At when the claim was written: for the
	// people reading a refusal.
	Topic string    `json:"topic"`
	At    time.Time `json:"at"`
}

// sameSink reports whether o names sink of pipeline (any job).
func (o *txnOwner) sameSink(pipeline, sink string) bool {
	return o.Pipeline == pipeline && o.Sink == sink
}

// String names the owner for errors.
func (o *txnOwner) String() string {
	return fmt.Sprintf("sink %q of pipeline %q (job %s, topic %s, since %s)", o.Sink, o.Pipeline, o.Job, o.Topic, o.At.UTC().Format(time.RFC3339))
}

// txnOwnerChain folds the owner topic's records of one prefix, in offset
// order, into the prefix's owner. The rule, which every reader of the same
// log applies to the same records and so agrees on:
//
//   - A record whose generation is above every generation seen before makes
//     its writer the owner. A writer reads the log, and writes generation
//     g+1 only after it saw generation g's owner, so of two claims racing on
//     the same owner (both wrote g+1) the first in the log wins, and the
//     second — whose writer had not seen the first — counts for nothing.
//   - A record with a null value (a tombstone an operator produced) releases
//     the prefix: it has no owner until the next claim (generation g+1).
//   - A record that is not an owner record of a known version leaves the
//     owner unknown (err) until a release.
//
// A prefix whose records were all deleted (retention, a recreated topic) has
// no owner, so the owner topic must keep its records (retention.ms=-1,
// never compacted: compaction would keep a losing claim and drop the
// winner).
type txnOwnerChain struct {
	prefix string
	// gen is the highest generation seen; owner is its first record, nil
	// when no claim was seen since the start or the last release.
	gen   int64
	owner *txnOwner
	// offset is where owner's record (or the last release) is; -1 if none.
	offset int64
	// err is set by a record that is no owner record, until a release.
	err error
}

// newTxnOwnerChain returns the state of a prefix before any record.
func newTxnOwnerChain(prefix string) txnOwnerChain {
	return txnOwnerChain{prefix: prefix, offset: -1}
}

// apply folds the record at offset of topic's partition 0 into the chain.
// Records of other keys, and records written in transactions (no claimer
// writes those), are not the prefix's.
func (c *txnOwnerChain) apply(topic string, offset int64, key, value []byte, transactional bool) {
	if transactional || string(key) != c.prefix {
		return
	}
	if value == nil {
		c.owner, c.offset, c.err = nil, offset, nil
		return
	}
	var o txnOwner
	err := json.Unmarshal(value, &o)
	switch {
	case err != nil:
	case o.Version != txnOwnerVersion:
		err = fmt.Errorf("format version %d; this build reads version %d", o.Version, txnOwnerVersion)
	case o.Gen <= 0 || o.Pipeline == "" || o.Sink == "" || o.Job == "":
		err = fmt.Errorf("generation %d, pipeline %q, sink %q, job %q: incomplete", o.Gen, o.Pipeline, o.Sink, o.Job)
	}
	if err != nil {
		c.err = fmt.Errorf("%s partition 0 offset %d holds a record for transactional_id_prefix %q that is not an owner record (%q: %v), so who owns the prefix cannot be told",
			topic, offset, c.prefix, txnTruncate(value, 200), err)
		return
	}
	if o.Gen > c.gen {
		c.gen, c.owner, c.offset = o.Gen, &o, offset
	}
}

// txnClaimVerdict is what a claimer of a prefix makes of the chain.
type txnClaimVerdict int

const (
	// txnUnowned: nobody owns the prefix; the claimer may write a claim.
	txnUnowned txnClaimVerdict = iota
	// txnOwnedByJob: the claimer's own job owns it.
	txnOwnedByJob
	// txnOwnedBySink: another job of the claimer's pipeline and sink owns it.
	txnOwnedBySink
	// txnOwnedByOther: another pipeline or sink owns it, or the owner is
	// unknown (err).
	txnOwnedByOther
)

// verdict tells where job of sink of pipeline stands with the prefix.
func (c *txnOwnerChain) verdict(pipeline, sink, job string) txnClaimVerdict {
	switch {
	case c.err != nil:
		return txnOwnedByOther
	case c.owner == nil:
		return txnUnowned
	case !c.owner.sameSink(pipeline, sink):
		return txnOwnedByOther
	case c.owner.Job == job:
		return txnOwnedByJob
	}
	return txnOwnedBySink
}
