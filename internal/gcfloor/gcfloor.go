// Package gcfloor raises the Go garbage collector's minimum heap goal for the
// ingest process.
//
// Go starts a collection whenever the heap has grown by GOGC percent over
// what the last one found live, but never waits for less than 4 MB. A
// pipeline that keeps little state (a pass-through, a filter, a projection)
// allocates its batches and strings at hundreds of MB per second, so with a
// live heap of one or two MB it collects every few milliseconds, and every
// MB of heap held from program start (a dependency's compiled regular
// expressions, metric registries) makes those collections more frequent
// still. Nexmark q0 spent a quarter of its CPU that way.
//
// Install allocates a ballast: one pointer-free byte slice that is never
// read or written. The collector counts it as live heap, so the heap goal
// becomes at least twice its size, but never scans it (it holds no
// pointers), and the operating system never backs its pages with memory
// (they are never touched), so it costs address space, not RSS. Once the
// real live heap is much larger than the ballast (large keyed state), the
// ballast changes the goal by a fraction and nothing else. This is the
// technique Go's own proposal for a minimum heap goal (golang/go#23044)
// describes as what users do today.
//
// An operator who tunes the collector (GOGC or GOMEMLIMIT in the
// environment) gets exactly what they asked for: Install does nothing then.
package gcfloor

import (
	"os"
	"runtime"
)

// DefaultBallast is the ballast's size: with the default GOGC of 100 the heap
// goal is at least 2 × 16 MiB.
const DefaultBallast = 16 << 20

// ballast keeps the ballast reachable for the life of the process.
var ballast []byte

// Install allocates the ballast of size bytes unless GOGC or GOMEMLIMIT is
// set in the environment or a ballast is installed already. It reports
// whether it installed one. Call it once, early in main.
func Install(size int) bool {
	if ballast != nil || size <= 0 {
		return false
	}
	if _, ok := os.LookupEnv("GOGC"); ok {
		return false
	}
	if _, ok := os.LookupEnv("GOMEMLIMIT"); ok {
		return false
	}
	ballast = make([]byte, size)
	runtime.KeepAlive(ballast)
	return true
}
