package runtime

import (
	"testing"
	"time"
)

// The history keeps the last HistorySize checkpoints, newest first, and
// forgets older ones entirely (Checkpoint(id) no longer finds them).
func TestHistoryRing(t *testing.T) {
	var h history
	const extra = 5
	t0 := time.Unix(0, 0)
	for id := int64(1); id <= HistorySize+extra; id++ {
		h.add(&CheckpointRecord{ID: id, Status: CheckpointInProgress, TriggeredAt: t0.Add(time.Duration(id) * time.Second)})
	}
	all := h.newestFirst()
	if len(all) != HistorySize {
		t.Fatalf("history holds %d records, want %d", len(all), HistorySize)
	}
	for i, r := range all {
		if want := int64(HistorySize + extra - i); r.ID != want {
			t.Fatalf("record %d has id %d, want %d (newest first)", i, r.ID, want)
		}
	}
	for id := int64(1); id <= extra; id++ {
		if h.get(id) != nil {
			t.Errorf("checkpoint %d is still kept after %d newer ones", id, HistorySize)
		}
	}
	if r := h.get(extra + 1); r == nil || r.ID != extra+1 {
		t.Errorf("get(%d) = %+v, want the oldest kept record", extra+1, r)
	}
	if n := len(h.inProgress()); n != HistorySize {
		t.Errorf("%d records in progress, want %d", n, HistorySize)
	}
}

// A record's totals follow its acknowledgements, and a copy does not share
// them with the history.
func TestHistoryRecordAck(t *testing.T) {
	r := &CheckpointRecord{ID: 1, Status: CheckpointInProgress, TriggeredAt: time.Unix(10, 0)}
	r.ack(SubtaskCheckpoint{Sync: 3, Async: 10, Alignment: 7, StateSize: 100, StorageWrite: 4})
	r.ack(SubtaskCheckpoint{Sync: 5, Async: 2, Alignment: 1, StateSize: 50, StorageWrite: 9})
	if r.SyncMax != 5 || r.AsyncMax != 10 || r.AlignmentMax != 7 || r.StateSizeFull != 150 || r.StateWriteMax != 9 {
		t.Fatalf("totals %+v", r)
	}
	c := r.clone()
	c.Subtasks[0].StateSize = 0
	if r.Subtasks[0].StateSize != 100 {
		t.Fatal("a clone shares its subtasks with the history")
	}
	r.end(CheckpointFailed, "declined", time.Unix(12, 0))
	if r.Duration != 2*time.Second || r.FailureReason != "declined" || r.Status != CheckpointFailed {
		t.Fatalf("ended record %+v", r)
	}
}

// A histogram counts an observation in the first bucket whose bound is not
// below it, and above the last bound only in the count.
func TestHistogramBuckets(t *testing.T) {
	var h histogram
	h.observe(secs(0.001))
	h.observe(secs(0.0011))
	h.observe(20 * time.Minute)
	s := h.snapshot()
	if s.Count != 3 || s.Counts[1] != 1 || s.Counts[2] != 1 {
		t.Fatalf("snapshot %+v", s)
	}
	cum := s.Cumulative()
	if cum[0.0005] != 0 || cum[0.001] != 1 || cum[0.0025] != 2 || cum[600] != 2 {
		t.Fatalf("cumulative %v", cum)
	}
	if want := 0.0021 + 1200; s.Sum < want-1e-9 || s.Sum > want+1e-9 {
		t.Fatalf("sum %v, want %v", s.Sum, want)
	}
}

// secs converts seconds to a Duration.
func secs(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
