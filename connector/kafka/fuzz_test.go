package kafka

import (
	"bytes"
	"maps"
	"slices"
	"testing"
	"time"
)

// fuzzTopic is the topic the position fuzz target restores for; the seeds
// are positions of it.
const fuzzTopic = "orders"

// FuzzSrcRestore feeds srcRestore, which reads a source subtask's replay
// position back from a checkpoint, arbitrary bytes as the position of
// subtask of parallelism (both reduced to at most 8), with or without the
// union of every subtask's positions. The seed corpus,
// testdata/fuzz/FuzzSrcRestore, holds positions written by
// srcPosition.encode. It never panics; garbage is an error; a restore that
// succeeds yields only partitions the subtask owns, with valid offsets and,
// for a bounded source, end offsets, and those partitions, written back as
// the subtask's position, restore to the same.
func FuzzSrcRestore(f *testing.F) {
	end := int64(500)
	for _, p := range []srcPosition{
		{Version: srcPositionVersion, Topic: fuzzTopic, Subtask: 0, Parallelism: 1},
		{Version: srcPositionVersion, Topic: fuzzTopic, Subtask: 1, Parallelism: 2, Partitions: []srcPartitionPosition{{Partition: 3, Next: 17}, {Partition: 1, Next: 0, MaxTime: &end}}},
		{Version: srcPositionVersion, Topic: fuzzTopic, Subtask: 0, Parallelism: 3, Bounded: true, Partitions: []srcPartitionPosition{{Partition: 0, Next: 12, End: &end}, {Partition: 3, Next: 500, End: &end}}},
	} {
		b, err := p.encode()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, uint8(p.Subtask), uint8(p.Parallelism-1), false)
	}
	f.Fuzz(func(t *testing.T, data []byte, subtask, parallelism uint8, union bool) {
		n := int(parallelism)%8 + 1
		s := int(subtask) % n
		res, err := srcRestore([][]byte{data}, fuzzTopic, s, n, union)
		if err != nil {
			return
		}
		if !res.restored {
			if len(data) != 0 || len(res.parts) != 0 {
				t.Fatalf("%q restored %d partitions, yet not as restored", data, len(res.parts))
			}
			return
		}
		for p, pp := range res.parts {
			switch {
			case pp.Partition != p || !srcOwns(p, s, n):
				t.Fatalf("subtask %d of %d restored partition %d as %d", s, n, pp.Partition, p)
			case pp.Next < 0 || (pp.End != nil && *pp.End < 0) || (res.bounded && pp.End == nil):
				t.Fatalf("restored an invalid position of partition %d: %+v (bounded %v)", p, pp, res.bounded)
			}
		}
		own := srcPosition{Version: srcPositionVersion, Topic: fuzzTopic, Subtask: s, Parallelism: n, Bounded: res.bounded,
			Partitions: slices.Collect(maps.Values(res.parts))}
		b, err := own.encode()
		if err != nil {
			t.Fatalf("encoding restored partitions: %v", err)
		}
		again, err := srcRestore([][]byte{b}, fuzzTopic, s, n, false)
		if err != nil {
			t.Fatalf("restored partitions written as %s do not restore: %v", b, err)
		}
		if again.bounded != res.bounded || !maps.EqualFunc(again.parts, res.parts, samePartitionPosition) {
			t.Fatalf("%q restores to %+v, which written as %s restores to %+v", data, res.parts, b, again.parts)
		}
	})
}

func samePartitionPosition(a, b srcPartitionPosition) bool {
	eq := func(x, y *int64) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	return a.Partition == b.Partition && a.Next == b.Next && eq(a.End, b.End) && eq(a.MaxTime, b.MaxTime)
}

// FuzzTxnCommittable feeds decodeTxnCommittable, which reads a prepared
// transaction back from a checkpoint's metadata to commit it at recovery,
// arbitrary bytes. The seed corpus, testdata/fuzz/FuzzTxnCommittable, holds
// committables written by encode. It never panics; what it accepts has
// the known format version, and encode writes it as bytes that decode to
// the same committable and encode again to the same bytes.
func FuzzTxnCommittable(f *testing.F) {
	f.Add((&txnCommittable{Version: txnCommittableVersion, TxnID: "sink-0-1", ProducerID: 4000, Epoch: 3,
		MarkerTopic: "__ingest_markers", MarkerPartition: 0, MarkerOffset: 99, Records: 1000, PreparedAt: 7, Subtask: 0, Slot: 1,
		Started: time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC)}).encode())
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := decodeTxnCommittable(data)
		if err != nil {
			return
		}
		if c.Version != txnCommittableVersion {
			t.Fatalf("accepted format version %d", c.Version)
		}
		enc := c.encode()
		c2, err := decodeTxnCommittable(enc)
		if err != nil {
			t.Fatalf("committable %q, encoded as %q, does not decode: %v", data, enc, err)
		}
		if enc2 := c2.encode(); !bytes.Equal(enc, enc2) || !c2.Started.Equal(c.Started) {
			t.Fatalf("committable %q encodes as %q, which decodes and encodes as %q", data, enc, enc2)
		}
		c.Started, c2.Started = time.Time{}, time.Time{}
		if c != c2 {
			t.Fatalf("committable %+v encodes as %q, which decodes to %+v", c, enc, c2)
		}
	})
}
