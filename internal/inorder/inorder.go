// Package inorder runs indexed calls on several goroutines with the
// outcome of running them one by one in order: restores and verifications
// that must report the first damaged part, whichever goroutine found it.
package inorder

import (
	"sync"
	"sync/atomic"
)

// Run calls f(i) for every i in [0, n) on up to workers goroutines (on the
// calling goroutine when workers ≤ 1) and returns when every call it started
// has returned. Its outcome is that of calling f(0), f(1), … one by one and
// stopping at the first failure: the error, or panic re-raised on the
// calling goroutine, of the lowest i that fails. Indexes are handed out in
// increasing order and none once a call failed, so every call below the
// lowest failure has returned. (A re-raised panic keeps its value; its stack
// is the calling goroutine's.) f must be safe to call concurrently.
func Run(n, workers int, f func(i int) error) error {
	if workers = min(workers, n); workers <= 1 {
		for i := range n {
			if err := f(i); err != nil {
				return err
			}
		}
		return nil
	}
	// outcome is one call's result, written by the worker that made the
	// call and read after wg.Wait.
	type outcome struct {
		err      error
		panicked bool
		value    any // the panic value, when panicked
	}
	var (
		outcomes = make([]outcome, n)
		next     atomic.Int64 // the next index to hand out
		failed   atomic.Bool  // a call failed: hand out no more
		wg       sync.WaitGroup
	)
	call := func(i int) {
		o := &outcomes[i]
		defer func() {
			if r := recover(); r != nil {
				o.panicked, o.value = true, r
				failed.Store(true)
			}
		}()
		if o.err = f(i); o.err != nil {
			failed.Store(true)
		}
	}
	for range workers {
		wg.Go(func() {
			for !failed.Load() {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				call(i)
			}
		})
	}
	wg.Wait()
	for i := range outcomes {
		switch o := &outcomes[i]; {
		case o.panicked:
			panic(o.value)
		case o.err != nil:
			return o.err
		}
	}
	return nil
}
