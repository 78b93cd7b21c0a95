package postgres

import (
	"encoding/json"
	"fmt"
)

// batch is what one committable names: the rows a writer staged between two
// barriers. They are the staging rows with ingest_writer = Writer and
// First <= ingest_seq < End, all durable when the committable was made.
//
// INVARIANT: End > First (a writer that staged nothing since its previous
// barrier makes no committable), and the ranges of one writer never overlap.
type batch struct {
	// Prepared is the checkpoint at whose barrier the rows were staged
	// (Committable.PreparedAt), repeated here because a Commit carries only
	// the committables' data.
	Prepared int64 `json:"prepared_at"`
	// Subtask is the writer's subtask index, for the order of upserts.
	Subtask int32 `json:"subtask"`
	// Writer is the writer's id in ingest_sink_writers.
	Writer int64 `json:"writer"`
	// First and End bound the batch's sequence numbers: [First, End).
	First int64 `json:"first_seq"`
	End   int64 `json:"end_seq"`
}

func (b batch) encode() []byte {
	data, _ := json.Marshal(b) // a struct of integers always marshals
	return data
}

func decodeBatch(data []byte) (batch, error) {
	var b batch
	if err := json.Unmarshal(data, &b); err != nil {
		return batch{}, fmt.Errorf("committable %q: %w", data, err)
	}
	if b.End <= b.First || b.Writer == 0 {
		return batch{}, fmt.Errorf("committable %q names no rows", data)
	}
	return b, nil
}

// rows is how many rows the batch holds.
func (b batch) rows() int64 { return b.End - b.First }
