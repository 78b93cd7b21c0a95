package nats

// SetMaxTrackedHoles sets the number of deleted sequences the source keeps
// track of, for a test, and returns the function that restores it.
func SetMaxTrackedHoles(n int) (restore func()) {
	old := maxTrackedHoles
	maxTrackedHoles = n
	return func() { maxTrackedHoles = old }
}
