package postgres

import "time"

// SetHeartbeatEvery makes writers created from now on refresh their mark
// every d, and returns a function restoring the interval.
func SetHeartbeatEvery(d time.Duration) (restore func()) {
	old := heartbeatNanos.Swap(int64(d))
	return func() { heartbeatNanos.Store(old) }
}
