package kafka

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ingest-engine/ingest/stream"
)

// srcPositionOf writes the position subtask s of n would hold for parts.
func srcPositionOf(t *testing.T, s, n int, bounded bool, parts ...srcPartitionPosition) []byte {
	t.Helper()
	pos := &srcPosition{Version: srcPositionVersion, Topic: "t", Subtask: s, Parallelism: n, Bounded: bounded, Partitions: parts}
	b, err := pos.encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func srcPP(p int32, next int64, end *int64) srcPartitionPosition {
	return srcPartitionPosition{Partition: p, Next: next, End: end}
}

func ptr(v int64) *int64 { return &v }

// The position is designed for rescaling: from the union of every subtask's
// position (runtime.Context.RestoredUnion), each new subtask takes exactly
// the partitions it owns, with their offsets and end offsets; subtask 0
// alone takes the bad-record counts, so their sum is kept.
func TestSrcRestoreUnionRescales(t *testing.T) {
	// Seven partitions at parallelism 2: subtask 0 has 0,2,4,6; 1 has 1,3,5.
	old := [][]byte{
		srcPositionOf(t, 0, 2, true, srcPP(0, 10, ptr(20)), srcPP(2, 12, ptr(22)), srcPP(4, 14, ptr(24)), srcPP(6, 16, ptr(26))),
		srcPositionOf(t, 1, 2, true, srcPP(1, 11, ptr(21)), srcPP(3, 13, ptr(23)), srcPP(5, 15, ptr(25))),
	}
	for _, n := range []int{1, 2, 3, 7, 9} {
		seen := map[int32]bool{}
		for s := range n {
			res, err := srcRestore(old, "t", s, n, true)
			if err != nil {
				t.Fatalf("union restore to subtask %d of %d: %v", s, n, err)
			}
			if !res.restored || !res.bounded {
				t.Fatalf("restored %v bounded %v", res.restored, res.bounded)
			}
			for p, pp := range res.parts {
				if int(p)%n != s {
					t.Fatalf("subtask %d of %d got partition %d", s, n, p)
				}
				if pp.Next != 10+int64(p) || pp.End == nil || *pp.End != 20+int64(p) {
					t.Fatalf("partition %d restored as %+v", p, pp)
				}
				seen[p] = true
			}
		}
		if len(seen) != 7 {
			t.Fatalf("parallelism %d: %d of 7 partitions restored", n, len(seen))
		}
	}
	// The same partition in two positions is a corrupt checkpoint.
	dup := append(old, srcPositionOf(t, 2, 3, true, srcPP(0, 1, ptr(2))))
	if _, err := srcRestore(dup, "t", 0, 1, true); err == nil || !strings.Contains(err.Error(), "two subtasks") {
		t.Errorf("duplicate partition: %v", err)
	}
	// Without the union, a position of another subtask or parallelism is
	// refused.
	if _, err := srcRestore(old[:1], "t", 0, 3, false); err == nil || !strings.Contains(err.Error(), "must get its own position") {
		t.Errorf("own position at another parallelism: %v", err)
	}
	// Bad-record counts: summed once, by subtask 0.
	counted := make([][]byte, 2)
	for s := range 2 {
		pos := &srcPosition{Version: srcPositionVersion, Topic: "t", Subtask: s, Parallelism: 2,
			Partitions: []srcPartitionPosition{srcPP(int32(s), 5, nil)}, Bad: &stream.BadRecordTally{Skipped: int64(s + 1), DeadLettered: 10 * int64(s+1)}}
		b, err := pos.encode()
		if err != nil {
			t.Fatal(err)
		}
		counted[s] = b
	}
	var sum stream.BadRecordTally
	for s := range 3 {
		res, err := srcRestore(counted, "t", s, 3, true)
		if err != nil {
			t.Fatal(err)
		}
		sum.Skipped += res.bad.Skipped
		sum.DeadLettered += res.bad.DeadLettered
	}
	if sum.Skipped != 3 || sum.DeadLettered != 30 {
		t.Errorf("bad-record counts after a rescale from 2 to 3 sum to %+v, want 3 skipped and 30 dead-lettered", sum)
	}
	// A bounded position without end offsets is refused.
	bad := srcPositionOf(t, 0, 1, true, srcPP(0, 1, nil))
	if _, err := srcRestore([][]byte{bad}, "t", 0, 1, false); err == nil || !strings.Contains(err.Error(), "no end offset") {
		t.Errorf("bounded without end: %v", err)
	}
	// A position of an unknown format version is refused.
	var v map[string]any
	_ = json.Unmarshal(old[0], &v)
	v["v"] = 99
	future, _ := json.Marshal(v)
	if _, err := srcRestore([][]byte{future}, "t", 0, 2, false); err == nil || !strings.Contains(err.Error(), "format version 99") {
		t.Errorf("future version: %v", err)
	}
}
