//go:build !unix

package nexmark_test

import "time"

// cpuTime is not measured here; benchmarks then omit events/cpu-s.
func cpuTime() time.Duration { return 0 }
