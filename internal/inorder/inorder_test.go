package inorder_test

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/ingest-engine/ingest/internal/inorder"
)

// The outcome is the sequential one whatever the workers: every index
// below the lowest failure is called, and its error (or panic) is the one
// returned (re-raised), though a higher index may fail first.
func TestRunReportsTheLowestFailure(t *testing.T) {
	for _, workers := range []int{0, 1, 2, 8, 100} {
		for _, fail := range []int{-1, 0, 37, 99} {
			t.Run(fmt.Sprintf("workers=%d/fail=%d", workers, fail), func(t *testing.T) {
				var called [100]atomic.Bool
				err := inorder.Run(100, workers, func(i int) error {
					called[i].Store(true)
					if i == fail || (fail >= 0 && i == 99) { // 99 fails too, often first
						return fmt.Errorf("call %d", i)
					}
					return nil
				})
				want := ""
				if fail >= 0 {
					want = fmt.Sprintf("call %d", fail)
				}
				if got := fmt.Sprint(err); (err == nil) != (want == "") || (err != nil && got != want) {
					t.Fatalf("Run: %v, want %q", err, want)
				}
				last := 99
				if fail >= 0 {
					last = fail
				}
				for i := 0; i <= last; i++ {
					if !called[i].Load() {
						t.Fatalf("index %d, below the lowest failure %d, was not called", i, last)
					}
				}
				if workers <= 1 && fail >= 0 {
					for i := fail + 1; i < 100; i++ {
						if called[i].Load() {
							t.Fatalf("one by one, index %d was called after %d failed", i, fail)
						}
					}
				}
			})
		}
	}
}

func TestRunReraisesThePanicOfTheLowestIndex(t *testing.T) {
	boom := errors.New("boom")
	defer func() {
		if r := recover(); r != boom {
			t.Fatalf("recovered %v, want the panic of index 3", r)
		}
	}()
	_ = inorder.Run(50, 4, func(i int) error {
		switch {
		case i == 3:
			panic(boom)
		case i > 3:
			return errors.New("later")
		}
		return nil
	})
	t.Fatal("Run returned instead of panicking")
}
