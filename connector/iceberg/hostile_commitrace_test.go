//go:build iceberg

package iceberg_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/apache/iceberg-go/table"

	"github.com/ingest-engine/ingest/internal/failpoint"
)

// sortedKV is the table's rows as sorted "k=v" strings.
func (f *fixture) sortedKV(t *testing.T, name string) []string {
	t.Helper()
	var got []string
	for _, r := range f.scan(t, name, "k", "v") {
		got = append(got, fmt.Sprint(r[0], "=", r[1]))
	}
	sort.Strings(got)
	return got
}

// TestIcebergCommitOutlastsBusyNeighbour: another writer commits to the table
// before each of the committer's first 15 tries of a commit, as a second
// pipeline committing every few tens of milliseconds does on a loaded
// machine. Each lost race is one the other writer won, so the commit goes
// on trying and succeeds on the 16th; it once gave up after 10 and the job
// restarted (TestIcebergTwoPipelinesOneTable). Every row of both writers is
// in the table once.
func TestIcebergCommitOutlastsBusyNeighbour(t *testing.T) {
	const losses = 15
	f := newFixture(t)
	name := "busy"
	h := newHarness(t, f.config(name, kvSchema), "job1", 1)
	ctx := context.Background()
	h.write(0, ints(1, 1))
	if err := h.commit(ctx, h.barrier(1)); err != nil {
		t.Fatal(err)
	}
	fired := 0
	disable := failpoint.Enable("sink/iceberg/commit", func() error {
		fired++
		if fired <= losses {
			if err := f.foreignAppend(t, name, []int64{int64(100 + fired)}, 7); err != nil {
				t.Errorf("foreign append %d: %v", fired, err)
			}
		}
		return nil
	})
	h.write(0, ints(2, 2))
	err := h.commit(ctx, h.barrier(2))
	disable()
	if err != nil {
		t.Fatalf("commit that lost %d races, each to another writer's commit: %v", losses, err)
	}
	if fired != losses+1 {
		t.Errorf("the commit was tried %d times, want %d", fired, losses+1)
	}
	want := []string{"1=1", "2=2"}
	for i := 1; i <= losses; i++ {
		want = append(want, fmt.Sprintf("%d=7", 100+i))
	}
	sort.Strings(want)
	if got := f.sortedKV(t, name); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("table %v, want %v", got, want)
	}
}

// TestIcebergCommitStopsOnPhantomRace: a catalog that says every commit lost
// a race while the table never changes (no other writer committed) fails
// every try alike. The committer must not retry it forever: it stops after
// a few tries on the unchanged table (commitStuckAttempts), fails the commit
// with the catalog's error, and a later commit (as a recovery makes)
// publishes the rows once.
func TestIcebergCommitStopsOnPhantomRace(t *testing.T) {
	f := newFixture(t)
	name := "phantom"
	h := newHarness(t, f.config(name, kvSchema), "job1", 1)
	ctx := context.Background()
	h.write(0, ints(1, 1))
	if err := h.commit(ctx, h.barrier(1)); err != nil {
		t.Fatal(err)
	}
	fired := 0
	disable := failpoint.Enable("sink/iceberg/commit", func() error {
		fired++
		return fmt.Errorf("phantom conflict: %w", table.ErrCommitFailed)
	})
	h.write(0, ints(2, 2))
	c := h.barrier(2)
	err := h.sink.Committer().Commit(ctx, "job1", c)
	disable()
	t.Logf("commit against a catalog reporting phantom races: tried %d times: %v", fired, err)
	if err == nil || !errors.Is(err, table.ErrCommitFailed) {
		t.Fatalf("commit err = %v, want the catalog's %v", err, table.ErrCommitFailed)
	}
	if fired > 6 || !strings.Contains(err.Error(), "no other writer's commit") {
		t.Errorf("the commit was tried %d times on a table nobody changed (err %v), want it to stop after 6", fired, err)
	}
	if got := f.sortedKV(t, name); fmt.Sprint(got) != "[1=1]" {
		t.Errorf("after the failed commit the table holds %v, want [1=1]", got)
	}
	if err := h.commit(ctx, c); err != nil {
		t.Fatalf("re-commit: %v", err)
	}
	if got := f.sortedKV(t, name); fmt.Sprint(got) != "[1=1 2=2]" {
		t.Errorf("after the re-commit the table holds %v, want [1=1 2=2]", got)
	}
}
