package kafka

import (
	"encoding/json"
	"fmt"
	"time"
)

// txnCommittableVersion is the format version of a committable; a committer
// refuses versions it does not know.
const txnCommittableVersion = 1

// txnCommittable is one prepared transaction: everything a committer in any
// process needs to commit it, or to tell that it was committed or aborted. It
// is the Data of a checkpoint.Committable and lives in the checkpoint
// metadata.
type txnCommittable struct {
	Version int `json:"v"`
	// TxnID, ProducerID and Epoch identify the transaction at the broker's
	// transaction coordinator; EndTxn(commit) with them commits it, also from
	// a process that never produced to it (Flink's resumeTransaction).
	TxnID      string `json:"txn_id"`
	ProducerID int64  `json:"producer_id"`
	Epoch      int16  `json:"epoch"`
	// MarkerTopic, MarkerPartition and MarkerOffset locate the marker record
	// the transaction wrote last: the control record that follows it for the
	// same producer id tells whether the transaction committed or aborted.
	MarkerTopic     string `json:"marker_topic"`
	MarkerPartition int32  `json:"marker_partition"`
	MarkerOffset    int64  `json:"marker_offset"`
	// Records is how many data records the transaction holds.
	Records int64 `json:"records"`
	// PreparedAt is the checkpoint at whose barrier it was prepared; Subtask
	// and Slot say which sink subtask and which id of its pool wrote it.
	PreparedAt int64 `json:"prepared_at"`
	Subtask    int   `json:"subtask"`
	Slot       int   `json:"slot"`
	// Started is when the subtask produced the transaction's first record;
	// the broker's timeout clock starts a little later.
	Started time.Time `json:"started"`
}

// encode serialises the committable.
func (c *txnCommittable) encode() []byte {
	b, _ := json.Marshal(c) // plain fields only: it cannot fail
	return b
}

// decodeTxnCommittable parses a committable written by encode.
func decodeTxnCommittable(b []byte) (txnCommittable, error) {
	var c txnCommittable
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("kafka sink: decoding committable %q: %w", txnTruncate(b, 200), err)
	}
	if c.Version != txnCommittableVersion {
		return c, fmt.Errorf("kafka sink: committable of transaction %s has format version %d; this build reads version %d", c.TxnID, c.Version, txnCommittableVersion)
	}
	return c, nil
}

// String names the transaction for errors and logs.
func (c *txnCommittable) String() string {
	return fmt.Sprintf("transaction %s (producer id %d, epoch %d; %d records of sink subtask %d prepared at checkpoint %d)",
		c.TxnID, c.ProducerID, c.Epoch, c.Records, c.Subtask, c.PreparedAt)
}

// txnMarker is the value of a marker record: what the transaction is, for
// people and tools reading the marker topic. The committer only needs the
// marker's position and producer id.
type txnMarker struct {
	Version    int    `json:"v"`
	Job        string `json:"job"`
	Sink       string `json:"sink"`
	Subtask    int    `json:"subtask"`
	Checkpoint int64  `json:"checkpoint"`
	TxnID      string `json:"txn_id"`
	Records    int64  `json:"records"`
}

// encode serialises the marker.
func (m *txnMarker) encode() []byte {
	b, _ := json.Marshal(m) // plain fields only: it cannot fail
	return b
}

// txnTruncate shortens b for an error message.
func txnTruncate(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}
