package testkit

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"
)

// SyncBuffer is a bytes.Buffer safe for concurrent writers (a logger, a
// child process's output, a library's callback goroutine) and a reader. The
// zero value is ready to use.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// WaitLine waits, 60 s at most, until the buffer holds a line containing
// every part, and returns that line; it fails t after the deadline, with
// the buffer's content.
func (s *SyncBuffer) WaitLine(t testing.TB, parts ...string) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		for _, line := range strings.Split(s.String(), "\n") {
			ok := true
			for _, p := range parts {
				ok = ok && strings.Contains(line, p)
			}
			if ok {
				return line
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no line with %q within 60 s; the buffer holds:\n%s", parts, s.String())
		}
		time.Sleep(time.Millisecond)
	}
}
