package gcfloor

import (
	"os"
	"runtime"
	"runtime/metrics"
	"testing"
)

func heapGoal() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/goal:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// An operator's GOGC or GOMEMLIMIT wins: no ballast then.
func TestInstallLeavesTunedCollectorAlone(t *testing.T) {
	for _, env := range []string{"GOGC", "GOMEMLIMIT"} {
		t.Run(env, func(t *testing.T) {
			t.Setenv(env, map[string]string{"GOGC": "100", "GOMEMLIMIT": "1GiB"}[env])
			if Install(DefaultBallast) {
				ballast = nil
				t.Fatalf("Install put a ballast in place with %s set", env)
			}
		})
	}
}

// With the ballast, a collection of a nearly empty heap sets a goal of at
// least twice the ballast, where Go's own floor is 4 MB.
func TestInstallRaisesTheHeapGoal(t *testing.T) {
	for _, env := range []string{"GOGC", "GOMEMLIMIT"} {
		if _, ok := os.LookupEnv(env); ok {
			t.Skipf("%s is set in the environment: Install leaves the collector alone", env)
		}
	}
	runtime.GC()
	before := heapGoal()
	if !Install(DefaultBallast) {
		t.Fatal("Install did nothing")
	}
	defer func() { ballast = nil }()
	if Install(DefaultBallast) {
		t.Fatal("a second Install added another ballast")
	}
	runtime.GC()
	if got := heapGoal(); got < 2*DefaultBallast {
		t.Fatalf("heap goal %d after Install (before: %d), want at least %d", got, before, 2*DefaultBallast)
	}
}
