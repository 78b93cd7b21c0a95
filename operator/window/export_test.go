package window

import "github.com/ingest-engine/ingest/runtime"

// StateSize returns the number of state entries (windows or panes; keys with
// sessions) and of pending timers of a window operator subtask, or -1, -1 for
// another operator: tests check that state goes when it should.
func StateSize(op runtime.Operator) (entries, timers int) {
	if s, ok := op.(interface{ stateSize() (int, int) }); ok {
		return s.stateSize()
	}
	return -1, -1
}

func (w *alignedOp[T, K, A, O]) stateSize() (int, int) { return w.accs.Len(), 0 }
func (w *sessionOp[T, K, A, O]) stateSize() (int, int) { return w.sessions.Len(), w.timers.Len() }
func (w *paneOp[T, K, A, O]) stateSize() (int, int)    { return w.sets.Len(), w.sets.Len() }
