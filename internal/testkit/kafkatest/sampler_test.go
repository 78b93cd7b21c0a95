package kafkatest

import (
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	a, b, c := Txn{1, 0}, Txn{2, 0}, Txn{3, 0}
	markers := map[Txn]Marker{a: {Checkpoint: 1, TxnID: "a", Records: 3}, b: {Checkpoint: 2, TxnID: "b", Records: 2}}
	samples := []Sample{
		{Latest: 1, Counts: map[Txn]int64{a: 3}},       // fine
		{Latest: 1, Counts: map[Txn]int64{a: 3, b: 2}}, // b's checkpoint 2 not complete yet
		{Latest: 2, Counts: map[Txn]int64{a: 3, b: 1}}, // b in part
		{Latest: 2, Counts: map[Txn]int64{c: 1}},       // no committed marker
	}
	problems, partial := Check(samples, markers, true)
	if partial != 1 || len(problems) != 3 {
		t.Fatalf("Check (whole) = %d problems %q, partial %d; want 3 problems, partial 1", len(problems), problems, partial)
	}
	for i, want := range []string{"sample 1:", "sample 2:", "sample 3:"} {
		if !strings.HasPrefix(problems[i], want) {
			t.Errorf("problem %d = %q, want it to start with %q", i, problems[i], want)
		}
	}
	problems, partial = Check(samples, markers, false)
	if partial != 1 || len(problems) != 2 {
		t.Fatalf("Check (not whole) = %q, partial %d; want 2 problems, partial 1", problems, partial)
	}
}
