package pgcdc

import (
	"encoding/json"
	"fmt"

	"github.com/jackc/pglogrepl"

	"github.com/ingest-engine/ingest/row"
)

// position is the source's replay position, stored with each checkpoint.
//
// Invariants:
//   - Every captured table's rows were emitted once by a snapshot, chunk by
//     chunk in primary key order. A table's segments say which snapshot read
//     which keys: segment i holds the keys after segment i-1's Upto up to its
//     own Upto (the last segment with Upto nil: to the table's end), read
//     under the snapshot of slot position LSN. A table whose last segment
//     has an Upto is still being read; a table without segments is not read
//     yet.
//   - A change to a row is emitted only when its transaction commits at or
//     after the LSN of the segment its key is in: transactions that
//     committed before it are in the snapshot that read the key.
//   - Last is the commit LSN of the last transaction emitted; a transaction
//     committing at or before it is skipped when the slot sends it again.
//     End is where the slot may be confirmed to once this checkpoint is
//     complete: the end of that transaction, or a later position the server
//     reported with every transaction before it already received.
type position struct {
	V      int                   `json:"v"`
	Slot   string                `json:"slot"`
	Tables map[string][]*segment `json:"tables"`
	// OIDs are the tables' OIDs when read: a table dropped and created
	// again under its name is another table, whose rows no snapshot read.
	OIDs map[string]uint32 `json:"oids"`
	Last pglogrepl.LSN     `json:"last"`
	End  pglogrepl.LSN     `json:"end"`
	// Stop is the end of stop_at: latest (0: none).
	Stop pglogrepl.LSN `json:"stop,omitempty"`
	// MaxTime is the greatest event time emitted (it restores the
	// watermark).
	MaxTime *int64 `json:"max_time,omitempty"`
}

// segment is a key range of a table read by one snapshot (see position).
type segment struct {
	// Upto is the range's greatest key, one text value per key column;
	// nil for the rest of the table.
	Upto []string `json:"upto"`
	// LSN is the consistent point of the snapshot that read the range.
	LSN pglogrepl.LSN `json:"lsn"`
	// upto is Upto decoded (keyOf).
	upto []row.Value
}

const positionVersion = 1

func (p *position) encode() ([]byte, error) {
	p.V = positionVersion
	return json.Marshal(p)
}

// decodePosition reads a stored position of slot, decoding its keys by the
// tables' key columns.
func decodePosition(b []byte, slot string, tables []*Table) (position, error) {
	var p position
	if err := json.Unmarshal(b, &p); err != nil {
		return p, fmt.Errorf("decoding the checkpoint's position: %w", err)
	}
	if p.V != positionVersion {
		return p, fmt.Errorf("the checkpoint's position is of version %d; this build reads version %d", p.V, positionVersion)
	}
	if p.Slot != slot {
		return p, fmt.Errorf("the checkpoint read replication slot %q, not %q: a checkpoint's changes are only in its own slot (start without the checkpoint to take a new snapshot)", p.Slot, slot)
	}
	for _, t := range tables {
		for _, s := range p.Tables[t.Qualified()] {
			if s.Upto == nil {
				continue
			}
			k, err := t.keyOf(s.Upto)
			if err != nil {
				return p, fmt.Errorf("the checkpoint's snapshot position of %s: %w", t.Qualified(), err)
			}
			s.upto = k
		}
	}
	return p, nil
}

// keyOf decodes a key's text values.
func (t *Table) keyOf(text []string) ([]row.Value, error) {
	if len(text) != len(t.Key) {
		return nil, fmt.Errorf("a key of %d values for the %d primary key columns", len(text), len(t.Key))
	}
	out := make([]row.Value, len(text))
	for i, k := range t.Key {
		c := t.Columns[k]
		v, err := decodeText(c.Kind(), c.OID, text[i])
		if err != nil {
			return nil, fmt.Errorf("key column %s: %w", c.Name, err)
		}
		out[i] = v
	}
	return out, nil
}

// compareKeys orders two keys of t column by column.
func compareKeys(a, b []row.Value) int {
	for i := range a {
		if c := compareKey(a[i], b[i]); c != 0 {
			return c
		}
	}
	return 0
}

// snapshotLSN is the LSN of the snapshot that read key (the segment it is
// in); ok is false when no snapshot has read it yet.
func snapshotLSN(segs []*segment, key []row.Value) (pglogrepl.LSN, bool) {
	for _, s := range segs {
		if s.upto == nil || compareKeys(key, s.upto) <= 0 {
			return s.LSN, true
		}
	}
	return 0, false
}

// done says whether a table's snapshot is complete.
func done(segs []*segment) bool { return len(segs) > 0 && segs[len(segs)-1].Upto == nil }

// prune merges the segments of every table whose snapshots are all at or
// before the last emitted commit: no change can be filtered by them any
// more, so one segment of LSN 0 stands for them.
func (p *position) prune() {
	for name, segs := range p.Tables {
		if !done(segs) || len(segs) == 1 && segs[0].LSN == 0 {
			continue
		}
		all := true
		for _, s := range segs {
			all = all && s.LSN <= max(p.Last, p.End)
		}
		if all {
			p.Tables[name] = []*segment{{}}
		}
	}
}
