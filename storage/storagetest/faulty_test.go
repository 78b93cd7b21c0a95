package storagetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ingest-engine/ingest/storage"
)

func TestFaultyFailNext(t *testing.T) {
	ctx := context.Background()
	f := NewFaulty(newTestLocal(t))
	e1, e2 := errors.New("first"), errors.New("second")
	f.FailNext(OpWriteFile, e1)
	f.FailNext(OpWriteFile, e2)
	if _, err := f.WriteFile(ctx, 1, "a", nil); err != e1 {
		t.Fatalf("first call: %v, want %v", err, e1)
	}
	if _, err := f.WriteFile(ctx, 1, "a", nil); err != e2 {
		t.Fatalf("second call: %v, want %v", err, e2)
	}
	h, err := f.WriteFile(ctx, 1, "a", []byte("x"))
	if err != nil {
		t.Fatalf("third call: %v, want pass-through", err)
	}
	// A failure armed for one op does not hit another.
	f.FailNext(OpDiscard, e1)
	if _, err := f.ReadFile(ctx, h); err != nil {
		t.Fatal(err)
	}
	if err := f.Discard(ctx, 1); err != e1 {
		t.Fatalf("Discard = %v", err)
	}
	// The failed Discard did not reach the storage.
	if got := IDs(t, f); len(got) != 1 {
		t.Fatalf("List = %v", got)
	}
}

func TestFaultyEveryOp(t *testing.T) {
	ctx := context.Background()
	f := NewFaulty(newTestLocal(t))
	h := storage.Handle{Name: "a", Checkpoint: 4}
	calls := map[Op]func() error{
		OpWriteFile:     func() error { _, err := f.WriteFile(ctx, 4, "a", nil); return err },
		OpReadFile:      func() error { _, err := f.ReadFile(ctx, h); return err },
		OpWriteMetadata: func() error { return f.WriteMetadata(ctx, 4, nil) },
		OpReadMetadata:  func() error { _, err := f.ReadMetadata(ctx, 4); return err },
		OpList:          func() error { _, err := f.List(ctx); return err },
		OpDiscard:       func() error { return f.Discard(ctx, 4) },
		OpTrim:          func() error { return f.Trim(ctx, 4, []string{"a"}) },
		OpWriteLedger:   func() error { return f.WriteLedger(ctx, nil) },
		OpReadLedger:    func() error { _, err := f.ReadLedger(ctx); return err },
	}
	wantID := map[Op]int64{OpList: -1, OpWriteLedger: -1, OpReadLedger: -1}
	wantName := map[Op]string{OpWriteFile: "a", OpReadFile: "a", OpWriteMetadata: storage.MetadataName, OpReadMetadata: storage.MetadataName,
		OpWriteLedger: storage.LedgerName, OpReadLedger: storage.LedgerName}
	for op, call := range calls {
		var seen []string
		f.FailWhen(func(o Op, id int64, name string) error {
			seen = append(seen, fmt.Sprintf("%v %d %q", o, id, name))
			return fmt.Errorf("injected into %v", o)
		})
		err := call()
		if err == nil || err.Error() != "injected into "+op.String() {
			t.Errorf("%v: err = %v", op, err)
		}
		id, ok := wantID[op]
		if !ok {
			id = 4
		}
		if want := fmt.Sprintf("%v %d %q", op, id, wantName[op]); len(seen) != 1 || seen[0] != want {
			t.Errorf("%v: FailWhen saw %v, want [%s]", op, seen, want)
		}
	}
	f.FailWhen(nil)
	if _, err := f.WriteFile(ctx, 4, "a", nil); err != nil {
		t.Fatalf("after FailWhen(nil): %v", err)
	}
	if f.Location() == "" {
		t.Error("empty Location")
	}
}

func TestFaultyConcurrent(t *testing.T) {
	ctx := context.Background()
	f := NewFaulty(newTestLocal(t))
	var failed atomic.Int64
	boom := errors.New("boom")
	f.FailWhen(func(op Op, id int64, name string) error {
		if id%2 == 1 {
			return boom
		}
		return nil
	})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				f.FailNext(OpList, boom)
				_, _ = f.List(ctx)
				if _, err := f.WriteFile(ctx, int64(i%4), fmt.Sprintf("g%d-%d", g, i), nil); errors.Is(err, boom) {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if got := failed.Load(); got != 8*50/2 {
		t.Fatalf("%d writes failed, want %d", got, 8*50/2)
	}
}
